/* The CUDA kernels of linear and batched matmul (ops/dispatch_linalg.c):
 * forward and backward through cuBLAS (cuda_gemm.h), in the context's
 * precision for every GEMM, as ops/ops_linalg.c does on the CPU; bias
 * gradients are column sums in a fixed order (no atomics). */
#include "engine/cuda/cuda_gemm.h"
#include "engine/ops/ops_plan.h"

/* ---- the GEMM wrapper ---------------------------------------------------- */

/* k = 0: op(A) op(B) is an empty sum, C = beta C. cuBLAS would reject the
 * leading dimensions k = 0 gives; beta = 0 writes zeros, as BLAS does,
 * rather than 0 * C (NaN where the unzeroed C holds NaN). */
__global__ void empty_sum_kernel(float *cmat, int64_t m, int64_t n, int64_t ldc, int64_t stride_c, int64_t total,
                                 float beta)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t i = e / (m * n), r = e / n % m, j = e % n;
        float *c = cmat + i * stride_c + r * ldc + j;
        *c = beta == 0.0f ? 0.0f : beta * *c;
    }
}

extern "C" void ast_cuda_gemm_batched(ast_precision p, int trans_a, int trans_b, int m, int n, int k, const float *a,
                                      int lda, int64_t stride_a, const float *b, int ldb, int64_t stride_b, float beta,
                                      float *cmat, int ldc, int64_t stride_c, int64_t batch)
{
    if (m <= 0 || n <= 0 || batch <= 0) return;
    if (k <= 0) {
        if (beta == 1.0f) return;
        int64_t total = batch * m * n;
        empty_sum_kernel<<<ast_cuda_blocks(total), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(cmat, m, n, ldc, stride_c,
                                                                                           total, beta);
        AST_CUDA_LAUNCHED();
        return;
    }
    AST_ASSERT(batch <= 0x7fffffff, "GEMM of %lld batches (cuBLAS takes at most 2^31 - 1)", (long long)batch);
    const float one = 1.0f;
    cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    /* Column-major C^T [n, m] = op(B)^T [n, k] op(A)^T [k, m]: B comes first. */
    if (p != AST_PRECISION_FP32)
        AST_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            ast_cuda_blas(), op_b, op_a, n, m, k, &one, b, CUDA_R_32F, ldb, stride_b, a, CUDA_R_32F, lda, stride_a,
            &beta, cmat, CUDA_R_32F, ldc, stride_c, (int)batch,
            p == AST_PRECISION_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF : CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
    else
        AST_CUBLAS_CHECK(cublasSgemmStridedBatched(ast_cuda_blas(), op_b, op_a, n, m, k, &one, b, ldb, stride_b, a,
                                                   lda, stride_a, &beta, cmat, ldc, stride_c, (int)batch));
}

__global__ void bias_rows_kernel(float *cmat, const float *bias, int64_t m, int64_t n, int64_t ldc)
{
    for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < m * n; e += (int64_t)gridDim.x * blockDim.x)
        cmat[e / n * ldc + e % n] = bias[e % n];
}

extern "C" void ast_cuda_gemm(ast_precision p, int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                              const float *b, int ldb, float beta, float *cmat, int ldc, const float *bias)
{
    if (m <= 0 || n <= 0) return;
    if (bias) {
        /* bias + A B, as the CPU's GEMM with C preset to the bias */
        int64_t total = (int64_t)m * n;
        bias_rows_kernel<<<ast_cuda_blocks(total), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(cmat, bias, m, n, ldc);
        AST_CUDA_LAUNCHED();
        beta = 1.0f;
    }
    ast_cuda_gemm_batched(p, trans_a, trans_b, m, n, k, a, lda, 0, b, ldb, 0, beta, cmat, ldc, 0, 1);
}

/* ---- column sums (bias gradients) ---------------------------------------- */

/* Pass 1: block (x, y) sums columns [32 x, 32 x + 32) over the y-th chunk of
 * rows; its COLSUM_LANES lanes per column take every COLSUM_LANES-th row of
 * the chunk and meet in a fixed tree (a warp reads 32 neighbouring columns
 * of one row: coalesced). Pass 2 adds the chunks' sums in chunk order. The
 * chunks depend on the shape alone, so the sums repeat bit for bit. */
#define COLSUM_LANES 8
/* Rows per chunk at least (fewer: the second pass costs more than it spreads)
 * and the blocks aimed at (an H200's 132 SMs, several times over). */
#define COLSUM_MIN_ROWS 64
#define COLSUM_BLOCKS 512

__global__ void column_chunk_sums_kernel(const float *src, int64_t rows, int64_t cols, int64_t chunk_rows,
                                         float *partial, float *dst)
{
    __shared__ float part[COLSUM_LANES][33]; /* 33: no bank conflicts */
    int64_t j = blockIdx.x * (int64_t)32 + threadIdx.x, r0 = blockIdx.y * chunk_rows;
    int64_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    float s = 0.0f;
    if (j < cols)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += COLSUM_LANES) s += src[r * cols + j];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    for (int w = COLSUM_LANES / 2; w > 0; w /= 2) {
        if ((int)threadIdx.y < w) part[threadIdx.y][threadIdx.x] += part[threadIdx.y + w][threadIdx.x];
        __syncthreads();
    }
    if (threadIdx.y || j >= cols) return;
    if (partial) partial[blockIdx.y * cols + j] = part[0][threadIdx.x];
    else dst[j] += part[0][threadIdx.x];
}

__global__ void add_chunk_sums_kernel(const float *partial, int64_t chunks, int64_t cols, float *dst)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < cols; j += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int64_t ch = 0; ch < chunks; ch++) s += partial[ch * cols + j];
        dst[j] += s;
    }
}

extern "C" void ast_cuda_column_sums(ast_ctx *c, const float *src, int64_t rows, int64_t cols, float *dst)
{
    if (rows <= 0 || cols <= 0) return;
    int64_t col_blocks = (cols + 31) / 32, chunks = COLSUM_BLOCKS / col_blocks;
    int64_t most = (rows + COLSUM_MIN_ROWS - 1) / COLSUM_MIN_ROWS;
    chunks = chunks < 1 ? 1 : chunks > most ? most : chunks;
    int64_t chunk_rows = (rows + chunks - 1) / chunks;
    chunks = (rows + chunk_rows - 1) / chunk_rows;
    float *partial = chunks > 1 ? (float *)ast_data_alloc_uninit(c, (size_t)(chunks * cols) * sizeof(float)) : NULL;
    dim3 grid((unsigned)col_blocks, (unsigned)chunks);
    column_chunk_sums_kernel<<<grid, dim3(32, COLSUM_LANES), 0, AST_CUDA_STREAM>>>(src, rows, cols, chunk_rows, partial,
                                                                                   dst);
    AST_CUDA_LAUNCHED();
    if (!partial) return;
    add_chunk_sums_kernel<<<ast_cuda_blocks(cols), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(partial, chunks, cols, dst);
    AST_CUDA_LAUNCHED();
}

/* ---- linear ---------------------------------------------------------------- */

/* y[R, out] = x[R, in] W[out, in]^T + b */
static void linear_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *x = n->in[0], *y = n->out;
    int rows = (int)ast_rows(x), in = (int)ast_cols(x), out = (int)ast_cols(y);
    float *gx = g->g[0], *gw = g->g[1], *gb = g->g[2];
    ast_precision p = ast_ctx_precision(c);
    if (gx) ast_cuda_gemm(p, 0, 0, rows, in, out, y->grad, out, n->in[1]->data, in, g->assign[0] ? 0.0f : 1.0f, gx, in, NULL);
    if (gw) ast_cuda_gemm(p, 1, 0, out, in, rows, y->grad, out, x->data, in, 1.0f, gw, in, NULL);
    if (gb) ast_cuda_column_sums(c, y->grad, rows, out, gb);
}

static void linear_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int in = (int)ast_cols(x), out = (int)w->shape[0];
    ast_cuda_gemm(ast_ctx_precision(c), 0, 1, (int)ast_rows(x), out, in, x->data, in, w->data, in, 0.0f,
                  n->out->data, out, b ? b->data : NULL);
}

/* ---- bmm ------------------------------------------------------------------- */

/* dA = dC op(B)^T (laid out as A is), dB = op(A)^T dC (laid out as B is),
 * each one strided-batched GEMM over every batch. */
static void mm_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    const ast_mm_shape *s = (const ast_mm_shape *)n->saved;
    ast_tensor *a = n->in[0], *b = n->in[1];
    float *ga = g->g[0], *gb = g->g[1], *gc = n->out->grad;
    /* b == a: assign[1] is 0, and dB adds onto dA, written first */
    float beta_a = g->assign[0] ? 0.0f : 1.0f, beta_b = g->assign[1] ? 0.0f : 1.0f;
    int m = (int)s->m, nn = (int)s->n, k = (int)s->k, ldb = s->tb ? k : nn, lda = s->ta ? m : k;
    int64_t sa = s->m * s->k, sb = s->k * s->n, sc = s->m * s->n;
    ast_precision p = ast_ctx_precision(c);
    if (ga && !s->ta) /* dA[M,K] = dC[M,N] op(B)^T */
        ast_cuda_gemm_batched(p, 0, !s->tb, m, k, nn, gc, nn, sc, b->data, ldb, sb, beta_a, ga, k, sa, s->batch);
    else if (ga) /* A stored [K,M]: dA = op(B) dC^T */
        ast_cuda_gemm_batched(p, s->tb, 1, k, m, nn, b->data, ldb, sb, gc, nn, sc, beta_a, ga, m, sa, s->batch);
    if (gb && !s->tb) /* dB[K,N] = op(A)^T dC */
        ast_cuda_gemm_batched(p, !s->ta, 0, k, nn, m, a->data, lda, sa, gc, nn, sc, beta_b, gb, nn, sb, s->batch);
    else if (gb) /* B stored [N,K]: dB = dC^T op(A) */
        ast_cuda_gemm_batched(p, 1, s->ta, nn, k, m, gc, nn, sc, a->data, lda, sa, beta_b, gb, k, sb, s->batch);
}

static void mm_forward(ast_ctx *c, ast_node *n)
{
    const ast_mm_shape *s = (const ast_mm_shape *)n->saved;
    ast_cuda_gemm_batched(ast_ctx_precision(c), s->ta, s->tb, (int)s->m, (int)s->n, (int)s->k, n->in[0]->data,
                          (int)(s->ta ? s->m : s->k), s->m * s->k, n->in[1]->data, (int)(s->tb ? s->k : s->n),
                          s->k * s->n, 0.0f, n->out->data, (int)s->n, s->m * s->n, s->batch);
}

extern "C" void ast_cuda_linalg_kernels(ast_op_kernel *t)
{
    t[AST_OP_linear] = ast_op_kernel{linear_forward, linear_backward, 1, 0};
    t[AST_OP_bmm] = ast_op_kernel{mm_forward, mm_backward, 3, 0};
}
