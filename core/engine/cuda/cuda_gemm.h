/* engine/cuda/cuda_gemm.h: the GEMMs and bias sums of linear, bmm and
 * grouped_linear on device memory (defined in ops_linalg.cu). Row-major, as
 * ast_gemm (engine.h): cuBLAS is column-major, so a row-major C = op(A)
 * op(B) runs as the column-major C^T = op(B)^T op(A)^T, no copy. */
#ifndef ALPHAST_CUDA_GEMM_H
#define ALPHAST_CUDA_GEMM_H

#include "engine/cuda/cuda_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C = op(A) op(B) + beta C for `batch` matrices, the i-th at a + i *
 * stride_a (elements), and so on. AST_PRECISION_FP32 runs cublasSgemm* (the
 * handle's math mode: pure float32); AST_PRECISION_BF16 runs bf16 tensor
 * cores with float32 accumulation (CUBLAS_COMPUTE_32F_FAST_16BF), float32 in
 * and out, as PyTorch's bf16 autocast; AST_PRECISION_TF32 TF32 tensor cores
 * (CUBLAS_COMPUTE_32F_FAST_TF32), as PyTorch's allow_tf32. k = 0 gives C = beta C (beta = 0
 * writes zeros). */
void ast_cuda_gemm_batched(ast_precision p, int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                           int64_t stride_a, const float *b, int ldb, int64_t stride_b, float beta, float *cmat,
                           int ldc, int64_t stride_c, int64_t batch);

/* One GEMM; with bias [n] non-NULL, C's rows are first set to it and beta is
 * ignored (ast_gemm's contract). */
void ast_cuda_gemm(ast_precision p, int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                   const float *b, int ldb, float beta, float *cmat, int ldc, const float *bias);

/* dst[j] += sum of src[r * cols + j] over r < rows (a bias gradient), in a
 * fixed order, so it repeats bit for bit; tall ones take a scratch buffer of
 * partial sums from c's arena. */
void ast_cuda_column_sums(ast_ctx *c, const float *src, int64_t rows, int64_t cols, float *dst);

#ifdef __cplusplus
}
#endif
#endif
