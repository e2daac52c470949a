/* The sets a held-out evaluation places (see alphast/eval_sets.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eval/eval_sets.h"

static const char *protocol_names[] = {"region", "oracle_neighbourhoods"};

const char *ast_eval_protocol_name(ast_eval_protocol p) { return protocol_names[p]; }

int ast_eval_protocol_parse(const char *s, ast_eval_protocol *out)
{
    int i = ast_name_index(s, protocol_names, 2);
    if (i >= 0) *out = (ast_eval_protocol)i;
    return i < 0 ? -1 : 0;
}

static void sets_alloc(ast_eval_sets *e, int B, int N, int G)
{
    *e = (ast_eval_sets){B, N, G, ast_xcalloc((size_t)B * N * G, sizeof(float)), ast_xcalloc((size_t)B * N * 3, sizeof(float)),
                         ast_xcalloc((size_t)B * N, sizeof(float)), ast_xmalloc((size_t)B * N * sizeof(int64_t)),
                         ast_xcalloc((size_t)B, sizeof(int))};
    for (int64_t i = 0; i < (int64_t)B * N; i++) e->cells[i] = -1;
}

void ast_eval_sets_free(ast_eval_sets *e)
{
    free(e->expr), free(e->pos), free(e->mask), free(e->cells), free(e->slice);
    memset(e, 0, sizeof *e);
}

/* Fills set b from n dataset cells: expression as is, positions centred on
 * the set's mean and divided by the sampler's length unit. */
static void fill_set(const ast_set_sampler *s, ast_eval_sets *e, int b, const int64_t *cells, int n)
{
    const ast_dataset *d = s->d;
    double mean[3] = {0};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) mean[k] += d->pos[cells[i] * 3 + k] / (double)n;
    e->slice[b] = n ? d->slice[cells[0]] : 0;
    for (int i = 0; i < n; i++) {
        int64_t row = (int64_t)b * e->N + i;
        e->cells[row] = cells[i];
        e->mask[row] = 1.0f;
        ast_data_row(d, cells[i], e->expr + row * e->G);
        for (int k = 0; k < 3; k++) e->pos[row * 3 + k] = (float)((d->pos[cells[i] * 3 + k] - mean[k]) / s->pos_scale);
    }
}

static double sq_dist(const float *a, const double *b, int G)
{
    double s = 0.0;
    for (int g = 0; g < G; g++) s += (a[g] - b[g]) * (a[g] - b[g]);
    return s;
}

/* k-means++: each next centre drawn with probability ~ squared distance. */
static void seed_centres(const float *x, int n, int G, int k, ast_rng *rng, double *cent)
{
    double *near = ast_xmalloc((size_t)n * sizeof *near);
    for (int c = 0; c < k; c++) {
        int pick = 0;
        if (c == 0) {
            pick = (int)(ast_rng_next(rng) % (uint64_t)n);
        } else {
            double total = 0.0;
            for (int i = 0; i < n; i++) total += near[i];
            double u = ast_rng_uniform01(rng) * total, acc = 0.0;
            for (pick = 0; pick < n - 1 && (acc += near[pick]) <= u; pick++) {}
        }
        for (int g = 0; g < G; g++) cent[(size_t)c * G + g] = x[(size_t)pick * G + g];
        for (int i = 0; i < n; i++) {
            double dd = sq_dist(x + (size_t)i * G, cent + (size_t)c * G, G);
            near[i] = c == 0 || dd < near[i] ? dd : near[i];
        }
    }
    free(near);
}

typedef struct pair {
    double d;
    int i, c;
} pair;

static int cmp_pair(const void *a, const void *b)
{
    const pair *p = a, *q = b;
    if (p->d != q->d) return p->d < q->d ? -1 : 1;
    return p->i != q->i ? p->i - q->i : p->c - q->c;
}

/* Nearest centroid with room, greedily over all (cell, centroid) pairs by distance. */
static void assign(const float *x, int n, int G, int k, const double *cent, pair *pairs, int *label)
{
    int cap = (n + k - 1) / k, *fill = ast_xcalloc((size_t)k, sizeof *fill);
    for (int i = 0; i < n; i++) {
        label[i] = -1;
        for (int c = 0; c < k; c++) pairs[(size_t)i * k + c] = (pair){sq_dist(x + (size_t)i * G, cent + (size_t)c * G, G), i, c};
    }
    qsort(pairs, (size_t)n * k, sizeof *pairs, cmp_pair);
    for (size_t p = 0; p < (size_t)n * k; p++)
        if (label[pairs[p].i] < 0 && fill[pairs[p].c] < cap) label[pairs[p].i] = pairs[p].c, fill[pairs[p].c]++;
    free(fill);
}

void ast_balanced_kmeans(const float *x, int n, int G, int k, uint64_t seed, int *label)
{
    if (k <= 1) {
        memset(label, 0, (size_t)n * sizeof *label);
        return;
    }
    ast_rng rng;
    ast_rng_seed(&rng, seed);
    double *cent = ast_xmalloc((size_t)k * G * sizeof *cent);
    int *count = ast_xmalloc((size_t)k * sizeof *count);
    pair *pairs = ast_xmalloc((size_t)n * k * sizeof *pairs);
    seed_centres(x, n, G, k, &rng, cent);
    for (int round = 0; round < 25; round++) {
        assign(x, n, G, k, cent, pairs, label);
        memset(cent, 0, (size_t)k * G * sizeof *cent);
        memset(count, 0, (size_t)k * sizeof *count);
        for (int i = 0; i < n; i++) {
            count[label[i]]++;
            for (int g = 0; g < G; g++) cent[(size_t)label[i] * G + g] += x[(size_t)i * G + g];
        }
        for (int c = 0; c < k; c++)
            for (int g = 0; g < G; g++) cent[(size_t)c * G + g] /= count[c] ? count[c] : 1;
    }
    free(cent), free(count), free(pairs);
}

/* The split's cells of one slice, in split order; returns their number. */
static int slice_cells(const ast_set_sampler *s, int slice, int64_t *out)
{
    int n = 0;
    for (int64_t i = 0; i < s->split->n; i++)
        if (s->d->slice[s->split->cells[i]] == slice) out[n++] = s->split->cells[i];
    return n;
}

/* Labels of one slice's cells: ceil(n / max) balanced clusters of their
 * expression, or of their positions (by_position). Expression rows are
 * made dense in x, the slice's sets' own expression (room for at least n
 * rows), rather than in a copy as large; x is zeroed after, for fill_set
 * to write the rows where they belong. */
static int cluster_slice(const ast_dataset *d, const int64_t *cells, int n, int max_set_size, int by_position,
                         uint64_t seed, int *label, float *x)
{
    int k = (n + max_set_size - 1) / max_set_size, G = by_position ? 3 : d->n_genes;
    float *rows = by_position ? ast_xmalloc((size_t)(n ? n : 1) * 3 * sizeof *rows) : x;
    for (int i = 0; i < n; i++) {
        if (by_position) memcpy(rows + (size_t)i * 3, d->pos + cells[i] * 3, 3 * sizeof *rows);
        else ast_data_row(d, cells[i], rows + (size_t)i * G);
    }
    ast_balanced_kmeans(rows, n, G, k, seed, label);
    if (by_position) free(rows);
    else memset(x, 0, (size_t)n * G * sizeof *x);
    return k;
}

/* How many of a slice's n cells are in every set: none when one set
 * holds them all. */
static int slice_landmarks(int n, int max_set_size, int landmarks) { return n > max_set_size ? landmarks : 0; }

/* The sets of a slice of n cells, L of them landmarks. */
static int slice_sets(int n, int max_set_size, int L)
{
    return n ? (n - L + max_set_size - L - 1) / (max_set_size - L) : 0;
}

/* Moves L cells drawn from `seed` to the front (a partial Fisher-Yates
 * shuffle): they are drawn at random, never by position. */
static void draw_landmarks(int64_t *cells, int n, int L, uint64_t seed)
{
    ast_rng rng;
    ast_rng_seed(&rng, seed);
    for (int i = 0; i < L; i++) {
        int j = i + (int)(ast_rng_next(&rng) % (uint64_t)(n - i));
        int64_t t = cells[i];
        cells[i] = cells[j], cells[j] = t;
    }
}

static void make_sets(const ast_set_sampler *s, int max_set_size, int landmarks, int by_position, uint64_t seed,
                      ast_eval_sets *out)
{
    const ast_dataset *d = s->d;
    int64_t *cells = ast_xmalloc((size_t)(s->split->n ? s->split->n : 1) * sizeof *cells);
    int *label = ast_xmalloc((size_t)(s->split->n ? s->split->n : 1) * sizeof *label);
    int *first = ast_xcalloc((size_t)d->n_slices + 1, sizeof *first), N = 1; /* sets of slice v: first[v] .. first[v+1] */
    for (int v = 0; v < d->n_slices; v++) {
        int n = slice_cells(s, v, cells), L = slice_landmarks(n, max_set_size, landmarks);
        int k = slice_sets(n, max_set_size, L);
        first[v + 1] = first[v] + k;
        if (k) N = L + (n - L + k - 1) / k > N ? L + (n - L + k - 1) / k : N;
    }
    sets_alloc(out, first[d->n_slices], N, d->n_genes);
    int64_t *members = ast_xmalloc((size_t)N * sizeof *members);
    for (int v = 0; v < d->n_slices; v++) {
        int n = slice_cells(s, v, cells), L = slice_landmarks(n, max_set_size, landmarks);
        if (!n) continue;
        draw_landmarks(cells, n, L, seed ^ (uint64_t)v);
        memcpy(members, cells, (size_t)L * sizeof *members);
        float *scratch = out->expr + (size_t)first[v] * N * d->n_genes;
        int k = cluster_slice(d, cells + L, n - L, max_set_size - L, by_position, seed ^ (uint64_t)v, label, scratch);
        for (int c = 0; c < k; c++) {
            int m = L;
            for (int i = 0; i < n - L; i++)
                if (label[i] == c) members[m++] = cells[L + i];
            fill_set(s, out, first[v] + c, members, m);
        }
    }
    free(cells), free(label), free(first), free(members);
}

void ast_eval_sets_landmarks(const ast_set_sampler *s, int max_set_size, int landmarks, uint64_t seed,
                             ast_eval_sets *out)
{
    make_sets(s, max_set_size, landmarks, 0, seed, out);
}

void ast_eval_sets_region(const ast_set_sampler *s, int max_set_size, uint64_t seed, ast_eval_sets *out)
{
    make_sets(s, max_set_size, 0, 0, seed, out);
}

void ast_eval_sets_by_position(const ast_set_sampler *s, int max_set_size, uint64_t seed, ast_eval_sets *out)
{
    make_sets(s, max_set_size, 0, 1, seed, out);
}

void ast_eval_sets_oracle(const ast_set_sampler *s, int count, uint64_t seed, ast_eval_sets *out)
{
    sets_alloc(out, count, s->set_size, s->d->n_genes);
    int64_t *members = ast_xmalloc((size_t)s->set_size * sizeof *members);
    ast_rng rng;
    ast_rng_seed(&rng, seed);
    for (int b = 0; b < count; b++) {
        int64_t centre = s->split->cells[ast_rng_next(&rng) % (uint64_t)s->split->n];
        fill_set(s, out, b, members, ast_set_cells(s, centre, members));
    }
    free(members);
}
