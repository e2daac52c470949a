/* Spatial splits and neighbourhood sets: the model sees sets of N cells,
 * each a spatial neighbourhood, as LUNA-style training does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_keyed.h"

int ast_cmp_keyed(const void *a, const void *b)
{
    float x = ((const ast_keyed *)a)->key, y = ((const ast_keyed *)b)->key;
    return (x > y) - (x < y);
}

/* Indices of the k cells of the split nearest to `centre` in its slice, nearest first. */
static int nearest(const ast_dataset *d, const ast_split *s, int64_t centre, int k, int64_t *out)
{
    ast_keyed *cand = ast_xmalloc((size_t)s->n * sizeof *cand);
    int64_t m = 0;
    const float *p0 = d->pos + centre * 3;
    for (int64_t i = 0; i < s->n; i++) {
        int64_t c = s->cells[i];
        if (d->slice[c] != d->slice[centre]) continue;
        const float *p = d->pos + c * 3;
        float dx = p[0] - p0[0], dy = p[1] - p0[1], dz = p[2] - p0[2];
        cand[m++] = (ast_keyed){dx * dx + dy * dy + dz * dz, c};
    }
    qsort(cand, (size_t)m, sizeof *cand, ast_cmp_keyed);
    int n = m < k ? (int)m : k;
    for (int i = 0; i < n; i++) out[i] = cand[i].cell;
    free(cand);
    return n;
}

int ast_data_max_set_size(const ast_dataset *d, const ast_split *s, int set_size, int cap)
{
    if (set_size > 0) return set_size;
    int64_t *count = ast_xcalloc((size_t)d->n_slices, sizeof *count), most = 1; /* an empty split still gets a set */
    for (int64_t i = 0; i < s->n; i++) {
        int64_t n = ++count[d->slice[s->cells[i]]];
        if (n > most) most = n;
    }
    free(count);
    return most < cap ? (int)most : cap;
}

/* A uniformly random rotation from a random unit quaternion. */
static void random_rotation(ast_rng *rng, float r[9])
{
    float q[4], norm = 0.0f;
    for (int i = 0; i < 4; i++) q[i] = ast_rng_gauss(rng), norm += q[i] * q[i];
    norm = sqrtf(norm);
    float w = q[0] / norm, x = q[1] / norm, y = q[2] / norm, z = q[3] / norm;
    float m[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - z * w),     2 * (x * z + y * w),
                  2 * (x * y + z * w),     1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                  2 * (x * z - y * w),     2 * (y * z + x * w),     1 - 2 * (x * x + y * y)};
    memcpy(r, m, sizeof m);
}

void ast_make_set(const ast_set_sampler *s, int64_t centre, ast_rng *rng, float *expr, float *pos, float *mask)
{
    const ast_dataset *d = s->d;
    int N = s->set_size, G = d->n_genes;
    int64_t *cells = ast_xmalloc((size_t)N * sizeof *cells);
    int n = nearest(d, s->split, centre, N, cells);
    memset(expr, 0, (size_t)N * G * sizeof(float));
    memset(pos, 0, (size_t)N * 3 * sizeof(float));
    double mean[3] = {0};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) mean[k] += d->pos[cells[i] * 3 + k] / (double)n;
    float rot[9] = {0};
    if (s->rotate) random_rotation(rng, rot);
    for (int i = 0; i < N; i++) {
        mask[i] = i < n ? 1.0f : 0.0f;
        if (i >= n) continue;
        ast_data_row(d, cells[i], expr + (int64_t)i * G);
        float v[3];
        for (int k = 0; k < 3; k++) v[k] = (float)((d->pos[cells[i] * 3 + k] - mean[k]) / s->pos_scale);
        for (int k = 0; k < 3; k++)
            pos[i * 3 + k] = s->rotate ? rot[k * 3] * v[0] + rot[k * 3 + 1] * v[1] + rot[k * 3 + 2] * v[2] : v[k];
        if (s->expr_dropout > 0.0f)
            for (int g = 0; g < G; g++)
                if (ast_rng_uniform01(rng) < s->expr_dropout) expr[(int64_t)i * G + g] = 0.0f;
    }
    free(cells);
}

int ast_set_cells(const ast_set_sampler *s, int64_t centre, int64_t *cells)
{
    return nearest(s->d, s->split, centre, s->set_size, cells);
}

void ast_sample_sets(const ast_set_sampler *s, ast_rng *rng, int B, float *expr, float *pos, float *mask)
{
    int N = s->set_size, G = s->d->n_genes;
    for (int b = 0; b < B; b++) {
        int64_t centre = s->split->cells[ast_rng_next(rng) % (uint64_t)s->split->n];
        ast_make_set(s, centre, rng, expr + (int64_t)b * N * G, pos + (int64_t)b * N * 3, mask + (int64_t)b * N);
    }
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

float ast_data_position_scale(const ast_dataset *d, const ast_split *s, int set_size, uint64_t seed)
{
    enum { PROBES = 64 };
    ast_set_sampler probe = {d, s, set_size, 1.0f, 0, 0.0f};
    float *expr = ast_xmalloc((size_t)set_size * d->n_genes * sizeof(float));
    float *pos = ast_xmalloc((size_t)set_size * 3 * sizeof(float)), *mask = ast_xmalloc((size_t)set_size * sizeof(float));
    float radius[PROBES];
    ast_rng rng;
    ast_rng_seed(&rng, seed);
    for (int i = 0; i < PROBES; i++) {
        ast_sample_sets(&probe, &rng, 1, expr, pos, mask);
        double sq = 0.0, n = 0.0;
        for (int j = 0; j < set_size; j++) {
            n += mask[j];
            for (int k = 0; k < 3; k++) sq += (double)pos[j * 3 + k] * pos[j * 3 + k];
        }
        radius[i] = (float)sqrt(sq / fmax(n, 1.0));
    }
    qsort(radius, PROBES, sizeof *radius, cmp_float);
    free(expr), free(pos), free(mask);
    float med = radius[PROBES / 2];
    return med > 0.0f ? med : 1.0f;
}
