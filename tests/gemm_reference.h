/* What the GEMM tests (test_bf16, test_gemm_onednn) check against: random
 * operands and op(A), op(B) read from row-major storage with leading
 * dimensions, for sums in double. */
#ifndef ALPHAST_TEST_GEMM_REFERENCE_H
#define ALPHAST_TEST_GEMM_REFERENCE_H

#include <stdlib.h>

#include "engine/engine.h"

static inline float *gauss(ast_rng *r, int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = ast_rng_gauss(r);
    return v;
}

/* op(A)[i][p] and op(B)[p][j]. */
static inline double op_a(const float *a, int ta, int lda, int i, int p)
{
    return ta ? a[(int64_t)p * lda + i] : a[(int64_t)i * lda + p];
}

static inline double op_b(const float *b, int tb, int ldb, int p, int j)
{
    return tb ? b[(int64_t)j * ldb + p] : b[(int64_t)p * ldb + j];
}

#endif
