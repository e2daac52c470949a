/* The gated plugin's fused attention core on CUDA: the "cuda" kernel of
 * "gated_attention", O = Dropout(softmax(Q K^T / sqrt(dh) + key bias)) V
 * per (set, head), FlashAttention-2 style.
 *
 * Forward: a block takes 64 query rows of one (set, head) and walks the
 * keys in tiles staged in shared memory, with an online softmax (running
 * max and sum, the output rescaled when the max grows, per chunk of 16
 * keys); it keeps only the row log-sum-exp. Backward: D = rowsum(dO * O),
 * then the tiles are recomputed from Q, K and the LSE in two kernels that
 * own what they write, so no atomics and the same bits every run: dK and dV
 * parallel over key rows (each walks every query), dQ parallel over query
 * rows (each walks every key). Memory beyond q, k, v and o: the LSE and D
 * [B, H, N] and the key bias [B, N].
 *
 * A row (query or key) lives in the registers of TPR threads, each holding
 * PER of its dh values (lane + TPR * t), so a dot product is PER
 * multiply-adds and a butterfly over the TPR lanes; heads narrower than
 * TPR * PER are zero-padded, which adds nothing. The variants cover
 * dh <= ATTN_CUDA_MAX_DH. Dropout decisions come from attn_dropout.h, the
 * CPU kernel's hash, so both drop the same probabilities.
 *
 * Plugins never link the core: this file has its own CUDA error check and
 * launches on cudaStreamPerThread, the stream of the engine's ops (nvcc's
 * --default-stream per-thread), so it runs in order with them. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>

#include "alphast/plugin_api.h"
#include "attn_dropout.h"
#include "attn_gated_kernel.h"

/* A failed CUDA call leaves the context unusable (as the engine's
 * ast_cuda_fail says): report it and exit with the engine's status. */
static void attn_cuda_fail(const char *call, cudaError_t err, const char *file, int line)
{
    ast_log(AST_LOG_ERROR, "%s:%d: %s: %s", file, line, call, cudaGetErrorString(err));
    exit(70);
}

#define ATTN_CUDA_CHECK(call)                                                  \
    do {                                                                       \
        cudaError_t attn_err_ = (call);                                        \
        if (attn_err_ != cudaSuccess) attn_cuda_fail(#call, attn_err_, __FILE__, __LINE__); \
    } while (0)

/* Rows (queries or keys) per block, keys per softmax chunk. */
#define ATTN_ROWS 64
#define ATTN_CHUNK 16

/* Rows of the other side staged per tile: 32 KB of shared memory for the
 * two staged [tile, TPR * PER] blocks at the widest heads. */
static __host__ __device__ constexpr int stage_rows(int tpr) { return tpr >= 8 ? 32 : 64; }

/* What every kernel reads: device pointers and the call's constants. */
typedef struct attn_args {
    const float *q, *k, *v, *kb; /* kb [B, N]: 0 or -inf per key */
    float *o, *lse;
    const float *dout, *dsum; /* backward: dL/dO and D */
    float *gq, *gk, *gv;      /* backward: NULL when not needed */
    int64_t N;
    int H, dh, tiles;         /* tiles: blocks per (set, head) */
    float scale, keep;
    const uint64_t *seed; /* dropout's key in device memory (host->rng_key); NULL without dropout */
    uint32_t drop_below;
} attn_args;

/* The call's dropout key: read on the device, so a replayed graph gets its new one. */
static __device__ uint64_t call_seed(const attn_args &p) { return p.seed ? *p.seed : 0; }

/* The sum of x over the TPR lanes of a row. Every lane gets the same bits:
 * each butterfly step adds the same two partial sums, only swapped. */
template <int TPR> static __device__ float lanes_sum(float x)
{
#pragma unroll
    for (int o = TPR / 2; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

/* a . (a staged row of TPR * PER floats), over the row's lanes. */
template <int TPR, int PER> static __device__ float dot_staged(const float (&a)[PER], const float *row, int lane)
{
    float d = 0.0f;
#pragma unroll
    for (int t = 0; t < PER; t++) d += a[t] * row[lane + TPR * t];
    return lanes_sum<TPR>(d);
}

/* This lane's values of row `row` of x [BH, N, dh] (zeros past N and dh). */
template <int TPR, int PER>
static __device__ void load_row(float (&dst)[PER], const float *x, const attn_args &p, int64_t bh, int64_t row, int lane)
{
#pragma unroll
    for (int t = 0; t < PER; t++) {
        int e = lane + TPR * t;
        dst[t] = row < p.N && e < p.dh ? x[(bh * p.N + row) * p.dh + e] : 0.0f;
    }
}

/* Rows [r0, r0 + n) of x [BH, N, dh] into shared memory as n rows of
 * TPR * PER floats, zero past N and dh, by the whole block. */
template <int TPR, int PER, int N_ROWS>
static __device__ void stage(float *dst, const float *x, const attn_args &p, int64_t bh, int64_t r0)
{
    constexpr int W = TPR * PER;
    for (int at = threadIdx.x; at < N_ROWS * W; at += blockDim.x) {
        int64_t r = r0 + at / W;
        int e = at % W;
        dst[at] = r < p.N && e < p.dh ? x[(bh * p.N + r) * p.dh + e] : 0.0f;
    }
}

/* Dropout factor of probability (row with key rk, key j): 0 or 1 / (1 - p). */
static __device__ float drop_factor(const attn_args &p, uint32_t rk, int64_t j)
{
    if (!p.drop_below) return 1.0f;
    return attn_cell_hash(rk, j) < p.drop_below ? 0.0f : p.keep;
}

/* The block's (set, head) and the first row of its tile. */
static __device__ void block_place(const attn_args &p, int64_t *bh, int64_t *row0)
{
    *bh = blockIdx.x / p.tiles;
    *row0 = (int64_t)(blockIdx.x % p.tiles) * ATTN_ROWS;
}

/* ---- forward -------------------------------------------------------------- */

template <int TPR, int PER> static __global__ void __launch_bounds__(ATTN_ROWS *TPR) attn_forward(attn_args p)
{
    constexpr int KT = stage_rows(TPR), W = TPR * PER;
    __shared__ float ks[KT * W], vs[KT * W], kbs[KT];
    int64_t bh, i0;
    block_place(p, &bh, &i0);
    int64_t i = i0 + threadIdx.x / TPR;
    int lane = threadIdx.x % TPR;
    const float *kb = p.kb + (bh / p.H) * p.N;
    float q[PER], acc[PER];
    load_row<TPR, PER>(q, p.q, p, bh, i, lane);
#pragma unroll
    for (int t = 0; t < PER; t++) acc[t] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    uint32_t rk = attn_row_key(call_seed(p), bh * p.N + i);
    for (int64_t j0 = 0; j0 < p.N; j0 += KT) {
        stage<TPR, PER, KT>(ks, p.k, p, bh, j0);
        stage<TPR, PER, KT>(vs, p.v, p, bh, j0);
        for (int r = threadIdx.x; r < KT; r += blockDim.x) kbs[r] = j0 + r < p.N ? kb[j0 + r] : -INFINITY;
        __syncthreads();
        int jn = (int)(p.N - j0 < KT ? p.N - j0 : KT);
        for (int c0 = 0; c0 < jn; c0 += ATTN_CHUNK) {
            /* the chunk's scores and the new running max (keys past N are -inf) */
            float s[ATTN_CHUNK], mx = m;
#pragma unroll
            for (int c = 0; c < ATTN_CHUNK; c++) {
                s[c] = dot_staged<TPR, PER>(q, ks + (c0 + c) * W, lane) * p.scale + kbs[c0 + c];
                mx = fmaxf(mx, s[c]);
            }
            float shift = mx == -INFINITY ? 0.0f : mx; /* every key so far is padding */
            float alpha = expf(m - shift);
            l *= alpha;
#pragma unroll
            for (int t = 0; t < PER; t++) acc[t] *= alpha;
#pragma unroll
            for (int c = 0; c < ATTN_CHUNK; c++) {
                float e = expf(s[c] - shift);
                l += e;
                float pd = e * drop_factor(p, rk, j0 + c0 + c);
                const float *vr = vs + (c0 + c) * W;
#pragma unroll
                for (int t = 0; t < PER; t++) acc[t] += pd * vr[lane + TPR * t];
            }
            m = mx;
        }
        __syncthreads();
    }
    if (i >= p.N) return;
    float *o = p.o + (bh * p.N + i) * p.dh;
#pragma unroll
    for (int t = 0; t < PER; t++)
        if (lane + TPR * t < p.dh) o[lane + TPR * t] = acc[t] / l;
    if (lane == 0) p.lse[bh * p.N + i] = m + logf(l);
}

/* ---- backward ------------------------------------------------------------- */

/* D[r] = sum_e O[r, e] dO[r, e] over the rows of [BH * N, dh]. */
static __global__ void attn_row_dot(const float *o, const float *dout, float *d, int64_t rows, int dh)
{
    for (int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; r < rows; r += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int e = 0; e < dh; e++) s += o[r * dh + e] * dout[r * dh + e];
        d[r] = s;
    }
}

/* With Pd = Z * P and O = Pd V: dV_j = sum_i Pd_ij dO_i and
 * dK_j = scale * sum_i dS_ij Q_i, dS_ij = Pd_ij (dO_i . V_j) - P_ij D_i,
 * P_ij = exp(S_ij - LSE_i) recomputed; one key row per TPR threads. */
template <int TPR, int PER> static __global__ void __launch_bounds__(ATTN_ROWS *TPR) attn_dkdv(attn_args p)
{
    constexpr int QT = stage_rows(TPR), W = TPR * PER;
    __shared__ float qs[QT * W], dos[QT * W], lses[QT], ds[QT];
    __shared__ uint32_t rks[QT];
    int64_t bh, j0;
    block_place(p, &bh, &j0);
    int64_t j = j0 + threadIdx.x / TPR;
    int lane = threadIdx.x % TPR;
    float k[PER], v[PER], dk[PER], dv[PER];
    load_row<TPR, PER>(k, p.k, p, bh, j, lane);
    load_row<TPR, PER>(v, p.v, p, bh, j, lane);
#pragma unroll
    for (int t = 0; t < PER; t++) dk[t] = dv[t] = 0.0f;
    float kbj = j < p.N ? p.kb[(bh / p.H) * p.N + j] : -INFINITY;
    for (int64_t i0 = 0; i0 < p.N; i0 += QT) {
        stage<TPR, PER, QT>(qs, p.q, p, bh, i0);
        stage<TPR, PER, QT>(dos, p.dout, p, bh, i0);
        for (int r = threadIdx.x; r < QT; r += blockDim.x) {
            int64_t i = i0 + r;
            lses[r] = i < p.N ? p.lse[bh * p.N + i] : INFINITY; /* rows past N: P = 0 */
            ds[r] = i < p.N ? p.dsum[bh * p.N + i] : 0.0f;
            rks[r] = attn_row_key(call_seed(p), bh * p.N + i);
        }
        __syncthreads();
        int in = (int)(p.N - i0 < QT ? p.N - i0 : QT);
#pragma unroll 4
        for (int r = 0; r < in; r++) {
            const float *qr = qs + r * W, *dor = dos + r * W;
            float pr = expf(dot_staged<TPR, PER>(k, qr, lane) * p.scale + kbj - lses[r]);
            float pd = pr * drop_factor(p, rks[r], j);
            float dsc = pd * dot_staged<TPR, PER>(v, dor, lane) - pr * ds[r];
#pragma unroll
            for (int t = 0; t < PER; t++) {
                dv[t] += pd * dor[lane + TPR * t];
                dk[t] += dsc * qr[lane + TPR * t];
            }
        }
        __syncthreads();
    }
    if (j >= p.N) return;
    int64_t at = (bh * p.N + j) * p.dh;
#pragma unroll
    for (int t = 0; t < PER; t++) {
        int e = lane + TPR * t;
        if (e >= p.dh) continue;
        if (p.gk) p.gk[at + e] += dk[t] * p.scale;
        if (p.gv) p.gv[at + e] += dv[t];
    }
}

/* dQ_i = scale * sum_j dS_ij K_j; one query row per TPR threads. */
template <int TPR, int PER> static __global__ void __launch_bounds__(ATTN_ROWS *TPR) attn_dq(attn_args p)
{
    constexpr int KT = stage_rows(TPR), W = TPR * PER;
    __shared__ float ks[KT * W], vs[KT * W], kbs[KT];
    int64_t bh, i0;
    block_place(p, &bh, &i0);
    int64_t i = i0 + threadIdx.x / TPR;
    int lane = threadIdx.x % TPR;
    const float *kb = p.kb + (bh / p.H) * p.N;
    float q[PER], dout[PER], dq[PER];
    load_row<TPR, PER>(q, p.q, p, bh, i, lane);
    load_row<TPR, PER>(dout, p.dout, p, bh, i, lane);
#pragma unroll
    for (int t = 0; t < PER; t++) dq[t] = 0.0f;
    float lse = i < p.N ? p.lse[bh * p.N + i] : INFINITY, d = i < p.N ? p.dsum[bh * p.N + i] : 0.0f;
    uint32_t rk = attn_row_key(call_seed(p), bh * p.N + i);
    for (int64_t j0 = 0; j0 < p.N; j0 += KT) {
        stage<TPR, PER, KT>(ks, p.k, p, bh, j0);
        stage<TPR, PER, KT>(vs, p.v, p, bh, j0);
        for (int r = threadIdx.x; r < KT; r += blockDim.x) kbs[r] = j0 + r < p.N ? kb[j0 + r] : -INFINITY;
        __syncthreads();
        int jn = (int)(p.N - j0 < KT ? p.N - j0 : KT);
#pragma unroll 4
        for (int c = 0; c < jn; c++) {
            const float *kr = ks + c * W;
            float pr = expf(dot_staged<TPR, PER>(q, kr, lane) * p.scale + kbs[c] - lse);
            float pd = pr * drop_factor(p, rk, j0 + c);
            float dsc = pd * dot_staged<TPR, PER>(dout, vs + c * W, lane) - pr * d;
#pragma unroll
            for (int t = 0; t < PER; t++) dq[t] += dsc * kr[lane + TPR * t];
        }
        __syncthreads();
    }
    if (i >= p.N) return;
    int64_t at = (bh * p.N + i) * p.dh;
#pragma unroll
    for (int t = 0; t < PER; t++)
        if (lane + TPR * t < p.dh) p.gq[at + lane + TPR * t] += dq[t] * p.scale;
}

/* ---- key bias --------------------------------------------------------------- */

/* kb[b, j] = 0 for valid keys (mask > 0.5), -inf for padded ones; a set
 * without a valid cell keeps every key (the CPU kernel's rule). One block
 * per set; the count is an integer, the same in any order. */
static __global__ void attn_key_bias(const float *mask, float *kb, int64_t N)
{
    const float *m = mask + blockIdx.x * N;
    float *out = kb + blockIdx.x * N;
    int64_t valid = 0;
    for (int64_t j0 = 0; j0 < N; j0 += blockDim.x) {
        int64_t j = j0 + threadIdx.x;
        valid += __syncthreads_count(j < N && m[j] > 0.5f);
    }
    if (!valid) return; /* kb came zeroed */
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) out[j] = m[j] > 0.5f ? 0.0f : -INFINITY;
}

/* ---- host side -------------------------------------------------------------- */

/* One (TPR, PER) instance of the three tile kernels. */
typedef struct attn_variant {
    int tpr;
    void (*forward)(attn_args);
    void (*dkdv)(attn_args);
    void (*dq)(attn_args);
} attn_variant;

#define ATTN_VARIANT(TPR, PER) {TPR, attn_forward<TPR, PER>, attn_dkdv<TPR, PER>, attn_dq<TPR, PER>}

/* The narrowest variant that holds a row of dh values. */
static const attn_variant *variant_for(int64_t dh)
{
    static const attn_variant variants[] = {ATTN_VARIANT(1, 4), ATTN_VARIANT(1, 8), ATTN_VARIANT(1, 16),
                                            ATTN_VARIANT(2, 16), ATTN_VARIANT(4, 16), ATTN_VARIANT(8, 16)};
    static const int widths[] = {4, 8, 16, 32, 64, 128};
    for (int i = 0; i < 6; i++)
        if (dh <= widths[i]) return &variants[i];
    return NULL;
}

/* A broken caller contract (as the CPU kernel's): say what and stop. */
static void attn_cuda_refuse(const char *what)
{
    ast_log(AST_LOG_ERROR, "attention core (cuda): %s", what);
    abort();
}

typedef struct cuda_saved {
    attn_args a;
    const attn_variant *variant;
    int64_t rows; /* B * H * N */
} cuda_saved;

static void launch(void (*kernel)(attn_args), const cuda_saved *s, const attn_args &a)
{
    unsigned blocks = (unsigned)(a.tiles * (s->rows / a.N));
    kernel<<<blocks, ATTN_ROWS * s->variant->tpr, 0, cudaStreamPerThread>>>(a);
    ATTN_CUDA_CHECK(cudaGetLastError());
}

static void core_backward(ast_ctx *c, const ast_node *n)
{
    const cuda_saved *s = (const cuda_saved *)n->saved;
    attn_args a = s->a;
    a.gq = ast_grad(c, n->in[0]);
    a.gk = ast_grad(c, n->in[1]);
    a.gv = ast_grad(c, n->in[2]);
    a.dout = n->out->grad;
    if (!s->rows) return;
    ast_tensor *dsum = ast_zeros(c, 1, &s->rows);
    a.dsum = dsum->data;
    int64_t blocks = (s->rows + 255) / 256; /* a grid-stride loop covers rows past 65535 blocks */
    attn_row_dot<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, cudaStreamPerThread>>>(a.o, a.dout, dsum->data,
                                                                                           s->rows, a.dh);
    ATTN_CUDA_CHECK(cudaGetLastError());
    if (a.gk || a.gv) launch(s->variant->dkdv, s, a);
    if (a.gq) launch(s->variant->dq, s, a);
}

/* The key bias [B, N] on the device: zeros (every key counts) without a mask. */
static ast_tensor *key_bias(ast_ctx *c, const ast_tensor *mask, int64_t B, int64_t N)
{
    int64_t bn = B * N;
    ast_tensor *kb = ast_zeros(c, 1, &bn);
    if (!mask || !bn) return kb;
    if (mask->size != bn) attn_cuda_refuse("the mask's size is not [B, N] of q");
    attn_key_bias<<<(unsigned)B, 256, 0, cudaStreamPerThread>>>(mask->data, kb->data, N);
    ATTN_CUDA_CHECK(cudaGetLastError());
    return kb;
}

static int same_shape(const ast_tensor *a, const ast_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

/* The call's constants and buffers, as the CPU kernel draws and builds them. */
static cuda_saved *saved_new(ast_ctx *c, const ast_tensor *q, const ast_tensor *mask, const attn_core_cfg *cfg)
{
    cuda_saved *s = (cuda_saved *)ast_alloc(c, sizeof *s);
    attn_args *a = &s->a;
    int64_t B = q->shape[0], N = q->shape[2];
    a->H = (int)q->shape[1];
    a->N = N;
    a->dh = (int)q->shape[3];
    a->tiles = (int)((N + ATTN_ROWS - 1) / ATTN_ROWS);
    a->scale = 1.0f / sqrtf((float)a->dh);
    if (cfg->dropout > 0.0f) {
        ast_rng_key(c, &a->seed);
        a->drop_below = attn_drop_below(cfg->dropout);
        a->keep = 1.0f / (1.0f - cfg->dropout);
    }
    s->variant = variant_for(a->dh);
    s->rows = B * a->H * N;
    a->kb = key_bias(c, mask, B, N)->data;
    a->lse = ast_zeros(c, 1, &s->rows)->data;
    return s;
}

extern "C" ast_tensor *attn_core_cuda(ast_ctx *c, ast_tensor *q, ast_tensor *k, ast_tensor *v,
                                      const ast_tensor *mask, const attn_core_cfg *cfg)
{
    if (q->ndim != 4 || !same_shape(q, k) || !same_shape(q, v))
        attn_cuda_refuse("q, k, v must share one [B, H, N, dh] shape");
    if (cfg->kernel != ATTN_KERNEL_TILED) attn_cuda_refuse("only the tiled kernel runs on CUDA");
    if (!variant_for(q->shape[3])) attn_cuda_refuse("dh above ATTN_CUDA_MAX_DH");
    cuda_saved *s = saved_new(c, q, mask, cfg);
    ast_tensor *o = ast_zeros(c, 4, q->shape);
    s->a.q = q->data, s->a.k = k->data, s->a.v = v->data, s->a.o = o->data;
    if (s->rows) launch(s->variant->forward, s, s->a);
    ast_node n = {};
    n.op = "attn_core";
    n.backward = core_backward;
    n.out = o;
    n.in[0] = q, n.in[1] = k, n.in[2] = v;
    n.n_in = 3;
    n.saved = s;
    ast_record(c, &n);
    return o;
}
