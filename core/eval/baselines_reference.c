/* Baselines that look up the training cells (see alphast/baselines.h):
 * k-NN regression of position on expression and of expression on
 * position, and the mean profile. The reference's expression is fetched a
 * block of rows at a time: densely it can be far larger than the rest of a
 * run (100,000 cells x 2,000 genes is 800 MB). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "eval/baselines.h"
#include "engine/engine.h"

/* Bounds of one block of the search: its distances [n, rows] and its
 * reference rows [rows, D] (which ast_sq_distances copies to double).
 * They also keep each product well above OpenBLAS's small-matrix path, so
 * every distance is the same dgemm sum as in one whole [n, m] product. */
#define BLOCK_DISTANCES (1 << 20)
#define BLOCK_VALUES (1 << 21)

static int reference_size(const ast_reference_cells *ref)
{
    AST_ASSERT(ref->n >= 1 && ref->n <= INT_MAX, "a reference of %lld cells", (long long)ref->n);
    return (int)ref->n;
}

/* Which rows of the reference the search and the mean look at. */
typedef enum side { POSITIONS, EXPRESSION } side;

static int side_dims(const ast_reference_cells *ref, side s) { return s == EXPRESSION ? ref->G : 3; }

/* out [count, D]: reference rows from .. from + count of one side. */
static void fetch_rows(const ast_reference_cells *ref, side s, int from, int count, float *out)
{
    if (s == POSITIONS) {
        memcpy(out, ref->pos + (size_t)from * 3, (size_t)count * 3 * sizeof *out);
        return;
    }
    for (int i = 0; i < count; i++) ref->expr_row(ref->ctx, from + i, out + (size_t)i * ref->G);
}

/* Offers candidate j at distance dj to a query's ascending list near/dist
 * of `have` entries (at most k): the insertion of ast_k_nearest, so that
 * scanning the blocks in index order keeps its ties by index. */
static void offer(double dj, int j, int k, int *have, int *near, double *dist)
{
    if (*have == k && !(dj < dist[k - 1])) return;
    int at = *have < k ? (*have)++ : k - 1;
    for (; at > 0 && dj < dist[at - 1]; at--) near[at] = near[at - 1], dist[at] = dist[at - 1];
    near[at] = j, dist[at] = dj;
}

/* Rows per block for n queries of D values, the last block no smaller
 * than the rest need be (a sliver would be a tiny product). */
static int block_rows(int m, int n, int D)
{
    int rows = BLOCK_DISTANCES / (n ? n : 1), by_values = BLOCK_VALUES / D;
    if (by_values < rows) rows = by_values;
    if (rows < 1) rows = 1;
    int blocks = (m + rows - 1) / rows;
    return (m + blocks - 1) / blocks;
}

/* near [n, k]: the k reference rows of side s closest to each query row of
 * q [n, D], ascending, ties by index: ast_k_nearest over the [n, m]
 * distances, computed a block of reference rows at a time. */
static void nearest_references(const ast_reference_cells *ref, side s, const float *q, int n, int k, int *near)
{
    int m = reference_size(ref), D = side_dims(ref, s), rows = block_rows(m, n, D);
    float *block = ast_xmalloc((size_t)rows * D * sizeof *block);
    double *d2 = ast_xmalloc((size_t)(n ? n : 1) * rows * sizeof *d2);
    double *dist = ast_xmalloc((size_t)(n ? n : 1) * k * sizeof *dist);
    int *have = ast_xcalloc((size_t)(n ? n : 1), sizeof *have);
    for (int from = 0; from < m; from += rows) {
        int r = m - from < rows ? m - from : rows;
        fetch_rows(ref, s, from, r, block);
        ast_sq_distances(q, n, block, r, D, d2);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < r; j++)
                offer(d2[(size_t)i * r + j], from + j, k, &have[i], near + (size_t)i * k, dist + (size_t)i * k);
    }
    for (int i = 0; i < n; i++) AST_ASSERT(have[i] == k, "asked for %d nearest of %d candidates", k, have[i]);
    free(block), free(d2), free(dist), free(have);
}

/* out [n, D]: row i the mean of the reference rows near[i, 0..k) of side s. */
static void mean_of_rows(const ast_reference_cells *ref, side s, const int *near, int n, int k, float *out)
{
    int D = side_dims(ref, s);
    double *sum = ast_xmalloc((size_t)D * sizeof *sum);
    float *row = ast_xmalloc((size_t)D * sizeof *row);
    for (int i = 0; i < n; i++) {
        memset(sum, 0, (size_t)D * sizeof *sum);
        for (int j = 0; j < k; j++) {
            fetch_rows(ref, s, near[(size_t)i * k + j], 1, row);
            for (int d = 0; d < D; d++) sum[d] += row[d];
        }
        for (int d = 0; d < D; d++) out[(size_t)i * D + d] = (float)(sum[d] / k);
    }
    free(sum), free(row);
}

/* Predicts rows of side `to` for queries q [n, *] of side `from` from
 * their k nearest reference cells. */
static void knn_regress(const ast_reference_cells *ref, side from, side to, const float *q, int n, int k, float *out)
{
    AST_ASSERT(k >= 1, "k-NN regression needs k >= 1 (k %d)", k);
    if (k > reference_size(ref)) k = (int)ref->n;
    int *near = ast_xmalloc((size_t)(n ? n : 1) * k * sizeof *near);
    nearest_references(ref, from, q, n, k, near);
    mean_of_rows(ref, to, near, n, k, out);
    free(near);
}

void ast_baseline_knn_positions(const ast_reference_cells *ref, const float *x, int n, int k, float *pos)
{
    knn_regress(ref, EXPRESSION, POSITIONS, x, n, k, pos);
}

void ast_baseline_spatial_knn_expr(const ast_reference_cells *ref, const float *pos, int n, int k, float *expr)
{
    knn_regress(ref, POSITIONS, EXPRESSION, pos, n, k, expr);
}

void ast_baseline_mean_profile(const ast_reference_cells *ref, int n, float *expr)
{
    int m = reference_size(ref), G = ref->G;
    double *sum = ast_xcalloc((size_t)G, sizeof *sum);
    float *row = ast_xmalloc((size_t)G * sizeof *row);
    for (int r = 0; r < m; r++) {
        ref->expr_row(ref->ctx, r, row);
        for (int g = 0; g < G; g++) sum[g] += row[g];
    }
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) expr[(size_t)i * G + g] = (float)(sum[g] / m);
    free(sum), free(row);
}
