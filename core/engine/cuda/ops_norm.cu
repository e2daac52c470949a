/* The CUDA kernels of the normalisations (ops/dispatch_norm.c): softmax
 * over any axis, layernorm, rmsnorm and the Euclidean norm of the last
 * axis, as ops/ops_norm.c (statistics in double,
 * the per-row mean and 1/std saved for the backward). Rows get a group of
 * threads each (row_reduce.cuh); weight and bias gradients, sums over rows,
 * are added in two fixed-order passes, never with atomics. */
#include "engine/cuda/row_reduce.cuh"

/* Per-row statistics the backward reads: device memory of the step, kept
 * only when the op goes on the tape (sampling and evaluation skip them). */
static float *row_stats(ast_ctx *c, ast_tensor *const *in, int n_in, int64_t count)
{
    return ast_needs_grad(c, in, n_in) ? (float *)ast_data_alloc_uninit(c, (size_t)count * sizeof(float)) : NULL;
}

/* ---- softmax ------------------------------------------------------------- */

/* The last axis: a group per row. The max keeps exp from overflowing; exp
 * is recomputed in the last pass rather than stored, the row being cached. */
template <int G> __global__ void softmax_rows_kernel(const float *x, float *y, int64_t rows, int64_t len)
{
    for (int64_t r = group_first_row<G>(); r < rows; r += group_row_stride<G>()) {
        const float *xr = x + r * len;
        float m = -INFINITY, s = 0.0f;
        for (int64_t k = group_lane<G>(); k < len; k += G) m = fmaxf(m, xr[k]);
        m = group_max<G>(m);
        for (int64_t k = group_lane<G>(); k < len; k += G) s += expf(xr[k] - m);
        s = group_sum<G>(s);
        for (int64_t k = group_lane<G>(); k < len; k += G) y[r * len + k] = expf(xr[k] - m) / s;
    }
}

/* Another axis: a block per tile of columns of the [outer, len, inner]
 * view, lanes down each column (row_reduce.cuh's column_combine). The
 * keys of B=4 sets of 512 cells, softmaxed over the cells, are only 1,024
 * columns: with a thread per column their softmax took 90 us of a 4.5 ms
 * forward pass. */
__global__ void softmax_columns_kernel(const float *x, float *y, int64_t outer, int64_t len, int64_t inner)
{
    __shared__ float sh[AST_COL_LANES][AST_COL_TILE];
    for (int64_t b = blockIdx.x; b < outer * column_tiles(inner); b += gridDim.x) {
        int on;
        int64_t base = column_base(b, len, inner, &on);
        float m = -INFINITY, s = 0.0f;
        for (int64_t k = threadIdx.y; on && k < len; k += AST_COL_LANES) m = fmaxf(m, x[base + k * inner]);
        m = column_combine(m, sh, ast_max_op());
        for (int64_t k = threadIdx.y; on && k < len; k += AST_COL_LANES) s += expf(x[base + k * inner] - m);
        s = column_combine(s, sh, ast_add_op());
        for (int64_t k = threadIdx.y; on && k < len; k += AST_COL_LANES)
            y[base + k * inner] = expf(x[base + k * inner] - m) / s;
    }
}

/* dx = y * (dy - sum(dy * y)) along the axis; assign when dx is fresh. */
template <int G>
__global__ void softmax_rows_backward_kernel(const float *y, const float *dy, float *dx, int64_t rows, int64_t len,
                                             int assign)
{
    for (int64_t r = group_first_row<G>(); r < rows; r += group_row_stride<G>()) {
        int64_t at = r * len;
        float dot = 0.0f;
        for (int64_t k = group_lane<G>(); k < len; k += G) dot += dy[at + k] * y[at + k];
        dot = group_sum<G>(dot);
        for (int64_t k = group_lane<G>(); k < len; k += G) {
            float v = y[at + k] * (dy[at + k] - dot);
            dx[at + k] = assign ? v : dx[at + k] + v;
        }
    }
}

__global__ void softmax_columns_backward_kernel(const float *y, const float *dy, float *dx, int64_t outer, int64_t len,
                                                int64_t inner, int assign)
{
    __shared__ float sh[AST_COL_LANES][AST_COL_TILE];
    for (int64_t b = blockIdx.x; b < outer * column_tiles(inner); b += gridDim.x) {
        int on;
        int64_t base = column_base(b, len, inner, &on);
        float dot = 0.0f;
        for (int64_t k = threadIdx.y; on && k < len; k += AST_COL_LANES) dot += dy[base + k * inner] * y[base + k * inner];
        dot = column_combine(dot, sh, ast_add_op());
        for (int64_t k = threadIdx.y; on && k < len; k += AST_COL_LANES) {
            int64_t i = base + k * inner;
            float v = y[i] * (dy[i] - dot);
            dx[i] = assign ? v : dx[i] + v;
        }
    }
}

/* iarg: outer, len, inner. */
static void softmax_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    int assign = g->assign[0];
    float *dx = g->g[0];
    int64_t outer = n->iarg[0], len = n->iarg[1], inner = n->iarg[2];
    if (!dx || outer * inner == 0) return;
    const float *y = n->out->data, *dy = n->out->grad;
    if (inner == 1) {
        AST_ROW_LAUNCH(softmax_rows_backward_kernel, outer, len, y, dy, dx, outer, len, assign);
    } else {
        AST_COLUMN_LAUNCH(softmax_columns_backward_kernel, outer, inner, y, dy, dx, outer, len, inner, assign);
    }
}

static void softmax_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0];
    int64_t outer = n->iarg[0], len = n->iarg[1], inner = n->iarg[2];
    if (x->size && inner == 1) {
        AST_ROW_LAUNCH(softmax_rows_kernel, outer, len, x->data, n->out->data, outer, len);
    } else if (x->size) {
        AST_COLUMN_LAUNCH(softmax_columns_kernel, outer, inner, x->data, n->out->data, outer, len, inner);
    }
}

/* ---- weight and bias gradients: column sums over rows ----------------------- */

/* Rows per chunk of the first pass: a function of the row count only, so
 * the order of the additions, and their bits, are too. At most
 * COLSUM_MAX_CHUNKS chunks keep the second pass short. */
#define COLSUM_MAX_CHUNKS 128
#define COLSUM_TILE 32 /* columns per block: a warp's coalesced load */
#define COLSUM_LANES 8 /* rows read at once per block */

static int64_t colsum_chunk_rows(int64_t rows)
{
    int64_t per = (rows + COLSUM_MAX_CHUNKS - 1) / COLSUM_MAX_CHUNKS;
    return per < COLSUM_TILE ? COLSUM_TILE : per;
}

/* With xh = (x - mean) * rstd (layernorm) or x * rstd (rmsnorm: mean NULL),
 * each block sums dy * xh (into pw) and dy (into pb, when non-NULL) over
 * one chunk of rows for COLSUM_TILE columns: thread (tx, ty) walks rows
 * ty, ty + COLSUM_LANES, ..., and the COLSUM_LANES partial sums are added
 * in ty order. Block (tile, chunk) writes pw[chunk * d + column]. */
__global__ void norm_param_partials_kernel(const float *x, const float *dy, const float *mean, const float *rstd,
                                           int64_t rows, int64_t d, int64_t chunk_rows, float *pw, float *pb)
{
    __shared__ float sw[COLSUM_LANES][COLSUM_TILE + 1], sb[COLSUM_LANES][COLSUM_TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int64_t col = (int64_t)blockIdx.x * COLSUM_TILE + tx, r0 = (int64_t)blockIdx.y * chunk_rows;
    int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    float w = 0.0f, b = 0.0f;
    if (col < d)
        for (int64_t r = r0 + ty; r < r1; r += COLSUM_LANES) {
            float g = dy[r * d + col], xv = x[r * d + col];
            w += g * (mean ? (xv - mean[r]) * rstd[r] : xv * rstd[r]);
            b += g;
        }
    sw[ty][tx] = w, sb[ty][tx] = b;
    __syncthreads();
    if (ty || col >= d) return;
    for (int k = 1; k < COLSUM_LANES; k++) w += sw[k][tx], b += sb[k][tx];
    pw[blockIdx.y * d + col] = w;
    if (pb) pb[blockIdx.y * d + col] = b;
}

/* dw[col] (db[col]) += the chunks' partials of that column in pw (pb), in
 * chunk order; dw or db may be NULL. */
__global__ void colsum_finish_kernel(const float *pw, const float *pb, int64_t chunks, int64_t d, float *dw, float *db)
{
    for (int64_t col = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; col < d; col += (int64_t)gridDim.x * blockDim.x) {
        float sw = 0.0f, sb = 0.0f;
        for (int64_t k = 0; k < chunks; k++) {
            if (dw) sw += pw[k * d + col];
            if (db) sb += pb[k * d + col];
        }
        if (dw) dw[col] += sw;
        if (db) db[col] += sb;
    }
}

/* dw += sum over rows of dy * xh, db += sum of dy (either may be NULL). */
static void norm_param_grads(ast_ctx *c, const float *x, const float *dy, const float *mean, const float *rstd,
                             int64_t rows, int64_t d, float *dw, float *db)
{
    if ((!dw && !db) || !rows || !d) return;
    int64_t chunk_rows = colsum_chunk_rows(rows), chunks = (rows + chunk_rows - 1) / chunk_rows;
    float *pw = (float *)ast_data_alloc_uninit(c, (db ? 2 : 1) * (size_t)(chunks * d) * sizeof(float));
    float *pb = db ? pw + chunks * d : NULL;
    dim3 grid((unsigned)((d + COLSUM_TILE - 1) / COLSUM_TILE), (unsigned)chunks), block(COLSUM_TILE, COLSUM_LANES);
    norm_param_partials_kernel<<<grid, block, 0, AST_CUDA_STREAM>>>(x, dy, mean, rstd, rows, d, chunk_rows, pw, pb);
    AST_CUDA_LAUNCHED();
    colsum_finish_kernel<<<ast_cuda_blocks(d), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(pw, pb, chunks, d, dw, db);
    AST_CUDA_LAUNCHED();
}

/* ---- layernorm -------------------------------------------------------------- */

/* Biased variance, eps inside the square root (torch.nn.LayerNorm), in
 * double as the CPU's; mean and rstd saved when non-NULL. */
template <int G>
__global__ void layernorm_kernel(const float *x, float *y, const float *w, const float *b, int64_t rows, int64_t d,
                                 float eps, float *mean, float *rstd)
{
    for (int64_t r = group_first_row<G>(); r < rows; r += group_row_stride<G>()) {
        const float *xr = x + r * d;
        double s = 0.0, q = 0.0;
        for (int64_t k = group_lane<G>(); k < d; k += G) s += xr[k];
        double mu = group_sum<G>(s) / (double)d;
        for (int64_t k = group_lane<G>(); k < d; k += G) q += (xr[k] - mu) * (xr[k] - mu);
        double rs = 1.0 / sqrt(group_sum<G>(q) / (double)d + eps);
        for (int64_t k = group_lane<G>(); k < d; k += G)
            y[r * d + k] = (float)((xr[k] - mu) * rs) * (w ? w[k] : 1.0f) + (b ? b[k] : 0.0f);
        if (mean && group_lane<G>() == 0) mean[r] = (float)mu, rstd[r] = (float)rs;
    }
}

/* With g = dy * w and xh = (x - mean) * rstd:
 * dx = rstd * (g - mean(g) - xh * mean(g * xh)). */
template <int G>
__global__ void layernorm_dx_kernel(const float *x, const float *dy, const float *w, const float *mean,
                                    const float *rstd, float *dx, int64_t rows, int64_t d, int assign)
{
    for (int64_t r = group_first_row<G>(); r < rows; r += group_row_stride<G>()) {
        int64_t at = r * d;
        float mu = mean[r], rs = rstd[r];
        double mg = 0.0, mgx = 0.0;
        for (int64_t k = group_lane<G>(); k < d; k += G) {
            float g = dy[at + k] * (w ? w[k] : 1.0f), xh = (x[at + k] - mu) * rs;
            mg += g;
            mgx += g * xh;
        }
        mg = group_sum<G>(mg) / (double)d;
        mgx = group_sum<G>(mgx) / (double)d;
        for (int64_t k = group_lane<G>(); k < d; k += G) {
            float g = dy[at + k] * (w ? w[k] : 1.0f), xh = (x[at + k] - mu) * rs;
            float v = rs * (float)(g - mg - xh * mgx);
            dx[at + k] = assign ? v : dx[at + k] + v;
        }
    }
}

/* saved: mean[rows] then rstd[rows] (device). */
static void layernorm_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *x = n->in[0], *w = n->in[1];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    const float *mean = (const float *)n->saved, *rstd = mean + rows, *dy = n->out->grad;
    int assign = g->assign[0];
    float *dx = g->g[0];
    if (dx && rows) AST_ROW_LAUNCH(layernorm_dx_kernel, rows, d, x->data, dy, w ? w->data : NULL, mean, rstd, dx, rows, d, assign);
    norm_param_grads(c, x->data, dy, mean, rstd, rows, d, g->g[1], g->g[2]);
}

/* farg[0] = eps. */
static void layernorm_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    float *mean = row_stats(c, n->in, 3, 2 * rows);
    if (rows)
        AST_ROW_LAUNCH(layernorm_kernel, rows, d, x->data, n->out->data, w ? w->data : NULL, b ? b->data : NULL, rows,
                       d, n->farg[0], mean, mean ? mean + rows : NULL);
    n->saved = mean;
}

/* ---- rmsnorm ---------------------------------------------------------------- */

/* y = x * rstd * w, rstd = rsqrt(mean(x^2) + eps) from a double sum. */
template <int G>
__global__ void rmsnorm_kernel(const float *x, float *y, const float *w, int64_t rows, int64_t d, float eps, float *rstd)
{
    for (int64_t r = group_first_row<G>(); r < rows; r += group_row_stride<G>()) {
        const float *xr = x + r * d;
        double ss = 0.0;
        for (int64_t k = group_lane<G>(); k < d; k += G) ss += (double)xr[k] * xr[k];
        float rs = (float)(1.0 / sqrt(group_sum<G>(ss) / (double)d + eps));
        for (int64_t k = group_lane<G>(); k < d; k += G) y[r * d + k] = xr[k] * rs * (w ? w[k] : 1.0f);
        if (rstd && group_lane<G>() == 0) rstd[r] = rs;
    }
}

/* g = dy * w: dx = rstd * g - x * rstd^3 * mean(g * x). */
template <int G>
__global__ void rmsnorm_dx_kernel(const float *x, const float *dy, const float *w, const float *rstd, float *dx,
                                  int64_t rows, int64_t d, int assign)
{
    for (int64_t r = group_first_row<G>(); r < rows; r += group_row_stride<G>()) {
        int64_t at = r * d;
        float rs = rstd[r];
        double mgx = 0.0;
        for (int64_t k = group_lane<G>(); k < d; k += G) mgx += dy[at + k] * (w ? w[k] : 1.0f) * x[at + k];
        float coef = (float)(group_sum<G>(mgx) / (double)d) * rs * rs * rs;
        for (int64_t k = group_lane<G>(); k < d; k += G) {
            float v = rs * dy[at + k] * (w ? w[k] : 1.0f) - x[at + k] * coef;
            dx[at + k] = assign ? v : dx[at + k] + v;
        }
    }
}

/* saved: rstd[rows] (device). */
static void rmsnorm_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *x = n->in[0], *w = n->in[1];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    const float *rstd = (const float *)n->saved, *dy = n->out->grad;
    int assign = g->assign[0];
    float *dx = g->g[0];
    if (dx && rows) AST_ROW_LAUNCH(rmsnorm_dx_kernel, rows, d, x->data, dy, w ? w->data : NULL, rstd, dx, rows, d, assign);
    norm_param_grads(c, x->data, dy, NULL, rstd, rows, d, g->g[1], NULL);
}

/* farg[0] = eps. */
static void rmsnorm_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[1];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    float *rstd = row_stats(c, n->in, 2, rows);
    if (rows)
        AST_ROW_LAUNCH(rmsnorm_kernel, rows, d, x->data, n->out->data, w ? w->data : NULL, rows, d, n->farg[0], rstd);
    n->saved = rstd;
}

/* ---- vecnorm ---------------------------------------------------------------- */

template <int G> __global__ void vecnorm_kernel(const float *x, float *y, int64_t rows, int64_t d)
{
    for (int64_t r = group_first_row<G>(); r < rows; r += group_row_stride<G>()) {
        double ss = 0.0;
        for (int64_t k = group_lane<G>(); k < d; k += G) ss += (double)x[r * d + k] * x[r * d + k];
        ss = group_sum<G>(ss);
        if (group_lane<G>() == 0) y[r] = (float)sqrt(ss);
    }
}

/* d|x|/dx = x / |x|, taken as 0 at |x| = 0 (torch's subgradient); x / |x|
 * is at most 1, so a tiny norm cannot overflow. */
__global__ void vecnorm_backward_kernel(const float *x, const float *y, const float *dy, float *gx, int64_t n, int64_t d)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float norm = y[i / d];
        if (norm != 0.0f) gx[i] += dy[i / d] * (x[i] / norm);
    }
}

static void vecnorm_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *x = n->in[0];
    float *gx = g->g[0];
    if (!gx || !x->size) return;
    vecnorm_backward_kernel<<<ast_cuda_blocks(x->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        x->data, n->out->data, n->out->grad, gx, x->size, ast_cols(x));
    AST_CUDA_LAUNCHED();
}

static void vecnorm_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    if (rows) AST_ROW_LAUNCH(vecnorm_kernel, rows, d, x->data, n->out->data, rows, d);
}

extern "C" void ast_cuda_norm_kernels(ast_op_kernel *t)
{
    t[AST_OP_softmax] = ast_op_kernel{softmax_forward, softmax_backward, 1, 0};
    t[AST_OP_layernorm] = ast_op_kernel{layernorm_forward, layernorm_backward, 1, 0};
    t[AST_OP_rmsnorm] = ast_op_kernel{rmsnorm_forward, rmsnorm_backward, 1, 0};
    t[AST_OP_vecnorm] = ast_op_kernel{vecnorm_forward, vecnorm_backward, 0, 0};
}
