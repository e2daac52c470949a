/* Sparse row routing (mixture of experts) on the GPU: gather_rows and
 * scatter_add_rows, forward and backward, as ops/ops_routing.c. The index
 * array is host memory (a plugin fills it); it is checked there, copied to
 * the step arena once per op, and the backward reads that copy. Where
 * several source rows add into one row (scatter's forward, gather's
 * backward), a CSR built on the host lists each row's sources in
 * increasing i and one thread per element adds them in that order: no
 * atomics, and the CPU's order, so those results equal the CPU's bit for
 * bit (products are rounded before the add, as gcc's -std=c11 does). */
#include <string.h>

#include "engine/cuda/cuda_internal.h"

/* Device copies: idx [n]; with a CSR, starts [rows + 1] and sources [n]:
 * the i with idx[i] == r are sources[starts[r] .. starts[r + 1]), increasing. */
typedef struct routing_index {
    const int32_t *idx, *starts, *sources;
} routing_index;

/* The dispatch checked idx against [0, rows); the CSR counts in int32. */
static void check_count(int64_t n, const char *op)
{
    AST_ASSERT(n < (1ll << 31), "%s: %lld rows (at most 2^31 - 1)", op, (long long)n);
}

/* A counting sort: count per row, prefix sums (ends), then place each i
 * from the last down, which leaves starts[r] at row r's first source. */
static void build_csr(const int32_t *idx, int64_t n, int64_t rows, int32_t *starts, int32_t *sources)
{
    memset(starts, 0, (size_t)(rows + 1) * sizeof *starts);
    for (int64_t i = 0; i < n; i++) starts[idx[i]]++;
    for (int64_t r = 1; r < rows; r++) starts[r] += starts[r - 1];
    starts[rows] = (int32_t)n;
    for (int64_t i = n; i-- > 0;) sources[--starts[idx[i]]] = (int32_t)i;
}

/* idx and, when with_csr, its CSR, in one copy. */
static routing_index upload_index(ast_ctx *c, const int32_t *idx, int64_t n, int64_t rows, int with_csr)
{
    size_t count = (size_t)n + (with_csr ? (size_t)(rows + 1 + n) : 0);
    int32_t *host = (int32_t *)ast_alloc_uninit(c, count * sizeof *host);
    if (n) memcpy(host, idx, (size_t)n * sizeof *idx);
    if (with_csr) build_csr(idx, n, rows, host + n, host + n + rows + 1);
    const int32_t *dev = (const int32_t *)ast_cuda_upload(c, host, count * sizeof *host);
    routing_index r = {dev, NULL, NULL};
    if (with_csr) r.starts = dev + n, r.sources = dev + n + rows + 1;
    return r;
}

/* dst[r, :] = (keep ? dst[r, :] : 0) + sum of scale_i src[i, :] over row r's
 * sources in increasing i; scale_i = w[i], or 1 when w is NULL. */
__global__ void csr_sums_kernel(const float *src, const float *w, const int32_t *starts, const int32_t *sources,
                                int64_t rows, int64_t d, float *dst, int keep)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < rows * d; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = e / d, k = e - r * d;
        float acc = keep ? dst[e] : 0.0f;
        for (int32_t j = starts[r]; j < starts[r + 1]; j++) {
            int64_t i = sources[j];
            acc = __fadd_rn(acc, w ? __fmul_rn(w[i], src[i * d + k]) : src[i * d + k]);
        }
        dst[e] = acc;
    }
}

static void csr_sums(const float *src, const float *w, const routing_index *ri, int64_t rows, int64_t d, float *dst,
                     int keep)
{
    if (rows * d <= 0) return;
    csr_sums_kernel<<<ast_cuda_blocks(rows * d), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(src, w, ri->starts, ri->sources,
                                                                                       rows, d, dst, keep);
    AST_CUDA_LAUNCHED();
}

/* ---- gather_rows ------------------------------------------------------------ */

__global__ void gather_kernel(const float *x, const int32_t *idx, int64_t n, int64_t d, float *y)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n * d; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e / d;
        y[e] = x[(int64_t)idx[i] * d + (e - i * d)];
    }
}

/* gx[t] += the rows of dy gathered from t. saved: the routing_index (with
 * its CSR over x's rows); iarg[0] = n. */
static void gather_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *x = n->in[0];
    csr_sums(n->out->grad, NULL, (const routing_index *)n->saved, ast_rows(x), ast_cols(x), g->g[0], !g->assign[0]);
}

/* saved on entry: the host's idx; replaced by the routing_index. */
static void gather_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0];
    int64_t d = ast_cols(x), count = n->iarg[0];
    check_count(count, "gather_rows");
    routing_index *ri = (routing_index *)ast_alloc(c, sizeof *ri);
    *ri = upload_index(c, (const int32_t *)n->saved, count, ast_rows(x), ast_needs_grad(c, &x, 1));
    n->saved = ri;
    if (count * d > 0) {
        gather_kernel<<<ast_cuda_blocks(count * d), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(x->data, ri->idx, count, d,
                                                                                          n->out->data);
        AST_CUDA_LAUNCHED();
    }
}

/* ---- scatter_add_rows ---------------------------------------------------------- */

/* out[idx[i]] += w[i] src[i]: dsrc[i] (+)= w[i] dout[idx[i]] and
 * dw[i] (+)= <dout[idx[i]], src[i]>. A warp per source row: its lanes walk
 * the row (coalesced) and the dot product meets in a fixed shuffle tree. */
__global__ void scatter_backward_kernel(const float *dout, const float *src, const float *w, const int32_t *idx,
                                        int64_t n, int64_t d, float *gs, int keep_gs, float *gw, int keep_gw)
{
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * blockDim.x / 32;
    for (int64_t i = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; i < n; i += warps) {
        const float *drow = dout + (int64_t)idx[i] * d, *srow = src + i * d;
        float scale = w ? w[i] : 1.0f, dot = 0.0f;
        for (int64_t k = lane; k < d; k += 32) {
            if (gs) gs[i * d + k] = __fadd_rn(keep_gs ? gs[i * d + k] : 0.0f, __fmul_rn(scale, drow[k]));
            dot += drow[k] * srow[k];
        }
        if (!gw) continue;
        for (int off = 16; off > 0; off /= 2) dot += __shfl_down_sync(0xffffffffu, dot, off);
        if (lane == 0) gw[i] = keep_gw ? gw[i] + dot : dot;
    }
}

/* saved: the routing_index (idx alone). */
static void scatter_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *src = n->in[0], *w = n->in[1];
    float *gs = g->g[0], *gw = g->g[1];
    int fresh_s = g->assign[0], fresh_w = g->assign[1];
    int64_t rows = ast_rows(src), d = ast_cols(src);
    if (!rows) return;
    scatter_backward_kernel<<<ast_cuda_blocks(rows * 32), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        n->out->grad, src->data, w ? w->data : NULL, ((const routing_index *)n->saved)->idx, rows, d, gs, !fresh_s, gw,
        !fresh_w);
    AST_CUDA_LAUNCHED();
}

/* saved on entry: the host's idx; replaced by the routing_index. */
static void scatter_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *src = n->in[0], *w = n->in[1];
    int64_t count = ast_rows(src), rows = ast_rows(n->out);
    check_count(count, "scatter_add_rows");
    routing_index *ri = (routing_index *)ast_alloc(c, sizeof *ri);
    *ri = upload_index(c, (const int32_t *)n->saved, count, rows, 1);
    n->saved = ri;
    csr_sums(src->data, w ? w->data : NULL, ri, rows, ast_cols(src), n->out->data, 0); /* every element is written */
}

extern "C" void ast_cuda_routing_kernels(ast_op_kernel *t)
{
    t[AST_OP_gather_rows] = ast_op_kernel{gather_forward, gather_backward, 1, 0};
    t[AST_OP_scatter_add_rows] = ast_op_kernel{scatter_forward, scatter_backward, 3, 0};
}
