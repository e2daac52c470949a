/* engine/cuda/row_reduce.cuh: what the row kernels of ops_norm.cu,
 * ops_reduce.cu and ops_loss.cu share: a group of G threads per row (a warp,
 * or a whole block for long rows) and reductions over that group in a fixed
 * tree, so a result has the same bits on every run (no atomics); and the
 * same for the columns of an [outer, len, inner] view (another axis). */
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

/* ---- columns ----------------------------------------------------------------- */

/* A block per (o, tile of AST_COL_TILE columns) of an [outer, len, inner]
 * view, AST_COL_LANES threads down each column: lane ty reads rows ty, ty +
 * AST_COL_LANES, ..., neighbouring threads neighbouring floats. A thread
 * per column leaves the GPU idle where columns are few (a sum over 512
 * cells of [4, 512, 3] positions is 12 columns). Blocks loop over the tiles
 * (column_tiles): every thread of a block takes the same number of turns. */
#define AST_COL_TILE 32
#define AST_COL_LANES 16

/* The lanes' values of each column combined by op in a fixed tree order,
 * returned to every lane; sh is the block's [AST_COL_LANES][AST_COL_TILE]. */
template <typename T, typename Op> __device__ T column_combine(T v, T (*sh)[AST_COL_TILE], Op op)
{
    int tx = threadIdx.x, ty = threadIdx.y;
    sh[ty][tx] = v;
    __syncthreads();
    for (int half = AST_COL_LANES / 2; half > 0; half /= 2) {
        if (ty < half) sh[ty][tx] = op(sh[ty][tx], sh[ty + half][tx]);
        __syncthreads();
    }
    T r = sh[0][tx];
    __syncthreads(); /* sh is written again by the next combine */
    return r;
}

__host__ __device__ inline int64_t column_tiles(int64_t inner) { return (inner + AST_COL_TILE - 1) / AST_COL_TILE; }

/* Tile b's column: its offset in the view's first row of that o, and
 * whether this lane's column exists (the last tile may be short). */
__device__ inline int64_t column_base(int64_t b, int64_t len, int64_t inner, int *on)
{
    int64_t tiles = column_tiles(inner), j = b % tiles * AST_COL_TILE + threadIdx.x;
    *on = j < inner;
    return b / tiles * len * inner + j;
}

/* kernel<<<...>>>(args) over the outer x tiles blocks of the view. */
#define AST_COLUMN_LAUNCH(kernel, outer, inner, ...)                                                      \
    do {                                                                                                  \
        int64_t blocks_ = (outer) * column_tiles(inner);                                                 \
        kernel<<<(unsigned)(blocks_ < (1 << 20) ? blocks_ : (1 << 20)), dim3(AST_COL_TILE, AST_COL_LANES), 0, \
                 AST_CUDA_STREAM>>>(__VA_ARGS__);                                                         \
        AST_CUDA_LAUNCHED();                                                                              \
    } while (0)

#endif
