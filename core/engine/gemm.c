/* Row-major sgemm on host memory: OpenBLAS or oneDNN (gemm_onednn.c) on
 * one thread per part, the parts split over alphast's thread pool (one
 * pool for GEMMs and elementwise kernels, so they never oversubscribe the
 * cores). Which library runs a shape is fixed by the shape, the CPU's
 * instruction set and ALPHAST_GEMM, never by timings at run time, so a
 * run's bits do not depend on them. ast_gemm picks float32 or bf16
 * (gemm_bf16.c) by the op's precision. */
#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- which library -------------------------------------------------------- */

static const char *const library_names[] = {"auto", "openblas", "onednn"};

static struct {
    pthread_once_t once;
    atomic_int chosen; /* ast_gemm_library */
} lib = {.once = PTHREAD_ONCE_INIT};

const char *ast_gemm_library_name(ast_gemm_library l) { return library_names[l]; }

/* 0 where l cannot run in this build on this CPU, with why. */
static int library_runs(ast_gemm_library l, char *why, size_t n)
{
    if (l != AST_GEMM_ONEDNN) return 1;
#if AST_HAVE_ONEDNN
    if (ast_onednn()->ok) return 1;
    snprintf(why, n, "%s", ast_onednn()->text);
#else
    snprintf(why, n, "this alphast was built without oneDNN (apt-get install libdnnl-dev, then run configure and "
                     "make again)");
#endif
    return 0;
}

static void library_from_env(void)
{
    const char *v = getenv("ALPHAST_GEMM");
    if (!v || !*v) return;
    char why[256];
    for (int l = 0; l < 3; l++)
        if (!strcmp(v, library_names[l])) {
            if (!library_runs((ast_gemm_library)l, why, sizeof why)) {
                fprintf(stderr, "alphast: ALPHAST_GEMM=onednn, but %s; unset ALPHAST_GEMM or set it to openblas\n",
                        why);
                exit(2);
            }
            atomic_store(&lib.chosen, l);
            return;
        }
    fprintf(stderr, "alphast: ALPHAST_GEMM=%s is not a GEMM library; set it to openblas, onednn or auto\n", v);
    exit(2);
}

int ast_gemm_use(ast_gemm_library l, char *why, size_t n)
{
    pthread_once(&lib.once, library_from_env); /* the environment first, then this call */
    if (!library_runs(l, why, n)) return 0;
    atomic_store(&lib.chosen, (int)l);
    return 1;
}

/* auto's rule: a table of the library per instruction set, transposes
 * and size, from bench_sgemm's tables (docs/benchmarks.md, "float32
 * GEMMs"). Small: fewer than SMALL_GEMM multiply-adds, where per-call
 * overhead decides (a gated-attention tile). On AVX2 OpenBLAS, the
 * incumbent: oneDNN is no faster there (the 2-core EPYC: the model's step
 * in CPU time +9 % and -4 % in two sessions). On AVX-512 (the 16-core
 * Xeon, 4 and 16 threads) oneDNN runs the model's GEMMs 1.0-1.7x faster
 * (up to 4x for thin ones) in every transpose, but a 64-wide attention
 * tile 0.57-1.10x: small ones stay on OpenBLAS. */
#define SMALL_GEMM (1 << 20)
static const unsigned char auto_table[2][2][2][2] = {
    /* [avx512][ta][tb][small] */
    [0] = {{{AST_GEMM_OPENBLAS, AST_GEMM_OPENBLAS}, {AST_GEMM_OPENBLAS, AST_GEMM_OPENBLAS}},
           {{AST_GEMM_OPENBLAS, AST_GEMM_OPENBLAS}, {AST_GEMM_OPENBLAS, AST_GEMM_OPENBLAS}}},
    [1] = {{{AST_GEMM_ONEDNN, AST_GEMM_OPENBLAS}, {AST_GEMM_ONEDNN, AST_GEMM_OPENBLAS}},
           {{AST_GEMM_ONEDNN, AST_GEMM_OPENBLAS}, {AST_GEMM_ONEDNN, AST_GEMM_OPENBLAS}}},
};

static ast_gemm_library auto_library(int ta, int tb, int m, int n, int k)
{
#if AST_HAVE_ONEDNN
    const ast_onednn_info *in = ast_onednn();
    int small = (int64_t)m * n * k < SMALL_GEMM;
    if (in->ok) return (ast_gemm_library)auto_table[in->avx512][!!ta][!!tb][small];
#endif
    (void)ta, (void)tb, (void)m, (void)n, (void)k;
    return AST_GEMM_OPENBLAS;
}

ast_gemm_library ast_gemm_library_for(int ta, int tb, int m, int n, int k)
{
    pthread_once(&lib.once, library_from_env);
    ast_gemm_library l = (ast_gemm_library)atomic_load(&lib.chosen);
    return l == AST_GEMM_AUTO ? auto_library(ta, tb, m, n, k) : l;
}

/* ---- the GEMM ---------------------------------------------------------------- */

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
    ast_gemm_args g = {trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta, a, b, cmat, bias, 0};
#if AST_HAVE_ONEDNN
    if (ast_gemm_library_for(trans_a, trans_b, m, n, k) == AST_GEMM_ONEDNN) {
        ast_gemm_onednn(&g, 0);
        return;
    }
#endif
    ast_parallel_threads(); /* the pool sets OpenBLAS to one thread when it starts */
    if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
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
