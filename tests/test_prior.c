/* The structural prior (model/prior.h): what it computes from a set's
 * expression, padded rows wherever they sit, and its cache. The model's
 * use of it (exact base, independence of positions, gradients) is checked
 * in test_model.c. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <string.h>

#include "engine/engine.h"
#include "model/expr_embed.h"
#include "model/prior.h"

enum { N = 9, G = 5 };

/* A 3 x 3 grid, laid into 5 genes by an orthogonal map, so that the
 * expression distances are the grid's distances exactly. */
static void grid_set(float *pos, float *expr)
{
    static const float basis[2][G] = {{0.6f, 0.8f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.8f, -0.6f}};
    for (int i = 0; i < N; i++) {
        pos[i * 3] = (float)(i % 3), pos[i * 3 + 1] = (float)(i / 3), pos[i * 3 + 2] = 0.0f;
        for (int g = 0; g < G; g++) expr[i * G + g] = pos[i * 3] * basis[0][g] + pos[i * 3 + 1] * basis[1][g] + 1.0f;
    }
}

static double dist(const float *p, int i, int j)
{
    double s = 0.0;
    for (int c = 0; c < 3; c++) s += ((double)p[i * 3 + c] - p[j * 3 + c]) * ((double)p[i * 3 + c] - p[j * 3 + c]);
    return sqrt(s);
}

/* MDS of Euclidean expression distances recovers the grid up to a rigid
 * motion; the prior scales it to an RMS radius of 1 about its centre. The
 * grid's RMS radius is sqrt(4/3), so every distance is the grid's over
 * that. 1e-5: float32 rounding of O(1) coordinates through dsyevr. */
Test(prior, mds_recovers_the_grid_in_the_set_unit)
{
    float pos[N * 3], expr[N * G], out[N * 3];
    grid_set(pos, expr);
    ast_prior_set(&(ast_prior_config){AST_PRIOR_MDS, 2, 3, 0}, N, G, expr, NULL, out, NULL);
    double mean[3] = {0}, sq = 0.0;
    for (int i = 0; i < N; i++)
        for (int c = 0; c < 3; c++) mean[c] += out[i * 3 + c] / N;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(out[i * 3 + 2], 0.0f, "a 2-axis prior has no third axis");
        for (int c = 0; c < 3; c++) sq += out[i * 3 + c] * out[i * 3 + c];
    }
    for (int c = 0; c < 3; c++) cr_assert_float_eq(mean[c], 0.0, 1e-6);
    cr_assert_float_eq(sq / N, 1.0, 1e-5);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) cr_assert_float_eq(dist(out, i, j), dist(pos, i, j) / sqrt(4.0 / 3.0), 1e-5);
}

/* Isomap's prior is the evaluation's Isomap baseline, centred and scaled:
 * the same code (model/expr_embed.c), so the same distance ratios. */
Test(prior, isomap_is_the_baseline_scaled)
{
    float pos[N * 3], expr[N * G], out[N * 3], base[N * 3];
    grid_set(pos, expr);
    ast_prior_set(&(ast_prior_config){AST_PRIOR_ISOMAP, 2, 3, 0}, N, G, expr, NULL, out, NULL);
    ast_baseline_isomap(expr, N, G, 2, 3, base);
    double ratio = dist(out, 0, 8) / dist(base, 0, 8);
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++) cr_assert_float_eq(dist(out, i, j), ratio * dist(base, i, j), 1e-5);
}

/* Padded rows may sit anywhere in a set (the sampler's sets pad at the
 * end, whole-slice sets too, but nothing promises it): the valid rows get
 * the prior of the valid cells alone, in their order, the padded ones 0. */
Test(prior, padded_rows_anywhere_give_the_prior_of_the_valid_cells)
{
    float pos[N * 3], expr[N * G], alone[N * 3];
    grid_set(pos, expr);
    ast_prior_config pc = {AST_PRIOR_ISOMAP, 2, 3, 0};
    ast_prior_set(&pc, N, G, expr, NULL, alone, NULL);
    enum { P = N + 3 };
    float padded[P * G], mask[P], out[P * 3];
    int at = 0;
    for (int i = 0; i < P; i++) {
        mask[i] = i % 4 == 1 ? 0.0f : 1.0f; /* rows 1, 5, 9 padded */
        for (int g = 0; g < G; g++) padded[i * G + g] = mask[i] > 0.0f ? expr[at * G + g] : 100.0f + (float)g;
        at += mask[i] > 0.0f;
    }
    ast_prior_set(&pc, P, G, padded, mask, out, NULL);
    at = 0;
    for (int i = 0; i < P; i++) {
        for (int c = 0; c < 3; c++)
            cr_assert_eq(out[i * 3 + c], mask[i] > 0.0f ? alone[at * 3 + c] : 0.0f, "row %d axis %d", i, c);
        at += mask[i] > 0.0f;
    }
}

/* A set asked again is a hit with the same prior; the same expression
 * under another mask is another set. */
Test(prior, the_cache_returns_what_it_computed)
{
    float pos[N * 3], expr[2 * N * G], first[2 * N * 3], again[2 * N * 3], mask[2 * N];
    grid_set(pos, expr);
    memcpy(expr + N * G, expr, sizeof(float) * N * G);
    for (int i = 0; i < 2 * N; i++) mask[i] = 1.0f;
    ast_prior_config pc = {AST_PRIOR_ISOMAP, 2, 3, 0};
    ast_prior_cache *c = ast_prior_cache_new(4);
    int64_t hits, misses;
    ast_prior_batch(c, &pc, 2, N, G, expr, mask, first, NULL);
    ast_prior_cache_stats(c, &hits, &misses);
    cr_assert(hits == 1 && misses == 1, "two identical sets: %lld hits %lld misses", (long long)hits, (long long)misses);
    ast_prior_batch(c, &pc, 2, N, G, expr, mask, again, NULL);
    cr_assert(memcmp(first, again, sizeof first) == 0);
    mask[N + 2] = 0.0f;
    ast_prior_batch(c, &pc, 2, N, G, expr, mask, again, NULL);
    ast_prior_cache_stats(c, &hits, &misses);
    cr_assert(hits == 4 && misses == 2, "a new mask is a new set: %lld hits %lld misses", (long long)hits,
              (long long)misses);
    cr_assert_eq(again[(N + 2) * 3], 0.0f);
    /* One value of the expression changed, in the hash's 32-byte words and
     * in its tail: another set each time. */
    int64_t before = misses;
    size_t at[] = {0, 5, (size_t)N * G - 1};
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        expr[at[i]] += 1.0f;
        ast_prior_batch(c, &pc, 1, N, G, expr, mask, again, NULL);
        ast_prior_cache_stats(c, &hits, &misses);
        cr_assert_eq(misses, before + 1 + (int64_t)i, "entry %zu changed, yet the set was a hit", at[i]);
    }
    ast_prior_cache_free(c);
}

/* A batch's sets the cache lacks are computed on the thread pool, a set
 * per thread: six different sets (the grid's expression scaled and
 * shifted per set, one with padding), with their geodesics, give what
 * each set alone gives, bit for bit, whatever the pool's size. */
Test(prior, a_batch_computed_in_parallel_is_its_sets_one_by_one)
{
    enum { S = 6 };
    float pos[N * 3], one[N * G], expr[S * N * G], mask[S * N];
    float out[S * N * 3], geo[S * N * N], want_out[N * 3], want_geo[N * N];
    grid_set(pos, one);
    for (int s = 0; s < S; s++)
        for (int i = 0; i < N * G; i++) expr[s * N * G + i] = one[i] * (1.0f + 0.25f * s) + (float)s;
    for (int i = 0; i < S * N; i++) mask[i] = i == 2 * N + 4 ? 0.0f : 1.0f;
    ast_prior_config pc = {AST_PRIOR_ISOMAP, 2, 3, 1};
    ast_prior_cache *c = ast_prior_cache_new(8);
    ast_prior_batch(c, &pc, S, N, G, expr, mask, out, geo);
    for (int s = 0; s < S; s++) {
        ast_prior_set(&pc, N, G, expr + s * N * G, mask + s * N, want_out, want_geo);
        cr_assert(memcmp(out + s * N * 3, want_out, sizeof want_out) == 0, "set %d: the prior differs", s);
        cr_assert(memcmp(geo + s * N * N, want_geo, sizeof want_geo) == 0, "set %d: the geodesics differ", s);
    }
    cr_log_info("%d sets on a pool of %d threads", S, ast_parallel_threads());
    ast_prior_cache_free(c);
}
