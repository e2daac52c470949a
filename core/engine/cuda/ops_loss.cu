/* The CUDA kernels of geometry and losses (ops/dispatch_loss.c), as
 * ops/ops_loss.c. The loss and its
 * count stay on the device (the backward reads them there); every sum runs
 * in a fixed order, so the loss repeats bit for bit. */
#include "engine/cuda/row_reduce.cuh"

/* ---- pdist ----------------------------------------------------------------- */

/* A thread per distance D[b, i, j], from the differences (not |a|^2 + |b|^2
 * - 2ab, which cancels for close points); D[b, i, i] = 0. (a - b)^2 and
 * (b - a)^2 have the same bits, so D is exactly symmetric. */
__global__ void pdist_kernel(const float *p, float *y, int64_t nb, int64_t np, int64_t d)
{
    int64_t n = nb * np * np;
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t b = t / (np * np), i = t / np % np, j = t % np;
        const float *pi = p + (b * np + i) * d, *pj = p + (b * np + j) * d;
        float s = 0.0f;
        for (int64_t k = 0; k < d; k++) s += (pi[k] - pj[k]) * (pi[k] - pj[k]);
        y[t] = i == j ? 0.0f : sqrtf(s);
    }
}

/* Coordinates summed at once per pass of the backward (registers). */
#define PDIST_DIMS 4

/* A warp per point (b, i): dL/dp_i = sum_j (dy_ij + dy_ji) (p_i - p_j) / D_ij,
 * 0 where D_ij = 0. Lanes take every 32nd j; their sums meet in the warp's
 * fixed tree. PDIST_DIMS coordinates per pass, so any dimension works and
 * the usual 2 or 3 take one. */
__global__ void pdist_backward_kernel(const float *p, const float *y, const float *dy, float *gp, int64_t nb,
                                      int64_t np, int64_t d)
{
    int lane = threadIdx.x % 32;
    for (int64_t pt = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; pt < nb * np;
         pt += (int64_t)gridDim.x * (blockDim.x / 32)) {
        int64_t b = pt / np, i = pt % np;
        const float *pb = p + b * np * d, *yb = y + b * np * np, *gb = dy + b * np * np;
        for (int64_t k0 = 0; k0 < d; k0 += PDIST_DIMS) {
            float acc[PDIST_DIMS] = {0.0f};
            for (int64_t j = lane; j < np; j += 32) {
                float dist = yb[i * np + j], g = gb[i * np + j] + gb[j * np + i];
                if (dist == 0.0f) continue;
#pragma unroll
                for (int k = 0; k < PDIST_DIMS; k++)
                    if (k0 + k < d) acc[k] += g * ((pb[i * d + k0 + k] - pb[j * d + k0 + k]) / dist); /* |u| <= 1 */
            }
#pragma unroll
            for (int k = 0; k < PDIST_DIMS; k++) {
                float s = group_sum<32>(acc[k]);
                if (lane == 0 && k0 + k < d) gp[pt * d + k0 + k] += s;
            }
        }
    }
}

static void pdist_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *p = n->in[0];
    float *gp = g->g[0];
    int64_t points = p->shape[0] * p->shape[1];
    if (!gp || !points || !p->shape[2]) return;
    pdist_backward_kernel<<<row_blocks(points, 32), AST_ROW_BLOCK, 0, AST_CUDA_STREAM>>>(
        p->data, n->out->data, n->out->grad, gp, p->shape[0], p->shape[1], p->shape[2]);
    AST_CUDA_LAUNCHED();
}

static void pdist_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *p = n->in[0], *y = n->out;
    if (!y->size) return;
    pdist_kernel<<<ast_cuda_blocks(y->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(p->data, y->data, p->shape[0],
                                                                                  p->shape[1], p->shape[2]);
    AST_CUDA_LAUNCHED();
}

/* ---- mse ------------------------------------------------------------------- */

/* Each row's squared error in double: sums[1 + r]. */
template <int G> __global__ void mse_rows_kernel(const float *a, const float *b, int64_t rows, int64_t d, double *sums)
{
    for (int64_t r = group_first_row<G>(); r < rows; r += group_row_stride<G>()) {
        double s = 0.0;
        for (int64_t k = group_lane<G>(); k < d; k += G) {
            float e = a[r * d + k] - b[r * d + k];
            s += (double)e * e;
        }
        s = group_sum<G>(s);
        if (group_lane<G>() == 0) sums[1 + r] = s;
    }
}

/* One block: num = sum_r m_r S_r and cnt = sum_r m_r * d, each thread's
 * rows in order, then the block's tree; y = num / max(1, cnt) and
 * sums[0] = cnt, which the backward reads. */
__global__ void mse_total_kernel(double *sums, const float *mask, int64_t rows, int64_t d, float *y)
{
    double num = 0.0, cnt = 0.0;
    for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
        double m = mask ? mask[r] : 1.0;
        num += m * sums[1 + r];
        cnt += m * (double)d;
    }
    num = group_sum<AST_ROW_BLOCK>(num);
    cnt = group_sum<AST_ROW_BLOCK>(cnt);
    if (threadIdx.x) return;
    y[0] = (float)(num / fmax(1.0, cnt));
    sums[0] = cnt;
}

/* L = num / max(1, cnt): dL/da = 2 m_r (a - b) / den = -dL/db, and, where
 * cnt > 1 so the denominator moves with the mask, dL/dm_r = (S_r - L d) / den.
 * cnt is rounded to float first, as the CPU keeps it in farg. */
__global__ void mse_backward_kernel(const float *a, const float *b, const float *mask, const double *sums,
                                    const float *y, const float *dy, int64_t rows, int64_t d, float *ga, float *gb,
                                    float *gm)
{
    float cnt = (float)sums[0], g = dy[0] / fmaxf(1.0f, cnt);
    int64_t step = (int64_t)gridDim.x * blockDim.x, first = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (ga || gb)
        for (int64_t i = first; i < rows * d; i += step) {
            float e = 2.0f * g * (mask ? mask[i / d] : 1.0f) * (a[i] - b[i]);
            if (ga) ga[i] += e;
            if (gb) gb[i] -= e;
        }
    if (gm)
        for (int64_t r = first; r < rows; r += step)
            gm[r] += g * (float)(sums[1 + r] - (cnt > 1.0f ? y[0] * (double)d : 0.0));
}

/* saved: sums (device doubles): cnt, then each row's squared error. */
static void mse_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *a = n->in[0], *b = n->in[1], *m = n->in[2];
    float *ga = g->g[0], *gb = g->g[1], *gm = g->g[2];
    int64_t rows = ast_rows(a), d = ast_cols(a);
    if (!ga && !gb && !gm) return;
    mse_backward_kernel<<<ast_cuda_blocks(rows * d > rows ? rows * d : rows), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        a->data, b->data, m ? m->data : NULL, (const double *)n->saved, n->out->data, n->out->grad, rows, d, ga, gb, gm);
    AST_CUDA_LAUNCHED();
}

static void mse_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *a = n->in[0], *mask = n->in[2];
    int64_t rows = ast_rows(a), d = ast_cols(a);
    double *sums = (double *)ast_data_alloc_uninit(c, (size_t)(1 + rows) * sizeof *sums);
    if (rows) AST_ROW_LAUNCH(mse_rows_kernel, rows, d, a->data, n->in[1]->data, rows, d, sums);
    mse_total_kernel<<<1, AST_ROW_BLOCK, 0, AST_CUDA_STREAM>>>(sums, mask ? mask->data : NULL, rows, d, n->out->data);
    AST_CUDA_LAUNCHED();
    n->saved = sums;
}

extern "C" void ast_cuda_loss_kernels(ast_op_kernel *t)
{
    t[AST_OP_pdist] = ast_op_kernel{pdist_forward, pdist_backward, 0, 0};
    t[AST_OP_mse] = ast_op_kernel{mse_forward, mse_backward, 0, 0};
}
