/* The CUDA kernels of the reductions (ops/dispatch_reduce.c), as
 * ops/ops_reduce.c. Every sum runs in a fixed order
 * (group trees, blocks added in block order), never with atomics, so a
 * result repeats bit for bit; the totals accumulate in double as the CPU's. */
#include "engine/cuda/row_reduce.cuh"

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

/* Another axis: a block per tile of columns, lanes down each column
 * (row_reduce.cuh's column_combine): a mean over 512 cells of [B, 512, 3]
 * positions is 3 B columns, the MoE's load over 2,048 tokens one per expert. */
__global__ void sum_columns_kernel(const float *x, float *y, int64_t outer, int64_t len, int64_t inner)
{
    __shared__ float sh[AST_COL_LANES][AST_COL_TILE];
    for (int64_t b = blockIdx.x; b < outer * column_tiles(inner); b += gridDim.x) {
        int on;
        int64_t base = column_base(b, len, inner, &on);
        float s = 0.0f;
        for (int64_t k = threadIdx.y; on && k < len; k += AST_COL_LANES) s += x[base + k * inner];
        s = column_combine(s, sh, ast_add_op());
        if (on && threadIdx.y == 0) y[b / column_tiles(inner) * inner + base % inner] = s;
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
static void sum_axis_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    int64_t size = n->iarg[0] * n->iarg[1] * n->iarg[2];
    if (!gx || !size) return;
    sum_axis_backward_kernel<<<ast_cuda_blocks(size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        n->out->grad, gx, n->iarg[0], n->iarg[1], n->iarg[2]);
    AST_CUDA_LAUNCHED();
}

static void sum_axis_forward(ast_ctx *c, ast_node *n)
{
    const float *x = n->in[0]->data;
    float *y = n->out->data; /* every element written, 0 for an empty axis */
    int64_t outer = n->iarg[0], len = n->iarg[1], inner = n->iarg[2];
    if (n->out->size && inner == 1) {
        AST_ROW_LAUNCH(sum_rows_kernel, outer, len, x, y, outer, len);
    } else if (n->out->size) {
        AST_COLUMN_LAUNCH(sum_columns_kernel, outer, inner, x, y, outer, len, inner);
    }
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
static void total_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *x = n->in[0];
    float *gx = g->g[0];
    if (!gx || !x->size) return;
    total_backward_kernel<<<ast_cuda_blocks(x->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(n->out->grad, n->farg[0],
                                                                                           gx, x->size);
    AST_CUDA_LAUNCHED();
}

static void total_forward(ast_ctx *c, ast_node *n)
{
    scaled_total_into(c, n->in[0]->data, n->in[0]->size, n->out->data, n->farg[0]);
}

extern "C" void ast_cuda_reduce_kernels(ast_op_kernel *t)
{
    t[AST_OP_sum_axis] = ast_op_kernel{sum_axis_forward, sum_axis_backward, 0, 0};
    t[AST_OP_sum] = t[AST_OP_mean] = ast_op_kernel{total_forward, total_backward, 0, 0};
}
