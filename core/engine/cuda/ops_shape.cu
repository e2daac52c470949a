/* The CUDA kernels of the shape ops (ops/dispatch_shape.c), with
 * ops/ops_shape.c's semantics: reshape's backward, the permutations
 * (permute, split_heads, merge_heads: one strided copy kernel), concat and
 * slice on the last axis. Each backward writes a fresh gradient (=) or adds into one
 * already written (+=), in one launch per input; nothing synchronises. */
#include <string.h>

#include "engine/cuda/cuda_internal.h"
#include "engine/ops/ops_plan.h"

/* ---- reshape ------------------------------------------------------------- */

/* The gradient has the input's element order: copied when fresh, else
 * added by the backend's accumulate service. */
static void reshape_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    int fresh = g->assign[0];
    int64_t size = n->out->size;
    if (!gx || !size) return;
    if (fresh) {
        AST_CUDA_CHECK(cudaMemcpyAsync(gx, n->out->grad, (size_t)size * sizeof(float), cudaMemcpyDeviceToDevice,
                                       AST_CUDA_STREAM));
        return;
    }
    const ast_backend *b = ast_ctx_backend(c);
    b->accumulate(b, gx, n->out->grad, size);
}

/* ---- permutations ---------------------------------------------------------- */

/* The plan (ast_perm_plan, ops_plan.h) is passed to the kernels by value
 * and kept (host memory) for the backward. */
/* Forward copies src into dst (dst[o] = src[at(o)]); backward writes the
 * other way (src[at(o)] = or += dst[o]): a permutation reaches every
 * element once, so no two threads write one element. Writes of the
 * forward and reads of the backward follow o, coalesced. */
enum { PERM_FORWARD, PERM_BACKWARD_ADD, PERM_BACKWARD_ASSIGN };

__device__ static inline int64_t perm_source(const ast_perm_plan &p, int64_t o)
{
    int64_t i3 = o % p.dim[3], r = o / p.dim[3];
    int64_t i2 = r % p.dim[2];
    r /= p.dim[2];
    int64_t i1 = r % p.dim[1], i0 = r / p.dim[1];
    return i0 * p.stride[0] + i1 * p.stride[1] + i2 * p.stride[2] + i3 * p.stride[3];
}

__global__ void permute_kernel(ast_perm_plan p, float *src, float *dst, int64_t n, int mode)
{
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += (int64_t)gridDim.x * blockDim.x) {
        int64_t s = perm_source(p, o);
        if (mode == PERM_FORWARD)
            dst[o] = src[s];
        else if (mode == PERM_BACKWARD_ASSIGN)
            src[s] = dst[o];
        else
            src[s] += dst[o];
    }
}

/* A permutation that moves the source's innermost axis away from the
 * output's (a transpose) would read or write with a stride along o. Such a
 * copy goes through a 32 x 32 tile in shared memory instead: the source
 * side runs along output dim k (the source's contiguous axis), the output
 * side along dim 3, both coalesced. One block per tile of (dim 3, dim k);
 * blockIdx.y walks the other two dims. */
#define TILE 32
#define TILE_ROWS 8

/* The tiled copy's geometry, worked out on the host (indexing the plan's
 * arrays by a run-time dim in the kernel would put them on its stack):
 * the sizes of dims 3 and k, the source's stride along 3 (along k it is 1),
 * the output's along k (along 3 it is 1), and the other two dims u, v as
 * slabs w = iu * dim_v + iv with their strides in source and output. */
typedef struct tile_plan {
    int64_t dim3, dimk, src3, outk, dim_v, slabs;
    int64_t src_u, src_v, out_u, out_v;
} tile_plan;

__global__ void permute_tiled_kernel(tile_plan t, float *src, float *dst, int mode)
{
    __shared__ float tile[TILE][TILE + 1]; /* [i3][ik]; +1: no bank conflicts along i3 */
    int64_t tiles3 = (t.dim3 + TILE - 1) / TILE, i3_0 = blockIdx.x % tiles3 * TILE, ik_0 = blockIdx.x / tiles3 * TILE;
    int tx = threadIdx.x;
    for (int64_t w = blockIdx.y; w < t.slabs; w += gridDim.y) {
        int64_t iu = w / t.dim_v, iv = w % t.dim_v;
        float *s = src + iu * t.src_u + iv * t.src_v, *d = dst + iu * t.out_u + iv * t.out_v;
        if (mode == PERM_FORWARD) { /* source side in (tx along k), output side out (tx along 3) */
            for (int r = threadIdx.y; r < TILE; r += TILE_ROWS)
                if (i3_0 + r < t.dim3 && ik_0 + tx < t.dimk) tile[r][tx] = s[(ik_0 + tx) + (i3_0 + r) * t.src3];
            __syncthreads();
            for (int r = threadIdx.y; r < TILE; r += TILE_ROWS)
                if (i3_0 + tx < t.dim3 && ik_0 + r < t.dimk) d[(ik_0 + r) * t.outk + i3_0 + tx] = tile[tx][r];
        } else { /* the gradient flows back: output side in, source side out */
            for (int r = threadIdx.y; r < TILE; r += TILE_ROWS)
                if (i3_0 + tx < t.dim3 && ik_0 + r < t.dimk) tile[tx][r] = d[(ik_0 + r) * t.outk + i3_0 + tx];
            __syncthreads();
            for (int r = threadIdx.y; r < TILE; r += TILE_ROWS)
                if (i3_0 + r < t.dim3 && ik_0 + tx < t.dimk) {
                    float *g = &s[(ik_0 + tx) + (i3_0 + r) * t.src3];
                    *g = mode == PERM_BACKWARD_ASSIGN ? tile[r][tx] : *g + tile[r][tx];
                }
        }
        __syncthreads(); /* the tile is read in full before the next slab overwrites it */
    }
}

/* The output dim k (0..2) that the source's contiguous axis went to when
 * the permutation moves it off the innermost position; -1 when it stays
 * there (split_heads, merge_heads: the element kernel reads runs of dh)
 * or the dims involved are 1. */
static int transposed_axis(const ast_perm_plan *p)
{
    if (p->dim[3] == 1 || p->stride[3] == 1) return -1;
    for (int k = 0; k < 3; k++)
        if (p->stride[k] == 1 && p->dim[k] > 1) return k;
    return -1;
}

static tile_plan plan_tiles(const ast_perm_plan *p, int k)
{
    const int64_t *d = p->dim;
    int64_t out_stride[3] = {d[1] * d[2] * d[3], d[2] * d[3], d[3]};
    int u = k == 0 ? 1 : 0, v = k == 2 ? 1 : 2; /* the dims other than k and 3 */
    tile_plan t = {d[3], d[k], p->stride[3], out_stride[k], d[v], d[u] * d[v],
                   p->stride[u], p->stride[v], out_stride[u], out_stride[v]};
    return t;
}

static void permute_launch(const ast_perm_plan *p, float *src, float *dst, int64_t n, int mode)
{
    if (!n) return;
    int k = transposed_axis(p);
    if (k < 0) {
        permute_kernel<<<ast_cuda_blocks(n), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(*p, src, dst, n, mode);
    } else {
        tile_plan t = plan_tiles(p, k);
        int64_t tiles = (t.dim3 + TILE - 1) / TILE * ((t.dimk + TILE - 1) / TILE);
        dim3 grid((unsigned)tiles, (unsigned)(t.slabs < 65535 ? t.slabs : 65535)), block(TILE, TILE_ROWS);
        permute_tiled_kernel<<<grid, block, 0, AST_CUDA_STREAM>>>(t, src, dst, mode);
    }
    AST_CUDA_LAUNCHED();
}

static void permute_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    if (g->g[0])
        permute_launch((const ast_perm_plan *)n->saved, g->g[0], n->out->grad, n->out->size,
                       g->assign[0] ? PERM_BACKWARD_ASSIGN : PERM_BACKWARD_ADD);
}

static void permute_forward(ast_ctx *c, ast_node *n)
{
    permute_launch((const ast_perm_plan *)n->saved, n->in[0]->data, n->out->data, n->out->size, PERM_FORWARD);
}

/* ---- concat and slice on the last axis --------------------------------------- */

/* dst[r, col] = src[r, col] (assign) or += it, for rows x cols elements of
 * two row-major matrices with leading dimensions dst_ld and src_ld. */
__global__ void copy_cols_kernel(float *dst, int64_t dst_ld, const float *src, int64_t src_ld, int64_t rows,
                                 int64_t cols, int assign)
{
    int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / cols, col = i % cols;
        float v = src[r * src_ld + col];
        float *d = dst + r * dst_ld + col;
        *d = assign ? v : *d + v;
    }
}

static void copy_cols(float *dst, int64_t dst_ld, const float *src, int64_t src_ld, int64_t rows, int64_t cols,
                      int assign)
{
    int64_t n = rows * cols;
    if (!n) return;
    copy_cols_kernel<<<ast_cuda_blocks(n), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(dst, dst_ld, src, src_ld, rows,
                                                                                  cols, assign);
    AST_CUDA_LAUNCHED();
}

/* Each input's gradient is its columns of the output's, one launch per
 * input in order: an input listed twice is assigned, then added to. */
static void concat_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *gs)
{
    int64_t rows = ast_rows(n->out), width = ast_cols(n->out), off = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t cols = ast_cols(n->in[k]);
        if (gs->g[k]) copy_cols(gs->g[k], cols, n->out->grad + off, width, rows, cols, gs->assign[k]);
        off += cols;
    }
}

/* The inputs of one concat, passed to its kernel by value. */
typedef struct concat_parts {
    const float *src[AST_NODE_MAX_IN];
    int64_t cols[AST_NODE_MAX_IN];
} concat_parts;

/* One launch for all inputs: each output element finds its input by
 * walking the (at most AST_NODE_MAX_IN) column counts; once col falls
 * inside an input it stops moving. Unrolled, so the parts stay in kernel
 * parameters rather than being copied to the stack for a run-time index. */
__global__ void concat_kernel(concat_parts p, float *y, int64_t rows, int64_t width)
{
    int64_t n = rows * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / width, col = i % width, cols = p.cols[0];
        const float *src = p.src[0];
#pragma unroll
        for (int k = 1; k < AST_NODE_MAX_IN; k++)
            if (col >= cols) col -= cols, cols = p.cols[k], src = p.src[k];
        y[i] = src[r * cols + col];
    }
}

static void concat_forward(ast_ctx *c, ast_node *n)
{
    concat_parts parts = {};
    for (int k = 0; k < n->n_in; k++) {
        parts.src[k] = n->in[k]->data;
        parts.cols[k] = ast_cols(n->in[k]);
    }
    ast_tensor *y = n->out;
    if (!y->size) return;
    concat_kernel<<<ast_cuda_blocks(y->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(parts, y->data, ast_rows(y),
                                                                                   ast_cols(y));
    AST_CUDA_LAUNCHED();
}

/* A fresh gradient of the sliced input is written whole: the window's
 * columns from gy, zeros elsewhere (no memset first). */
__global__ void slice_grad_kernel(float *gx, int64_t width, const float *gy, int64_t start, int64_t len, int64_t rows)
{
    int64_t n = rows * width;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / width, col = i % width - start;
        gx[i] = col >= 0 && col < len ? gy[r * len + col] : 0.0f;
    }
}

/* iarg[0]: start. An accumulated gradient is added to in the window only. */
static void slice_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    int fresh = g->assign[0];
    int64_t rows = ast_rows(n->in[0]), len = ast_cols(n->out), width = ast_cols(n->in[0]), start = n->iarg[0];
    if (!gx) return;
    if (!fresh) {
        copy_cols(gx + start, width, n->out->grad, len, rows, len, 0);
        return;
    }
    int64_t size = rows * width;
    if (!size) return;
    slice_grad_kernel<<<ast_cuda_blocks(size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(gx, width, n->out->grad, start,
                                                                                       len, rows);
    AST_CUDA_LAUNCHED();
}

static void slice_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0];
    int64_t len = ast_cols(n->out);
    copy_cols(n->out->data, len, x->data + n->iarg[0], ast_cols(x), ast_rows(x), len, 1);
}

extern "C" void ast_cuda_shape_kernels(ast_op_kernel *t)
{
    const unsigned every_input = (1u << AST_NODE_MAX_IN) - 1;
    t[AST_OP_reshape] = ast_op_kernel{NULL, reshape_backward, 1, 0};
    t[AST_OP_permute] = t[AST_OP_split_heads] = t[AST_OP_merge_heads] =
        ast_op_kernel{permute_forward, permute_backward, 1, 0};
    t[AST_OP_concat] = ast_op_kernel{concat_forward, concat_backward, every_input, 0};
    t[AST_OP_slice] = ast_op_kernel{slice_forward, slice_backward, 1, 0};
}
