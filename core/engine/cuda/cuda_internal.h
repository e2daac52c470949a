/* engine/cuda/cuda_internal.h: what the CUDA backend's files share (C++
 * compiled by nvcc, with C linkage for what the engine calls). Every launch
 * and copy goes to the calling thread's default stream (nvcc's
 * --default-stream per-thread, Makefile.am): in order, never synchronising
 * with other threads, and capturable as a CUDA graph. */
#ifndef ALPHAST_CUDA_INTERNAL_H
#define ALPHAST_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "engine/backend.h"

#define AST_CUDA_STREAM cudaStreamPerThread

#ifdef __cplusplus
extern "C" {
#endif

/* Prints the failed call, CUDA's reason and where, then exits with 70: a
 * kernel that faults leaves the context unusable, so nothing can go on. */
#if defined(__GNUC__)
__attribute__((noreturn))
#endif
void ast_cuda_fail(const char *call, const char *why, const char *file, int line);

/* The cuBLAS handle of this process, on AST_CUDA_STREAM, with float32 math
 * (no TF32 tensor cores; bf16 GEMMs ask for them per call). */
cublasHandle_t ast_cuda_blas(void);

/* Host to device on this thread's stream: queued from pinned memory;
 * from pageable memory counted as host traffic, and refused (spoiling the
 * capture) while a graph is being captured (backend_cuda.cu). */
void ast_cuda_copy_in(void *dst, const void *src, size_t bytes);

/* The CUDA kernels' families (ops_<family>.cu), each filling its ops' slots
 * of the backend's table (engine/kernels.h). */
void ast_cuda_linalg_kernels(ast_op_kernel *table);
void ast_cuda_reduce_kernels(ast_op_kernel *table);
void ast_cuda_routing_kernels(ast_op_kernel *table);
void ast_cuda_loss_kernels(ast_op_kernel *table);
void ast_cuda_aligned_kernels(ast_op_kernel *table);
void ast_cuda_shape_kernels(ast_op_kernel *table);
void ast_cuda_norm_kernels(ast_op_kernel *table);
void ast_cuda_elementwise_kernels(ast_op_kernel *table);
void ast_cuda_grouped_kernels(ast_op_kernel *table);
void ast_cuda_moe_kernels(ast_op_kernel *table);

#ifdef __cplusplus
}
#endif

#define AST_CUDA_CHECK(call)                                                              \
    do {                                                                                  \
        cudaError_t ast_err_ = (call);                                                    \
        if (ast_err_ != cudaSuccess) ast_cuda_fail(#call, cudaGetErrorString(ast_err_), __FILE__, __LINE__); \
    } while (0)

#define AST_CUBLAS_CHECK(call)                                                            \
    do {                                                                                  \
        cublasStatus_t ast_st_ = (call);                                                  \
        if (ast_st_ != CUBLAS_STATUS_SUCCESS) ast_cuda_fail(#call, cublasGetStatusString(ast_st_), __FILE__, __LINE__); \
    } while (0)

/* After every <<<launch>>>: a bad configuration is reported at once. */
#define AST_CUDA_LAUNCHED() AST_CUDA_CHECK(cudaGetLastError())

/* Threads per block of the elementwise kernels, and the blocks for n items
 * (grid-stride loops cover the rest beyond the cap). */
#define AST_CUDA_THREADS 256
static inline unsigned ast_cuda_blocks(int64_t n)
{
    int64_t b = (n + AST_CUDA_THREADS - 1) / AST_CUDA_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

/* Host memory that lives as long as the step: ast_alloc's, copied to device
 * memory from the step arena (index arrays of gather_rows and friends). */
static inline void *ast_cuda_upload(ast_ctx *c, const void *host, size_t bytes)
{
    void *d = ast_data_alloc_uninit(c, bytes);
    ast_cuda_copy_in(d, host, bytes);
    return d;
}

#endif
