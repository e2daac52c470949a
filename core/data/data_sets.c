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

/* What a set takes from the random stream, in the stream's order: its
 * centre (drawn by the caller), its rotation, then one uniform per entry
 * of its n x G expression when dropout is on. Taken apart from filling the
 * set, so the sets of a batch can be drawn in order and then filled in
 * parallel, and a set another rank trains can be drawn without filling
 * its expression: either way the stream ends where drawing one set after
 * another leaves it. */
typedef struct set_draw {
    int64_t centre;
    int n;              /* cells in the set; the rest of N is padding */
    float rot[9];       /* used when the sampler rotates */
    ast_rng dropout;    /* the stream where the set's dropout draws start */
} set_draw;

/* The cells of the split in the centre's slice, at most N: nearest()'s count. */
static int set_cells_count(const ast_set_sampler *s, int64_t centre)
{
    const ast_dataset *d = s->d;
    int64_t m = 0;
    for (int64_t i = 0; i < s->split->n && m < s->set_size; i++) m += d->slice[s->split->cells[i]] == d->slice[centre];
    return (int)m;
}

static void draw_set(const ast_set_sampler *s, int64_t centre, ast_rng *rng, set_draw *w)
{
    *w = (set_draw){.centre = centre, .n = set_cells_count(s, centre)};
    if (s->rotate) random_rotation(rng, w->rot);
    if (!(s->expr_dropout > 0.0f)) return;
    w->dropout = *rng;
    for (int64_t k = (int64_t)w->n * s->d->n_genes; k > 0; k--) ast_rng_next(rng); /* what uniform01 takes */
}

/* The set of draw w; its expression too when with_expr (the rows of sets
 * another rank trains are left as they were). */
static void fill_set(const ast_set_sampler *s, const set_draw *w, int with_expr, float *expr, float *pos, float *mask)
{
    const ast_dataset *d = s->d;
    int N = s->set_size, G = d->n_genes;
    int64_t *cells = ast_xmalloc((size_t)N * sizeof *cells);
    int n = nearest(d, s->split, w->centre, N, cells);
    ast_rng dropout = w->dropout;
    if (with_expr) memset(expr, 0, (size_t)N * G * sizeof(float));
    memset(pos, 0, (size_t)N * 3 * sizeof(float));
    double mean[3] = {0};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) mean[k] += d->pos[cells[i] * 3 + k] / (double)n;
    const float *rot = w->rot;
    for (int i = 0; i < N; i++) {
        mask[i] = i < n ? 1.0f : 0.0f;
        if (i >= n) continue;
        float v[3];
        for (int k = 0; k < 3; k++) v[k] = (float)((d->pos[cells[i] * 3 + k] - mean[k]) / s->pos_scale);
        for (int k = 0; k < 3; k++)
            pos[i * 3 + k] = s->rotate ? rot[k * 3] * v[0] + rot[k * 3 + 1] * v[1] + rot[k * 3 + 2] * v[2] : v[k];
        if (!with_expr) continue;
        ast_data_row(d, cells[i], expr + (int64_t)i * G);
        if (s->expr_dropout > 0.0f)
            for (int g = 0; g < G; g++)
                if (ast_rng_uniform01(&dropout) < s->expr_dropout) expr[(int64_t)i * G + g] = 0.0f;
    }
    free(cells);
}

void ast_make_set(const ast_set_sampler *s, int64_t centre, ast_rng *rng, float *expr, float *pos, float *mask)
{
    set_draw w;
    draw_set(s, centre, rng, &w);
    fill_set(s, &w, 1, expr, pos, mask);
}

int ast_set_cells(const ast_set_sampler *s, int64_t centre, int64_t *cells)
{
    return nearest(s->d, s->split, centre, s->set_size, cells);
}

typedef struct fill_job {
    const ast_set_sampler *s;
    const set_draw *draws;
    int lo, hi;
    float *expr, *pos, *mask;
} fill_job;

static void fill_sets(void *arg, int64_t first, int64_t end)
{
    const fill_job *j = arg;
    int64_t N = j->s->set_size, G = j->s->d->n_genes;
    for (int64_t b = first; b < end; b++)
        fill_set(j->s, &j->draws[b], b >= j->lo && b < j->hi, j->expr + b * N * G, j->pos + b * N * 3, j->mask + b * N);
}

void ast_sample_sets_of(const ast_set_sampler *s, ast_rng *rng, int B, int lo, int hi, float *expr, float *pos,
                        float *mask)
{
    set_draw *draws = ast_xmalloc((size_t)B * sizeof *draws);
    for (int b = 0; b < B; b++)
        draw_set(s, s->split->cells[ast_rng_next(rng) % (uint64_t)s->split->n], rng, &draws[b]);
    fill_job j = {s, draws, lo, hi, expr, pos, mask};
    ast_parallel_for(B, 1, fill_sets, &j);
    free(draws);
}

void ast_sample_sets(const ast_set_sampler *s, ast_rng *rng, int B, float *expr, float *pos, float *mask)
{
    ast_sample_sets_of(s, rng, B, 0, B, expr, pos, mask);
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
