/* Baselines that look up the training cells (see alphast/baselines.h):
 * k-NN regression of position on expression and of expression on
 * position, and the mean profile. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "eval/baselines.h"
#include "engine/engine.h"

static int reference_size(const ast_reference_cells *ref)
{
    AST_ASSERT(ref->n >= 1 && ref->n <= INT_MAX, "a reference of %lld cells", (long long)ref->n);
    return (int)ref->n;
}

/* near [n, k]: the k reference rows (of refs [m, D]) closest to each query
 * row of q [n, D]. The whole [n, m] distance matrix at once: at the sizes
 * evaluated (1,500 x 4,000) it is 48 MB. */
static void nearest_references(const float *refs, int m, const float *q, int n, int D, int k, int *near)
{
    double *d2 = ast_xmalloc((size_t)n * m * sizeof *d2);
    ast_sq_distances(q, n, refs, m, D, d2);
    for (int i = 0; i < n; i++) ast_k_nearest(d2 + (size_t)i * m, m, k, -1, near + (size_t)i * k);
    free(d2);
}

/* out [n, D]: row i the mean of the rows near[i, 0..k) of src [*, D]. */
static void mean_of_rows(const float *src, int D, const int *near, int n, int k, float *out)
{
    double *sum = ast_xmalloc((size_t)D * sizeof *sum);
    for (int i = 0; i < n; i++) {
        memset(sum, 0, (size_t)D * sizeof *sum);
        for (int j = 0; j < k; j++)
            for (int d = 0; d < D; d++) sum[d] += src[(size_t)near[(size_t)i * k + j] * D + d];
        for (int d = 0; d < D; d++) out[(size_t)i * D + d] = (float)(sum[d] / k);
    }
    free(sum);
}

/* Predicts rows of `to` [*, Dt] for queries q [n, Dq] from their k nearest
 * reference rows of `from` [m, Dq]. */
static void knn_regress(const float *from, int Dq, const float *to, int Dt, int m, const float *q, int n, int k,
                        float *out)
{
    AST_ASSERT(k >= 1, "k-NN regression needs k >= 1 (k %d)", k);
    if (k > m) k = m;
    int *near = ast_xmalloc((size_t)n * k * sizeof *near);
    nearest_references(from, m, q, n, Dq, k, near);
    mean_of_rows(to, Dt, near, n, k, out);
    free(near);
}

void ast_baseline_knn_positions(const ast_reference_cells *ref, const float *x, int n, int k, float *pos)
{
    knn_regress(ref->expr, ref->G, ref->pos, 3, reference_size(ref), x, n, k, pos);
}

void ast_baseline_spatial_knn_expr(const ast_reference_cells *ref, const float *pos, int n, int k, float *expr)
{
    knn_regress(ref->pos, 3, ref->expr, ref->G, reference_size(ref), pos, n, k, expr);
}

void ast_baseline_mean_profile(const ast_reference_cells *ref, int n, float *expr)
{
    int m = reference_size(ref), G = ref->G;
    double *sum = ast_xcalloc((size_t)G, sizeof *sum);
    for (int r = 0; r < m; r++)
        for (int g = 0; g < G; g++) sum[g] += ref->expr[(size_t)r * G + g];
    for (int i = 0; i < n; i++)
        for (int g = 0; g < G; g++) expr[(size_t)i * G + g] = (float)(sum[g] / m);
    free(sum);
}
