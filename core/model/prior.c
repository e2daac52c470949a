/* The structural prior (model/prior.h): per-set Isomap or MDS of the
 * expression, centred and scaled, with a small cache of recent sets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "engine/engine.h"
#include "model/expr_embed.h"
#include "model/prior.h"

static const char *prior_names[] = {"none", "isomap", "mds"};

const char *ast_prior_name(ast_prior_kind k) { return prior_names[k]; }

int ast_prior_parse(const char *s, ast_prior_kind *out)
{
    int i = ast_name_index(s, prior_names, 3);
    if (i >= 0) *out = (ast_prior_kind)i;
    return i < 0 ? -1 : 0;
}

/* Centres the n rows of 3 and scales them to an RMS radius of 1; all
 * cells at one point (a set of one, identical profiles) stay at 0. */
static void centre_unit_radius(float *pos, int n)
{
    double mean[3] = {0}, sq = 0.0;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) mean[c] += pos[i * 3 + c] / (double)n;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) sq += (pos[i * 3 + c] - mean[c]) * (pos[i * 3 + c] - mean[c]);
    double scale = sq > 0.0 ? 1.0 / sqrt(sq / n) : 0.0;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 3; c++) pos[i * 3 + c] = (float)((pos[i * 3 + c] - mean[c]) * scale);
}

/* The geodesic distances of the n valid cells (x compact) over their mean
 * over distinct pairs, scattered into geo [N, N] at rows/columns `row`. */
static void scaled_geodesics(const double *d, int n, const int *row, int N, float *geo)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) sum += d[(size_t)i * n + j];
    double scale = sum > 0.0 ? (double)n * (n - 1) / 2.0 / sum : 0.0;
    memset(geo, 0, (size_t)N * N * sizeof *geo);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) geo[(size_t)row[i] * N + row[j]] = (float)(d[(size_t)i * n + j] * scale);
}

/* The prior of the n valid cells' expression x (compact) into pos rows of 3. */
static void embed(const ast_prior_config *pc, const float *x, int n, int G, double *geo_d, float *pos)
{
    memset(pos, 0, (size_t)n * 3 * sizeof *pos);
    if (n < 2 || pc->kind == AST_PRIOR_NONE) return;
    if (pc->kind == AST_PRIOR_MDS) ast_baseline_mds(x, n, G, pc->dims, pos);
    else if (!geo_d) ast_baseline_isomap(x, n, G, pc->dims, pc->k, pos);
    else { /* the geodesics are computed once for both */
        double *copy = ast_xmalloc((size_t)n * n * sizeof *copy);
        memcpy(copy, geo_d, (size_t)n * n * sizeof *copy);
        ast_isomap_from_geodesics(copy, n, pc->dims, pos);
        free(copy);
    }
    centre_unit_radius(pos, n);
}

void ast_prior_set(const ast_prior_config *pc, int N, int G, const float *expr, const float *mask, float *out,
                   float *geo)
{
    int *row = ast_xmalloc((size_t)N * sizeof *row + 1), n = 0;
    for (int i = 0; i < N; i++)
        if (!mask || mask[i] > 0.5f) row[n++] = i;
    float *x = ast_xmalloc((size_t)n * G * sizeof *x + 1), *pos = ast_xmalloc((size_t)n * 3 * sizeof *pos + 1);
    for (int i = 0; i < n; i++) memcpy(x + (size_t)i * G, expr + (size_t)row[i] * G, (size_t)G * sizeof *x);
    double *d = pc->geodesic ? ast_xmalloc((size_t)n * n * sizeof *d + 1) : NULL;
    if (d) ast_expr_geodesics(x, n, G, pc->k, d);
    embed(pc, x, n, G, d, pos);
    if (out) {
        memset(out, 0, (size_t)N * 3 * sizeof *out);
        for (int i = 0; i < n; i++) memcpy(out + (size_t)row[i] * 3, pos + (size_t)i * 3, 3 * sizeof *pos);
    }
    if (d) scaled_geodesics(d, n, row, N, geo);
    free(row), free(x), free(pos), free(d);
}

/* At most `capacity` sets and CACHE_FLOATS floats (256 MiB): one set of
 * 1,024 cells with its geodesics is 1M floats. */
#define CACHE_FLOATS ((size_t)64 << 20)

struct ast_prior_cache {
    int capacity, next;
    size_t used, *len;
    uint64_t *key;
    float **entry; /* the prior [N, 3] (unless kind NONE), then the geodesics [N, N] (with geodesic) */
    int64_t hits, misses;
};

ast_prior_cache *ast_prior_cache_new(int capacity)
{
    ast_prior_cache *c = ast_xcalloc(1, sizeof *c);
    c->capacity = capacity;
    c->len = ast_xcalloc((size_t)capacity, sizeof *c->len);
    c->key = ast_xcalloc((size_t)capacity, sizeof *c->key);
    c->entry = ast_xcalloc((size_t)capacity, sizeof *c->entry);
    return c;
}

void ast_prior_cache_free(ast_prior_cache *c)
{
    if (!c) return;
    for (int i = 0; i < c->capacity; i++) free(c->entry[i]);
    free(c->len), free(c->key), free(c->entry), free(c);
}

void ast_prior_cache_stats(const ast_prior_cache *c, int64_t *hits, int64_t *misses)
{
    *hits = c->hits, *misses = c->misses;
}

/* A 64-bit key: a collision (about 2^-64 per pair of sets) would hand one
 * set another's prior, which no caller could tell from a bad prior. */
static uint64_t set_key(const ast_prior_config *pc, int N, int G, const float *expr, const float *mask)
{
    int head[6] = {(int)pc->kind, pc->dims, pc->k, pc->geodesic, N, G};
    uint64_t h = ast_hash64(0, head, sizeof head);
    h = ast_hash64(h, expr, (size_t)N * G * sizeof *expr);
    return mask ? ast_hash64(h, mask, (size_t)N * sizeof *mask) : h;
}

static void evict(ast_prior_cache *c, int at)
{
    c->used -= c->len[at];
    free(c->entry[at]);
    c->entry[at] = NULL, c->len[at] = 0;
}

/* Keeps a copy of a set's result, replacing the oldest entries. */
static void remember(ast_prior_cache *c, uint64_t key, const float *out, size_t n_out, const float *geo, size_t n_geo)
{
    size_t len = n_out + n_geo;
    if (len > CACHE_FLOATS) return;
    int at = c->next;
    c->next = (c->next + 1) % c->capacity;
    evict(c, at);
    for (int i = c->next; c->used + len > CACHE_FLOATS; i = (i + 1) % c->capacity) evict(c, i);
    c->entry[at] = ast_xmalloc(len * sizeof(float) + 1);
    if (n_out) memcpy(c->entry[at], out, n_out * sizeof(float));
    if (n_geo) memcpy(c->entry[at] + n_out, geo, n_geo * sizeof(float));
    c->key[at] = key, c->len[at] = len, c->used += len;
}

/* A cached set's result into out and geo; 0 when the cache has none. */
static int lookup(ast_prior_cache *c, uint64_t key, size_t n_out, size_t n_geo, float *out, float *geo)
{
    for (int i = 0; i < c->capacity; i++)
        if (c->entry[i] && c->key[i] == key && c->len[i] == n_out + n_geo) {
            if (n_out) memcpy(out, c->entry[i], n_out * sizeof *out);
            if (n_geo) memcpy(geo, c->entry[i] + n_out, n_geo * sizeof *geo);
            c->hits++;
            return 1;
        }
    c->misses++;
    return 0;
}

/* The sets of a batch that are computed: todo[0 .. n) of B, each into
 * its own rows of out and geo. */
typedef struct batch_job {
    const ast_prior_config *pc;
    int N, G;
    const float *expr, *mask;
    float *out, *geo;
    const int *todo;
} batch_job;

static void compute_sets(void *arg, int64_t lo, int64_t hi)
{
    const batch_job *j = arg;
    size_t N = (size_t)j->N;
    for (int64_t i = lo; i < hi; i++) {
        size_t b = (size_t)j->todo[i];
        ast_prior_set(j->pc, j->N, j->G, j->expr + b * N * j->G, j->mask ? j->mask + b * N : NULL,
                      j->out ? j->out + b * N * 3 : NULL, j->geo ? j->geo + b * N * N : NULL);
    }
}

/* Set b's rows of out and geo (NULL where not written). */
static float *rows(float *x, int b, size_t per_set) { return x && per_set ? x + (size_t)b * per_set : NULL; }

/* The sets not in the cache are computed on the thread pool, a set per
 * thread at a time: each set's work is its own (inside a worker the
 * geodesics' parallel loop runs on that thread, each source's row as
 * before), so the results do not depend on the threads. They join the
 * cache in the batch's order, and a set met again within the batch is a
 * hit on the first, as one after another. */
void ast_prior_batch(ast_prior_cache *cache, const ast_prior_config *pc, int B, int N, int G, const float *expr,
                     const float *mask, float *out, float *geo)
{
    if (pc->kind == AST_PRIOR_NONE) out = NULL;
    size_t n_out = out ? (size_t)N * 3 : 0, n_geo = pc->geodesic ? (size_t)N * N : 0;
    int *todo = ast_xmalloc((size_t)B * 2 * sizeof *todo + 1), *same = todo + B, n = 0;
    uint64_t *key = ast_xmalloc((size_t)B * sizeof *key + 1);
    for (int b = 0; b < B; b++) {
        same[b] = -1;
        if (cache) key[b] = set_key(pc, N, G, expr + (size_t)b * N * G, mask ? mask + (size_t)b * N : NULL);
        for (int i = 0; cache && i < n && same[b] < 0; i++)
            if (key[todo[i]] == key[b]) same[b] = todo[i], cache->hits++;
        if (same[b] < 0 && (!cache || !lookup(cache, key[b], n_out, n_geo, rows(out, b, n_out), rows(geo, b, n_geo))))
            todo[n++] = b;
    }
    batch_job job = {pc, N, G, expr, mask, out, n_geo ? geo : NULL, todo};
    ast_parallel_for(n, 1, compute_sets, &job);
    for (int i = 0; cache && i < n; i++)
        remember(cache, key[todo[i]], rows(out, todo[i], n_out), n_out, rows(geo, todo[i], n_geo), n_geo);
    for (int b = 0; b < B; b++)
        if (same[b] >= 0) {
            if (n_out) memcpy(rows(out, b, n_out), rows(out, same[b], n_out), n_out * sizeof *out);
            if (n_geo) memcpy(rows(geo, b, n_geo), rows(geo, same[b], n_geo), n_geo * sizeof *geo);
        }
    free(todo), free(key);
}
