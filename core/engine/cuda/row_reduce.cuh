/* engine/cuda/row_reduce.cuh: what the row kernels of ops_norm.cu,
 * ops_reduce.cu and ops_loss.cu share: a group of G threads per row (a warp,
 * or a whole block for long rows) and reductions over that group in a fixed
 * tree, so a result has the same bits on every run (no atomics). */
#ifndef ALPHAST_CUDA_ROW_REDUCE_CUH
#define ALPHAST_CUDA_ROW_REDUCE_CUH

#include "engine/cuda/cuda_internal.h"

/* Threads per block of the row kernels. Rows up to AST_ROW_WARP_MAX
 * floats get a warp each (8 rows per block: short rows such as a head's
 * dh = 16 keep every warp busy); longer ones (2000 genes) a whole block. */
#define AST_ROW_BLOCK 256
#define AST_ROW_WARP_MAX 1024

struct ast_add_op {
    template <typename T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct ast_max_op {
    template <typename T> __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};

/* op over the G threads of a group (G = 32: a warp; G = AST_ROW_BLOCK: the
 * block), every thread getting the result. The xor butterfly combines the
 * same pairs in the same order on every run, and both partners compute
 * op(a, b) = op(b, a) with the same bits; a block then adds its warps'
 * results in warp order. Every thread of the group must call it. */
template <int G, typename T, typename Op> __device__ T group_reduce(T v, Op op)
{
    for (int w = (G < 32 ? G : 32) / 2; w > 0; w /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, w));
    if constexpr (G > 32) {
        __shared__ T part[G / 32];
        __syncthreads(); /* the previous call's readers are done with part */
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
        __syncthreads();
        v = part[0];
        for (int i = 1; i < G / 32; i++) v = op(v, part[i]);
    }
    return v;
}

template <int G, typename T> __device__ T group_sum(T v) { return group_reduce<G>(v, ast_add_op()); }
template <int G, typename T> __device__ T group_max(T v) { return group_reduce<G>(v, ast_max_op()); }

/* The rows a group walks: its first, and the stride (grid-stride loops).
 * With G = AST_ROW_BLOCK every thread of a block walks the same rows, so
 * the block-wide barriers of group_reduce are reached by all of them. */
template <int G> __device__ int64_t group_first_row(void)
{
    return (int64_t)blockIdx.x * (AST_ROW_BLOCK / G) + threadIdx.x / G;
}
template <int G> __device__ int64_t group_row_stride(void) { return (int64_t)gridDim.x * (AST_ROW_BLOCK / G); }
template <int G> __device__ int group_lane(void) { return (int)(threadIdx.x % G); }

/* Blocks for `rows` rows at G threads each. */
static inline unsigned row_blocks(int64_t rows, int g)
{
    int64_t per = AST_ROW_BLOCK / g, b = (rows + per - 1) / per;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 8 ? 65535 * 8 : b);
}

/* Launches kernel<32> or kernel<AST_ROW_BLOCK> over `rows` rows of `cols`
 * floats, with the given arguments, on AST_CUDA_STREAM. */
#define AST_ROW_LAUNCH(kernel, rows, cols, ...)                                                        \
    do {                                                                                            \
        if ((cols) <= AST_ROW_WARP_MAX)                                                             \
            kernel<32><<<row_blocks(rows, 32), AST_ROW_BLOCK, 0, AST_CUDA_STREAM>>>(__VA_ARGS__);   \
        else                                                                                        \
            kernel<AST_ROW_BLOCK><<<row_blocks(rows, AST_ROW_BLOCK), AST_ROW_BLOCK, 0, AST_CUDA_STREAM>>>(__VA_ARGS__); \
        AST_CUDA_LAUNCHED();                                                                        \
    } while (0)

#endif
