/* Row-major sgemm on host memory: OpenBLAS on one thread per part, the parts
 * split over alphast's thread pool (one pool for GEMMs and elementwise
 * kernels, so they never oversubscribe the cores). ast_gemm picks float32
 * or bf16 (gemm_bf16.c) by the op's precision. */
#include <cblas.h>
#include <string.h>

#include "engine/gemm_internal.h"

/* One part of C as one single-threaded cblas_sgemm. With a bias, the part
 * first fills its block of C with it (beta is then 1): one pass over the
 * block while it is in cache, and one hand-off. */
static void sgemm_part(void *arg, int64_t lo, int64_t hi)
{
    const ast_gemm_args *g = arg;
    ast_gemm_part p = ast_gemm_part_of(g, lo, hi);
    float *c = g->c + p.c;
    for (int64_t r = 0; g->bias && r < p.m; r++)
        memcpy(c + r * g->ldc, g->bias + p.bias, (size_t)p.n * sizeof(float));
    cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans, g->tb ? CblasTrans : CblasNoTrans, p.m, p.n, g->k,
                g->alpha, (const float *)g->a + p.a, g->lda, (const float *)g->b + p.b, g->ldb,
                g->bias ? 1.0f : g->beta, c, g->ldc);
}

/* Work per part: at least ~0.5 M multiply-adds, below which the hand-off
 * costs more than a second thread saves (measured at the demo size). */
#define GEMM_GRAIN_FLOPS (1 << 19)

void ast_gemm_split(ast_gemm_args *g, ast_range_fn part)
{
    g->by_rows = g->m >= g->n;
    int64_t line_flops = (int64_t)(g->by_rows ? g->n : g->m) * g->k;
    int64_t grain = line_flops >= GEMM_GRAIN_FLOPS ? 1 : GEMM_GRAIN_FLOPS / line_flops;
    ast_parallel_for(g->by_rows ? g->m : g->n, grain, part, g);
}

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

void ast_sgemm_bias(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                    const float *b, int ldb, float beta, float *cmat, int ldc, const float *bias)
{
    /* Empty shapes (a batch of 0 sets, a set of 0 cells): C has no element
     * for m or n = 0, and the grain would divide by 0 (SIGFPE). */
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        sgemm_empty_sum(m, n, beta, cmat, ldc, bias);
        return;
    }
    ast_parallel_threads(); /* the pool sets OpenBLAS to one thread when it starts */
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
    ast_gemm_args g = {trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, a, b, cmat, bias, 0};
    ast_gemm_split(&g, sgemm_part);
}

void ast_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *cmat, int ldc)
{
    ast_sgemm_bias(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, cmat, ldc, NULL);
}

void ast_gemm(ast_precision p, int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
              const float *b, int ldb, float beta, float *cmat, int ldc, const float *bias)
{
#if AST_HAVE_ONEDNN
    /* Empty shapes and sums have nothing to round: float32 handles them. */
    if (p == AST_PRECISION_BF16 && m > 0 && n > 0 && k > 0) {
        ast_gemm_bf16(&(ast_gemm_args){trans_a, trans_b, m, n, k, lda, ldb, ldc, 1.0f, beta, a, b, cmat, bias, 0});
        return;
    }
#endif
    ast_sgemm_bias(trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, beta, cmat, ldc, bias);
}
