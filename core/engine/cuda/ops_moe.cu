/* Routing in device memory (ops/dispatch_moe.c) on the GPU, as
 * ops/ops_moe.c: no kernel here reads anything back to the host and no
 * launch depends on routed data (grids are sized for the worst case and
 * blocks with nothing to do return), so a step that routes this way can be
 * captured as a CUDA graph. The decisions (top-k, ranks, capacity, the
 * sort) are integer work and equal the CPU's; the sums (gather's and
 * combine's backward and forward) add in the CPU's order with rounded
 * products; the grouped GEMM and the dot products of combine's weight
 * gradient sum in another order (within a test's cf_sum_tol). */
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <string.h>

#include "engine/cuda/cuda_internal.h"
#include "engine/ops/ops_plan.h"

#define SCAN_THREADS 256

__device__ static inline int64_t as_int(float v) { return (int64_t)v; }

/* ---- noise_normal ---------------------------------------------------------------------- */

/* ops_moe.c's normal_of, with CUDA's logf, sqrtf and cosf (within 2 ulp of glibc's). */
__device__ static float normal_of(uint64_t key, int64_t j, float eps)
{
    uint64_t z = ast_mix64(key + (uint64_t)j * 0x9e3779b97f4a7c15ull);
    float u1 = ((float)(z >> 40) + 1.0f) / 16777216.0f, u2 = (float)(z & 0xffffff) / 16777216.0f;
    return eps * (sqrtf(-2.0f * logf(u1)) * cosf(6.28318531f * u2));
}

/* rank[r] = the kept rows before r (one block, a scan per chunk of rows). */
__global__ void rank_rows_kernel(const float *rows, int64_t n, int32_t *rank)
{
    typedef cub::BlockScan<int, SCAN_THREADS> scan;
    __shared__ typename scan::TempStorage tmp;
    int base = 0;
    for (int64_t r0 = 0; r0 < n; r0 += SCAN_THREADS) {
        int64_t r = r0 + threadIdx.x;
        int flag = r < n && rows[r] != 0.0f, before, total;
        scan(tmp).ExclusiveSum(flag, before, total);
        if (r < n) rank[r] = base + before;
        base += total;
        __syncthreads();
    }
}

/* rank NULL: element i draws j = i; else row r's column q draws rank[r] cols + q, skipped rows 0. */
__global__ void noise_kernel(const uint64_t *key, float eps, const float *rows, const int32_t *rank, int64_t n,
                             int64_t cols, float *y)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        if (!rank) {
            y[i] = normal_of(*key, i, eps);
            continue;
        }
        int64_t r = i / cols;
        y[i] = rows[r] != 0.0f ? normal_of(*key, (int64_t)rank[r] * cols + (i - r * cols), eps) : 0.0f;
    }
}

/* saved: the key's slot in device memory. */
static void noise_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *rows = n->in[0], *y = n->out;
    int32_t *rank = NULL;
    if (y->size <= 0) return;
    if (rows) {
        rank = (int32_t *)ast_data_alloc_uninit(c, (size_t)rows->size * sizeof *rank);
        rank_rows_kernel<<<1, SCAN_THREADS, 0, AST_CUDA_STREAM>>>(rows->data, rows->size, rank);
        AST_CUDA_LAUNCHED();
    }
    noise_kernel<<<ast_cuda_blocks(y->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        (const uint64_t *)n->saved, n->farg[0], rows ? rows->data : NULL, rank, y->size, ast_cols(y), y->data);
    AST_CUDA_LAUNCHED();
}

/* ---- moe_route ------------------------------------------------------------------------------ */

typedef struct route_dims {
    int64_t tokens, pairs, per_set;
    int k, experts;
    float capacity_factor;
} route_dims;

/* -1 in the token, weight and position arrays, 0 elsewhere (expert is written whole). */
__global__ void plan_init_kernel(float *plan, int64_t size, int64_t pairs)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < size; i += (int64_t)gridDim.x * blockDim.x)
        plan[i] = i >= AST_MOE_PLAN_TOKEN(pairs) && i < AST_MOE_PLAN_EXPERT(pairs) ? -1.0f : 0.0f;
}

/* A thread per token: its k choices (largest first, ties to the lower
 * expert) and, for a valid token, its argmax's count (integers: the adds'
 * order does not matter). */
__global__ void choose_kernel(const float *logits, const float *valid, route_dims d, float *plan)
{
    float *expert = plan + AST_MOE_PLAN_EXPERT(d.pairs);
    for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < d.tokens; t += (int64_t)gridDim.x * blockDim.x) {
        const float *logit = logits + t * d.experts;
        for (int s = 0; s < d.k; s++) {
            int best = -1;
            for (int e = 0; e < d.experts; e++) {
                int taken = 0;
                for (int q = 0; q < s; q++) taken |= (int)expert[t * d.k + q] == e;
                if (!taken && (best < 0 || logit[e] > logit[best])) best = e;
            }
            expert[t * d.k + s] = (float)best;
        }
        if (valid && valid[t] == 0.0f) continue;
        int best = 0;
        for (int e = 1; e < d.experts; e++)
            if (logit[e] > logit[best]) best = e;
        atomicAdd(plan + AST_MOE_PLAN_ARGMAX(d.pairs, d.experts) + best, 1.0f);
    }
}

/* One block: the valid tokens and the capacity (ops_moe.c's capacity_of). */
__global__ void capacity_kernel(const float *valid, route_dims d, float *plan)
{
    typedef cub::BlockReduce<int64_t, SCAN_THREADS> reduce;
    __shared__ typename reduce::TempStorage tmp;
    int64_t mine = 0;
    for (int64_t t = threadIdx.x; t < d.tokens; t += SCAN_THREADS) mine += !valid || valid[t] != 0.0f;
    int64_t tv = reduce(tmp).Sum(mine);
    if (threadIdx.x) return;
    int64_t cap = tv * d.k;
    if (d.capacity_factor > 0.0f) {
        double v = (double)(tv * d.k) * (double)d.capacity_factor / d.experts;
        cap = (int64_t)v;
        if ((double)cap < v) cap++;
    }
    plan[AST_MOE_PLAN_VALID] = (float)tv;
    plan[AST_MOE_PLAN_CAPACITY] = (float)cap;
}

/* A block per expert: the ranks of its candidates in slot-major order (a
 * scan per chunk), kept below the capacity (pos = rank for now), its load
 * and kept count. */
__global__ void rank_kernel(const float *valid, route_dims d, float *plan)
{
    typedef cub::BlockScan<int, SCAN_THREADS> scan;
    __shared__ typename scan::TempStorage tmp;
    int e = blockIdx.x;
    const float *expert = plan + AST_MOE_PLAN_EXPERT(d.pairs);
    float *pos = plan + AST_MOE_PLAN_POS(d.pairs);
    int64_t cap = as_int(plan[AST_MOE_PLAN_CAPACITY]), base = 0;
    for (int64_t i0 = 0; i0 < d.pairs; i0 += SCAN_THREADS) {
        int64_t i = i0 + threadIdx.x, t = i % d.tokens, w = t * d.k + i / d.tokens;
        int flag = i < d.pairs && (!valid || valid[t] != 0.0f) && (int)expert[w] == e, before, total;
        scan(tmp).ExclusiveSum(flag, before, total);
        if (flag && base + before < cap) pos[w] = (float)(base + before);
        base += total;
        __syncthreads();
    }
    if (threadIdx.x) return;
    plan[AST_MOE_PLAN_LOAD(d.pairs, d.experts) + e] = (float)base;
    plan[AST_MOE_PLAN_COUNT(d.pairs, d.experts) + e] = (float)(base < cap ? base : cap);
}

/* One thread: the offsets and the header's kept and dropped pairs. */
__global__ void offsets_kernel(route_dims d, float *plan)
{
    float *offsets = plan + AST_MOE_PLAN_OFFSETS(d.pairs);
    const float *count = plan + AST_MOE_PLAN_COUNT(d.pairs, d.experts);
    for (int e = 0; e < d.experts; e++) offsets[e + 1] = offsets[e] + count[e];
    plan[AST_MOE_PLAN_KEPT_PAIRS] = offsets[d.experts];
    plan[AST_MOE_PLAN_DROPPED] = plan[AST_MOE_PLAN_VALID] * (float)d.k - offsets[d.experts];
}

/* A thread per candidate: a kept one's sorted position, token and weight
 * row, and its set's count. */
__global__ void place_kernel(route_dims d, float *plan)
{
    float *pos = plan + AST_MOE_PLAN_POS(d.pairs);
    const float *expert = plan + AST_MOE_PLAN_EXPERT(d.pairs), *offsets = plan + AST_MOE_PLAN_OFFSETS(d.pairs);
    for (int64_t w = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; w < d.pairs; w += (int64_t)gridDim.x * blockDim.x) {
        if (pos[w] < 0.0f) continue;
        int e = (int)expert[w];
        int64_t t = w / d.k, p = as_int(offsets[e]) + as_int(pos[w]);
        pos[w] = (float)p;
        plan[AST_MOE_PLAN_TOKEN(d.pairs) + p] = (float)t;
        plan[AST_MOE_PLAN_WEIGHT(d.pairs) + p] = (float)w;
        atomicAdd(plan + AST_MOE_PLAN_SETS(d.pairs, d.experts) + (t / d.per_set) * d.experts + e, 1.0f);
    }
}

static void route_forward(ast_ctx *c, ast_node *n)
{
    const float *logits = n->in[0]->data, *valid = n->in[1] ? n->in[1]->data : NULL;
    route_dims d = {ast_rows(n->in[0]), 0, n->iarg[1], (int)n->iarg[0], (int)ast_cols(n->in[0]), n->farg[0]};
    d.pairs = d.tokens * d.k;
    float *plan = n->out->data;
    plan_init_kernel<<<ast_cuda_blocks(n->out->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(plan, n->out->size,
                                                                                             d.pairs);
    AST_CUDA_LAUNCHED();
    if (d.tokens == 0) return;
    choose_kernel<<<ast_cuda_blocks(d.tokens), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(logits, valid, d, plan);
    AST_CUDA_LAUNCHED();
    capacity_kernel<<<1, SCAN_THREADS, 0, AST_CUDA_STREAM>>>(valid, d, plan);
    AST_CUDA_LAUNCHED();
    rank_kernel<<<d.experts, SCAN_THREADS, 0, AST_CUDA_STREAM>>>(valid, d, plan);
    AST_CUDA_LAUNCHED();
    offsets_kernel<<<1, 1, 0, AST_CUDA_STREAM>>>(d, plan);
    AST_CUDA_LAUNCHED();
    place_kernel<<<ast_cuda_blocks(d.pairs), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(d, plan);
    AST_CUDA_LAUNCHED();
}

/* ---- moe_pick ------------------------------------------------------------------------------- */

__global__ void pick_kernel(const float *logits, const float *plan, int64_t pairs, int k, int64_t experts, float *y,
                            const float *dy, float *gl)
{
    const float *expert = plan + AST_MOE_PLAN_EXPERT(pairs);
    for (int64_t w = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; w < pairs; w += (int64_t)gridDim.x * blockDim.x) {
        int64_t at = (w / k) * experts + as_int(expert[w]);
        if (y) y[w] = logits[at];
        else gl[at] += dy[w]; /* each (t, s) its own logit */
    }
}

static void pick_forward(ast_ctx *c, ast_node *n)
{
    int64_t pairs = n->out->size;
    if (!pairs) return;
    pick_kernel<<<ast_cuda_blocks(pairs), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        n->in[0]->data, n->in[1]->data, pairs, (int)n->iarg[0], ast_cols(n->in[0]), n->out->data, NULL, NULL);
    AST_CUDA_LAUNCHED();
}

static void pick_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    int64_t pairs = n->out->size;
    if (!pairs || !g->g[0]) return;
    pick_kernel<<<ast_cuda_blocks(pairs), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        NULL, n->in[1]->data, pairs, (int)n->iarg[0], ast_cols(n->in[0]), NULL, n->out->grad, g->g[0]);
    AST_CUDA_LAUNCHED();
}

/* ---- moe_gather --------------------------------------------------------------------------- */

/* The slot of token t's next kept pair after position `after` (-1: none). */
__device__ static int next_kept(const float *pos, int64_t t, int k, float after)
{
    int best = -1;
    for (int s = 0; s < k; s++) {
        float p = pos[t * k + s];
        if (p > after && (best < 0 || p < pos[t * k + best])) best = s;
    }
    return best;
}

__global__ void gather_kernel(const float *x, const float *plan, int64_t pairs, int64_t d, float *y)
{
    const float *token = plan + AST_MOE_PLAN_TOKEN(pairs);
    int64_t kept = as_int(plan[AST_MOE_PLAN_KEPT_PAIRS]);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < pairs * d; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i / d;
        y[i] = p < kept ? x[as_int(token[p]) * d + (i - p * d)] : 0.0f;
    }
}

/* gx[t] += dy of t's kept pairs in increasing position (the CPU's order). */
__global__ void gather_backward_kernel(const float *dy, const float *plan, int64_t tokens, int k, int64_t d, float *gx)
{
    const float *pos = plan + AST_MOE_PLAN_POS(tokens * k);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < tokens * d; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / d, j = i - t * d;
        float acc = gx[i], after = -1.0f;
        for (int s = next_kept(pos, t, k, after); s >= 0; s = next_kept(pos, t, k, after)) {
            after = pos[t * k + s];
            acc = __fadd_rn(acc, dy[as_int(after) * d + j]);
        }
        gx[i] = acc;
    }
}

static void gather_forward(ast_ctx *c, ast_node *n)
{
    int64_t pairs = ast_rows(n->out), d = ast_cols(n->out);
    if (pairs * d <= 0) return;
    gather_kernel<<<ast_cuda_blocks(pairs * d), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(n->in[0]->data, n->in[1]->data,
                                                                                      pairs, d, n->out->data);
    AST_CUDA_LAUNCHED();
}

static void gather_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    int64_t tokens = ast_rows(n->in[0]), d = ast_cols(n->in[0]);
    if (tokens * d <= 0 || !g->g[0]) return;
    gather_backward_kernel<<<ast_cuda_blocks(tokens * d), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        n->out->grad, n->in[1]->data, tokens, (int)n->iarg[0], d, g->g[0]);
    AST_CUDA_LAUNCHED();
}

/* ---- moe_grouped_linear ------------------------------------------------------------------ */

/* The experts of one launch: their parameters (or gradients) by value, so
 * a graph keeps them and nothing is uploaded per step. */
#define CHUNK 32
typedef struct expert_ptrs {
    const float *w[CHUNK], *b[CHUNK];
    float *gw[CHUNK], *gb[CHUNK];
} expert_ptrs;

/* Tiles of 64 x 64 outputs, 16 x 16 threads of 4 x 4 each, 16 deep. */
#define TILE 64
#define DEPTH 16

/* The row tile `j` of this launch's experts [e0, e0 + ne): its expert
 * (local index) and rows [*r0, *r1), or -1 past the last one. Each expert
 * has ceil(rows / TILE) tiles, in expert order. */
__device__ static int tile_rows(const float *offsets, int e0, int ne, int64_t j, int64_t *r0, int64_t *r1)
{
    for (int e = 0; e < ne; e++) {
        int64_t lo = as_int(offsets[e0 + e]), hi = as_int(offsets[e0 + e + 1]), tiles = (hi - lo + TILE - 1) / TILE;
        if (j < tiles) {
            *r0 = lo + j * TILE;
            *r1 = hi < *r0 + TILE ? hi : *r0 + TILE;
            return e;
        }
        j -= tiles;
    }
    return -1;
}

/* C[r, j] = sum_q A[r, q] B_e(q, j) (+ b_e[j]) for the rows of one tile;
 * B_e(q, j) = w[j K + q] (trans_b: the forward, w [N, K]) or w[q N + j]
 * (dx = dy w, w [K, N]). Grid: x the column tiles, y the worst-case row tiles. */
__global__ void grouped_gemm_kernel(const float *a, const float *offsets, int e0, int ne, int64_t K, int64_t N,
                                    int trans_b, expert_ptrs ptr, float *out, int keep)
{
    /* a column of padding: the loads below store along the first index */
    __shared__ float as[DEPTH][TILE + 1], bs[DEPTH][TILE + 1];
    __shared__ int64_t row0, row1;
    __shared__ int e;
    if (threadIdx.x == 0 && threadIdx.y == 0) e = tile_rows(offsets, e0, ne, blockIdx.y, &row0, &row1);
    __syncthreads();
    if (e < 0) return;
    const float *w = ptr.w[e], *bias = ptr.b[e];
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int64_t col0 = (int64_t)blockIdx.x * TILE;
    float acc[4][4] = {{0}};
    for (int64_t q0 = 0; q0 < K; q0 += DEPTH) {
        for (int l = tid; l < DEPTH * TILE; l += 256) { /* neighbouring threads read neighbouring floats */
            int q = l % DEPTH, r = l / DEPTH;
            int cq = trans_b ? l % DEPTH : l / TILE, cj = trans_b ? l / DEPTH : l % TILE;
            int64_t row = row0 + r, col = col0 + cj, qa = q0 + q, qb = q0 + cq;
            as[q][r] = row < row1 && qa < K ? a[row * K + qa] : 0.0f;
            bs[cq][cj] = col < N && qb < K ? (trans_b ? w[col * K + qb] : w[qb * N + col]) : 0.0f;
        }
        __syncthreads();
        for (int q = 0; q < DEPTH; q++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) acc[i][j] += as[q][ty * 4 + i] * bs[q][tx * 4 + j];
        __syncthreads();
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int64_t row = row0 + ty * 4 + i, col = col0 + tx * 4 + j;
            if (row >= row1 || col >= N) continue;
            out[row * N + col] = (keep ? out[row * N + col] : 0.0f) + acc[i][j] + (bias ? bias[col] : 0.0f);
        }
}

/* Rows from the kept count on: 0 (no expert's). */
__global__ void zero_tail_kernel(const float *plan, int64_t rows, int64_t cols, float *y)
{
    int64_t from = as_int(plan[AST_MOE_PLAN_KEPT_PAIRS]) * cols;
    for (int64_t i = from + blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < rows * cols;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = 0.0f;
}

/* dW_e[o, i] += sum over e's rows r, in order of 16-row slabs, of dy[r, o] x[r, i];
 * grid: x the input tiles, y the output tiles, z the launch's experts. */
__global__ void grouped_weight_grad_kernel(const float *dy, const float *x, const float *offsets, int e0, int64_t in,
                                           int64_t out, expert_ptrs ptr)
{
    __shared__ float ds[DEPTH][TILE], xs[DEPTH][TILE];
    int e = blockIdx.z;
    float *gw = ptr.gw[e];
    int64_t lo = as_int(offsets[e0 + e]), hi = as_int(offsets[e0 + e + 1]);
    if (!gw || hi == lo) return;
    int tx = threadIdx.x, ty = threadIdx.y, tid = ty * 16 + tx;
    int64_t i0 = (int64_t)blockIdx.x * TILE, o0 = (int64_t)blockIdx.y * TILE;
    float acc[4][4] = {{0}};
    for (int64_t r0 = lo; r0 < hi; r0 += DEPTH) {
        for (int l = tid; l < DEPTH * TILE; l += 256) {
            int q = l / TILE, j = l % TILE;
            int64_t r = r0 + q;
            ds[q][j] = r < hi && o0 + j < out ? dy[r * out + o0 + j] : 0.0f;
            xs[q][j] = r < hi && i0 + j < in ? x[r * in + i0 + j] : 0.0f;
        }
        __syncthreads();
        for (int q = 0; q < DEPTH; q++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) acc[i][j] += ds[q][ty * 4 + i] * xs[q][tx * 4 + j];
        __syncthreads();
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            int64_t o = o0 + ty * 4 + i, col = i0 + tx * 4 + j;
            if (o < out && col < in) gw[o * in + col] += acc[i][j];
        }
}

/* db_e[o] += the column sum of e's rows of dy, in row order; a thread per (e, o). */
__global__ void grouped_bias_grad_kernel(const float *dy, const float *offsets, int e0, int ne, int64_t out,
                                         expert_ptrs ptr)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < ne * out; i += (int64_t)gridDim.x * blockDim.x) {
        int e = (int)(i / out);
        int64_t o = i - e * out, lo = as_int(offsets[e0 + e]), hi = as_int(offsets[e0 + e + 1]);
        float *gb = ptr.gb[e], sum = 0.0f;
        if (!gb || hi == lo) continue;
        for (int64_t r = lo; r < hi; r++) sum += dy[r * out + o];
        gb[o] += sum;
    }
}

/* The pointers of experts [e0, e0 + ne) (NULL where an array or its entry is). */
static expert_ptrs chunk_of(const ast_groups *s, int e0, int ne)
{
    expert_ptrs p;
    memset(&p, 0, sizeof p);
    for (int e = 0; e < ne; e++) {
        p.w[e] = s->w[e0 + e]->data;
        p.b[e] = s->b ? s->b[e0 + e]->data : NULL;
        p.gw[e] = s->gw ? s->gw[e0 + e] : NULL;
        p.gb[e] = s->gb ? s->gb[e0 + e] : NULL;
    }
    return p;
}

/* C (keep: +)= A B_e per tile over every chunk of experts; rows past the
 * kept pairs 0 (keep: unchanged). */
static void grouped_gemm(const ast_groups *s, const float *plan, const float *a, int64_t rows, int64_t K, int64_t N,
                         int trans_b, int bias, float *out, int keep)
{
    const float *offsets = plan + AST_MOE_PLAN_OFFSETS(rows);
    for (int e0 = 0; e0 < s->n; e0 += CHUNK) {
        int ne = s->n - e0 < CHUNK ? s->n - e0 : CHUNK;
        expert_ptrs p = chunk_of(s, e0, ne);
        if (!bias) memset(p.b, 0, sizeof p.b);
        dim3 grid((unsigned)((N + TILE - 1) / TILE), (unsigned)((rows + TILE - 1) / TILE + ne)), block(16, 16);
        if (N > 0 && rows > 0)
            grouped_gemm_kernel<<<grid, block, 0, AST_CUDA_STREAM>>>(a, offsets, e0, ne, K, N, trans_b, p, out, keep);
        AST_CUDA_LAUNCHED();
    }
    if (rows * N <= 0 || keep) return;
    zero_tail_kernel<<<ast_cuda_blocks(rows * N), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(plan, rows, N, out);
    AST_CUDA_LAUNCHED();
}

/* saved: the ast_groups (offsets NULL); in[3] the plan. */
static void grouped_forward(ast_ctx *c, ast_node *n)
{
    grouped_gemm((const ast_groups *)n->saved, n->in[3]->data, n->in[0]->data, ast_rows(n->in[0]), ast_cols(n->in[0]),
                 ast_cols(n->out), 1, 1, n->out->data, 0);
}

static void grouped_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    const ast_groups *s = (const ast_groups *)n->saved;
    const float *plan = n->in[3]->data, *offsets;
    int64_t rows = ast_rows(n->in[0]), in = ast_cols(n->in[0]), out = ast_cols(n->out);
    if (g->g[0]) grouped_gemm(s, plan, n->out->grad, rows, out, in, 0, 0, g->g[0], !g->assign[0]); /* dx (+)= dy w */
    offsets = plan + AST_MOE_PLAN_OFFSETS(rows);
    for (int e0 = 0; e0 < s->n && rows > 0; e0 += CHUNK) {
        int ne = s->n - e0 < CHUNK ? s->n - e0 : CHUNK;
        expert_ptrs p = chunk_of(s, e0, ne);
        if (s->gw && in > 0 && out > 0) {
            dim3 grid((unsigned)((in + TILE - 1) / TILE), (unsigned)((out + TILE - 1) / TILE), (unsigned)ne);
            grouped_weight_grad_kernel<<<grid, dim3(16, 16), 0, AST_CUDA_STREAM>>>(n->out->grad, n->in[0]->data,
                                                                                 offsets, e0, in, out, p);
            AST_CUDA_LAUNCHED();
        }
        if (s->gb && out > 0) {
            grouped_bias_grad_kernel<<<ast_cuda_blocks(ne * out), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
                n->out->grad, offsets, e0, ne, out, p);
            AST_CUDA_LAUNCHED();
        }
    }
}

/* ---- moe_combine ---------------------------------------------------------------------------- */

/* out[t] = the sum of w[t, s] y[p] over t's kept pairs in increasing p (rounded products, as the CPU). */
__global__ void combine_kernel(const float *y, const float *w, const float *plan, int64_t tokens, int k, int64_t d,
                               float *out)
{
    const float *pos = plan + AST_MOE_PLAN_POS(tokens * k);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < tokens * d; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = i / d, j = i - t * d;
        float acc = 0.0f, after = -1.0f;
        for (int s = next_kept(pos, t, k, after); s >= 0; s = next_kept(pos, t, k, after)) {
            after = pos[t * k + s];
            acc = __fadd_rn(acc, __fmul_rn(w[t * k + s], y[as_int(after) * d + j]));
        }
        out[i] = acc;
    }
}

/* dy[p] = w of p's pair times dout[token of p] (kept), else 0. */
__global__ void combine_dy_kernel(const float *dout, const float *w, const float *plan, int64_t pairs, int64_t d,
                                  float *gy, int keep)
{
    const float *token = plan + AST_MOE_PLAN_TOKEN(pairs), *weight = plan + AST_MOE_PLAN_WEIGHT(pairs);
    int64_t kept = as_int(plan[AST_MOE_PLAN_KEPT_PAIRS]);
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < pairs * d; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i / d;
        float v = p < kept ? __fmul_rn(w[as_int(weight[p])], dout[as_int(token[p]) * d + (i - p * d)]) : 0.0f;
        gy[i] = keep ? __fadd_rn(gy[i], v) : v;
    }
}

/* dw[t, s] = <dout[t], y[p]> for a kept pair, else 0: a warp per pair, a fixed shuffle tree. */
__global__ void combine_dw_kernel(const float *dout, const float *y, const float *plan, int64_t pairs, int k,
                                  int64_t d, float *gw, int keep)
{
    const float *pos = plan + AST_MOE_PLAN_POS(pairs);
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * blockDim.x / 32;
    for (int64_t w = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) / 32; w < pairs; w += warps) {
        int64_t p = as_int(pos[w]), t = w / k;
        float dot = 0.0f;
        for (int64_t j = lane; p >= 0 && j < d; j += 32) dot += dout[t * d + j] * y[p * d + j];
        for (int off = 16; off > 0; off /= 2) dot += __shfl_down_sync(0xffffffffu, dot, off);
        if (lane == 0) gw[w] = keep ? gw[w] + dot : dot;
    }
}

static void combine_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *y = n->in[0], *w = n->in[1];
    int64_t tokens = w->shape[0], d = ast_cols(y);
    if (tokens * d <= 0) return;
    combine_kernel<<<ast_cuda_blocks(tokens * d), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        y->data, w->data, n->in[2]->data, tokens, (int)w->shape[1], d, n->out->data);
    AST_CUDA_LAUNCHED();
}

/* Both gradients written whole where the dispatch hands them fresh, else added to. */
static void combine_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *y = n->in[0], *w = n->in[1];
    int64_t pairs = w->size, d = ast_cols(y);
    if (g->g[0] && pairs * d > 0) {
        combine_dy_kernel<<<ast_cuda_blocks(pairs * d), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
            n->out->grad, w->data, n->in[2]->data, pairs, d, g->g[0], !g->assign[0]);
        AST_CUDA_LAUNCHED();
    }
    if (g->g[1] && pairs > 0) {
        combine_dw_kernel<<<ast_cuda_blocks(pairs * 32), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
            n->out->grad, y->data, n->in[2]->data, pairs, (int)w->shape[1], d, g->g[1], !g->assign[1]);
        AST_CUDA_LAUNCHED();
    }
}

extern "C" void ast_cuda_moe_kernels(ast_op_kernel *t)
{
    t[AST_OP_noise_normal] = ast_op_kernel{noise_forward, NULL, 0, 0};
    t[AST_OP_moe_route] = ast_op_kernel{route_forward, NULL, 0, 0};
    t[AST_OP_moe_pick] = ast_op_kernel{pick_forward, pick_backward, 0, 0};
    t[AST_OP_moe_gather] = ast_op_kernel{gather_forward, gather_backward, 0, 0};
    t[AST_OP_moe_grouped_linear] = ast_op_kernel{grouped_forward, grouped_backward, 1, 0};
    t[AST_OP_moe_combine] = ast_op_kernel{combine_forward, combine_backward, 3, 0};
}
