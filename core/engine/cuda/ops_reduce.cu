/* CUDA reductions: sum over one axis (kept with size 1) and the sum / mean
 * of every element, as ops/ops_reduce.c. Every sum runs in a fixed order
 * (group trees, blocks added in block order), never with atomics, so a
 * result repeats bit for bit; the totals accumulate in double as the CPU's. */
#include "engine/cuda/row_reduce.cuh"

extern "C" {
#include "engine/ops/ops_axis.h"
}

/* ---- sum_axis --------------------------------------------------------------- */

/* The last axis (inner == 1): a group per row of len floats. */
template <int G> __global__ void sum_rows_kernel(const float *x, float *y, int64_t rows, int64_t len)
{
    for (int64_t r = group_first_row<G>(); r < rows; r += group_row_stride<G>()) {
        float s = 0.0f;
        for (int64_t k = group_lane<G>(); k < len; k += G) s += x[r * len + k];
        s = group_sum<G>(s);
        if (group_lane<G>() == 0) y[r] = s;
    }
}

/* Another axis: a thread per output (o, j) walks the axis; neighbouring
 * threads read neighbouring floats, so every step is one coalesced load. */
__global__ void sum_columns_kernel(const float *x, float *y, int64_t outer, int64_t len, int64_t inner)
{
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < outer * inner; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = t / inner, j = t % inner;
        float s = 0.0f;
        for (int64_t k = 0; k < len; k++) s += x[(o * len + k) * inner + j];
        y[t] = s;
    }
}

/* gx[o, k, j] += dy[o, j]. */
__global__ void sum_axis_backward_kernel(const float *dy, float *gx, int64_t outer, int64_t len, int64_t inner)
{
    int64_t n = outer * len * inner;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        gx[i] += dy[i / (len * inner) * inner + i % inner];
}

/* iarg: outer, len, inner. */
static void sum_axis_backward(ast_ctx *c, const ast_node *n)
{
    float *gx = ast_grad(c, n->in[0]);
    int64_t size = n->iarg[0] * n->iarg[1] * n->iarg[2];
    if (!gx || !size) return;
    sum_axis_backward_kernel<<<ast_cuda_blocks(size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        n->out->grad, gx, n->iarg[0], n->iarg[1], n->iarg[2]);
    AST_CUDA_LAUNCHED();
}

extern "C" ast_tensor *ast_cuda_sum_axis(ast_ctx *c, ast_tensor *x, int axis)
{
    ast_axis_split sp = ast_split_axis(x, axis, "sum_axis");
    int64_t shape[AST_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[sp.axis] = 1;
    ast_tensor *y = ast_empty(c, x->ndim, shape); /* every element written, 0 for an empty axis */
    if (y->size && sp.inner == 1) {
        AST_ROW_LAUNCH(sum_rows_kernel, sp.outer, sp.len, x->data, y->data, sp.outer, sp.len);
    } else if (y->size) {
        sum_columns_kernel<<<ast_cuda_blocks(y->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(x->data, y->data, sp.outer,
                                                                                            sp.len, sp.inner);
        AST_CUDA_LAUNCHED();
    }
    ast_node node = {.op = "sum_axis", .backward = sum_axis_backward, .out = y, .in = {x}, .n_in = 1,
                     .iarg = {sp.outer, sp.len, sp.inner}};
    ast_record(c, &node);
    return y;
}

/* ---- sum and mean ----------------------------------------------------------- */

/* Elements per block of the first pass, and at most this many blocks: the
 * split depends on the size only, so the order of the additions (and the
 * bits of the total) does too. */
#define TOTAL_CHUNK 8192
#define TOTAL_MAX_BLOCKS 1024

/* Each block's grid-stride share of x[0, n) in double, reduced in the block's
 * tree; into part[block], or, from a single block (part NULL), the total
 * times scale into y[0]. Run on the floats of x, then on the blocks' parts. */
template <typename T>
__global__ void total_kernel(const T *x, int64_t n, double *part, float *y, double scale)
{
    double s = 0.0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) s += x[i];
    s = group_sum<AST_ROW_BLOCK>(s);
    if (threadIdx.x) return;
    if (part)
        part[blockIdx.x] = s;
    else
        y[0] = (float)(s * scale);
}

/* y[0] = sum(x) * scale: one launch for up to TOTAL_CHUNK floats, else the
 * blocks' parts (device arena) and a second launch that adds them. */
static void scaled_total_into(ast_ctx *c, const float *x, int64_t n, float *y, float scale)
{
    int64_t blocks = (n + TOTAL_CHUNK - 1) / TOTAL_CHUNK;
    blocks = blocks < 1 ? 1 : blocks > TOTAL_MAX_BLOCKS ? TOTAL_MAX_BLOCKS : blocks;
    double *part = blocks > 1 ? (double *)ast_data_alloc_uninit(c, (size_t)blocks * sizeof *part) : NULL;
    total_kernel<float><<<(unsigned)blocks, AST_ROW_BLOCK, 0, AST_CUDA_STREAM>>>(x, n, part, y, scale);
    AST_CUDA_LAUNCHED();
    if (!part) return;
    total_kernel<double><<<1, AST_ROW_BLOCK, 0, AST_CUDA_STREAM>>>(part, blocks, NULL, y, scale);
    AST_CUDA_LAUNCHED();
}

/* gx[i] += dy[0] * scale. */
__global__ void total_backward_kernel(const float *dy, float scale, float *gx, int64_t n)
{
    float g = dy[0] * scale;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) gx[i] += g;
}

/* farg[0] = scale: 1 for sum, 1/size for mean. */
static void total_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *x = n->in[0];
    float *gx = ast_grad(c, x);
    if (!gx || !x->size) return;
    total_backward_kernel<<<ast_cuda_blocks(x->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(n->out->grad, n->farg[0],
                                                                                           gx, x->size);
    AST_CUDA_LAUNCHED();
}

static ast_tensor *scaled_total(ast_ctx *c, ast_tensor *x, float scale, const char *op)
{
    const int64_t one = 1;
    ast_tensor *y = ast_empty(c, 1, &one);
    scaled_total_into(c, x->data, x->size, y->data, scale);
    ast_node node = {.op = op, .backward = total_backward, .out = y, .in = {x}, .n_in = 1, .farg = {scale}};
    ast_record(c, &node);
    return y;
}

extern "C" ast_tensor *ast_cuda_sum(ast_ctx *c, ast_tensor *x) { return scaled_total(c, x, 1.0f, "sum"); }

extern "C" ast_tensor *ast_cuda_mean(ast_ctx *c, ast_tensor *x)
{
    AST_ASSERT(x->size > 0, "mean of an empty tensor");
    return scaled_total(c, x, 1.0f / (float)x->size, "mean");
}
