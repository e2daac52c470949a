/* Row-major sgemm on host memory: OpenBLAS on one thread per part, the parts
 * split over alphast's thread pool (one pool for GEMMs and elementwise
 * kernels, so they never oversubscribe the cores). */
#include <cblas.h>
#include <string.h>

#include "engine/engine.h"

typedef struct gemm_args {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const float *a, *b;
    float *c;
    const float *bias; /* [n], copied into each row of the part first; NULL: none */
} gemm_args;

/* Rows [lo, hi) of C = alpha op(A) op(B) + beta C: op(A)'s rows are A's
 * rows, or its columns when A is transposed. */
static void sgemm_rows(void *arg, int64_t lo, int64_t hi)
{
    const gemm_args *g = arg;
    const float *a = g->ta ? g->a + lo : g->a + lo * g->lda;
    for (int64_t r = lo; g->bias && r < hi; r++) memcpy(g->c + r * g->ldc, g->bias, (size_t)g->n * sizeof(float));
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, (int)(hi - lo),
                g->n, g->k, g->alpha, a, g->lda, g->b, g->ldb, g->beta, g->c + lo * g->ldc, g->ldc);
}

/* Columns [lo, hi) of C: op(B)'s columns are B's columns, or its rows when
 * B is transposed. */
static void sgemm_cols(void *arg, int64_t lo, int64_t hi)
{
    const gemm_args *g = arg;
    const float *b = g->tb ? g->b + lo * g->ldb : g->b + lo;
    for (int64_t r = 0; g->bias && r < g->m; r++)
        memcpy(g->c + r * g->ldc + lo, g->bias + lo, (size_t)(hi - lo) * sizeof(float));
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, g->m,
                (int)(hi - lo), g->k, g->alpha, g->a, g->lda, b, g->ldb, g->beta, g->c + lo, g->ldc);
}

/* Work per part: at least ~0.5 M multiply-adds, below which the hand-off
 * costs more than a second thread saves (measured at the demo size). */
#define GEMM_GRAIN_FLOPS (1 << 19)

/* k = 0: op(A) op(B) is an empty sum, so C = beta C, or the bias rows.
 * OpenBLAS cannot say it: it rejects lda = 0, which k = 0 gives. beta = 0
 * writes zeros, as BLAS does, rather than 0 * C (NaN where C holds NaN). */
static void sgemm_empty_sum(int m, int n, float beta, float *cmat, int ldc, const float *bias)
{
    for (int64_t r = 0; r < m; r++)
        for (int64_t j = 0; j < n; j++) {
            float *c = cmat + r * ldc + j;
            *c = bias ? bias[j] : beta == 0.0f ? 0.0f : beta * *c;
        }
}

/* Split along C's longer side, so each part packs the smaller operand share.
 * With a bias, each part first fills its block of C with it (beta is then 1):
 * one pass over the block while it is in cache, and one hand-off. */
void ast_sgemm_bias(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                    const float *b, int ldb, float beta, float *cmat, int ldc, const float *bias)
{
    /* Empty shapes (a batch of 0 sets, a set of 0 cells): C has no element
     * for m or n = 0, and the grain below would divide by 0 (SIGFPE). */
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        sgemm_empty_sum(m, n, beta, cmat, ldc, bias);
        return;
    }
    ast_parallel_threads(); /* the pool sets OpenBLAS to one thread when it starts */
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
    gemm_args g = {trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, bias ? 1.0f : beta, a, b, cmat, bias};
    int by_rows = m >= n;
    int64_t line_flops = (int64_t)(by_rows ? n : m) * k;
    int64_t grain = line_flops >= GEMM_GRAIN_FLOPS ? 1 : GEMM_GRAIN_FLOPS / line_flops;
    ast_parallel_for(by_rows ? m : n, grain, by_rows ? sgemm_rows : sgemm_cols, &g);
}

void ast_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *cmat, int ldc)
{
    ast_sgemm_bias(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, cmat, ldc, NULL);
}
