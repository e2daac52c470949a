/* The fused attention core: forward and backward of
 * O = Dropout(softmax(Q K^T / sqrt(dh) + key bias)) V, per (set, head).
 *
 * Tiled: the forward walks key tiles with an online softmax (running row
 * max m and sum l, the accumulated output rescaled when m grows) and keeps
 * only LSE = m + log l per row; the backward recomputes P = exp(S - LSE)
 * tile by tile and uses D = rowsum(dO * O), which equals rowsum(dP * P)
 * even with dropout, so no N x N buffer exists in either pass.
 * Naive: stores P and derives the row sums from the full tile instead,
 * which makes it an independent check of the tiled path (it also keeps
 * libm's expf and runs serially).
 *
 * The tiled kernel runs the (set, head) pairs on the host's threads. Its
 * tile GEMMs run inside those threads, each on the calling thread (the
 * host's sgemm does not split a GEMM called from a pool job); 128 x 128
 * tiles measured 2-8 % faster than 64 x 64 at N = 512 to 4k. */
#include <math.h>
#include <stdlib.h>

#include "alphast/fastmath.h"
#include "alphast/plugin_api.h"
#include "attn_dropout.h"
#include "attn_gated_kernel.h"

typedef struct core_saved {
    int64_t B, H, N, dh;
    int64_t tile;
    attn_kernel kernel;
    float scale;
    uint64_t seed;
    uint64_t drop_below; /* drop a cell whose 24-bit hash is below this; 0 = no dropout */
    float keep_scale;    /* 1 / (1 - p) for the cells kept */
    float *key_bias;     /* [B, N]: 0 for keys that count, -inf for padded ones */
    float *rows;         /* tiled: log-sum-exp [B, H, N]; naive: probabilities [B, H, N, N] */
} core_saved;

/* One (set, head): its slices of the inputs, output and gradients. */
typedef struct head_io {
    int64_t bh;
    const float *q, *k, *v, *kb;
    float *o, *rows;
    const float *dout;
    float *gq, *gk, *gv; /* NULL when that input needs no gradient */
} head_io;

/* Scratch for one tile. Without dropout pd is p: the probabilities are
 * used as they are. */
typedef struct tile_buf {
    float *p, *pd, *dp; /* [tile, tile]: probabilities, after dropout, dL/d(dropped) */
    float *m, *l, *d;   /* [tile]: running max, running sum, row sums D */
} tile_buf;

/* Dropout factor of probability (bh, i, j). */
static inline float drop_factor(const core_saved *s, int64_t bh, int64_t i, int64_t j)
{
    if (!s->drop_below) return 1.0f;
    return attn_cell_hash(attn_row_key(s->seed, bh * s->N + i), j) < s->drop_below ? 0.0f : s->keep_scale;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* 0 for valid keys, -inf for padded ones; a set with no valid cell keeps
 * all its keys, so every softmax row has at least one finite entry. */
static float *key_bias(ast_ctx *c, const ast_tensor *mask, int64_t B, int64_t N)
{
    float *kb = ast_alloc(c, (size_t)(B * N) * sizeof(float));
    if (!mask) return kb;
    if (mask->size != B * N) {
        ast_log(AST_LOG_ERROR, "attention core: mask has %lld elements, expected [%lld, %lld]",
                (long long)mask->size, (long long)B, (long long)N);
        abort();
    }
    for (int64_t b = 0; b < B; b++) {
        const float *m = mask->data + b * N;
        int64_t valid = 0;
        for (int64_t j = 0; j < N; j++) valid += m[j] > 0.5f;
        if (valid)
            for (int64_t j = 0; j < N; j++) kb[b * N + j] = m[j] > 0.5f ? 0.0f : -INFINITY;
    }
    return kb;
}

/* ---- row kernels of the tiled path ---------------------------------------
 * Written so that -O3 vectorises them: restrict pointers, ast_expf instead
 * of libm's expf, comparisons instead of fmaxf, and the reductions kept in
 * LANES partial results (a plain float sum or max over one variable would
 * need reassociation, which the compiler may not do on its own). */

#define LANES 16

static float sum_row(const float *restrict x, int64_t n)
{
    float lane[LANES] = {0};
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        for (int k = 0; k < LANES; k++) lane[k] += x[c + k];
    float sum = 0.0f;
    for (; c < n; c++) sum += x[c];
    for (int k = 0; k < LANES; k++) sum += lane[k];
    return sum;
}

/* The larger of mx and max(row + kb) over [0, n). */
static float row_max(const float *restrict row, const float *restrict kb, int64_t n, float mx)
{
    float lane[LANES];
    for (int k = 0; k < LANES; k++) lane[k] = mx;
    int64_t c = 0;
    for (; c + LANES <= n; c += LANES)
        /* unrolled, this loop is not vectorised (GCC 12); as a loop it is */
#pragma GCC unroll 1
        for (int k = 0; k < LANES; k++) {
            float x = row[c + k] + kb[c + k];
            lane[k] = x > lane[k] ? x : lane[k];
        }
    for (; c < n; c++) {
        float x = row[c] + kb[c];
        mx = x > mx ? x : mx;
    }
    for (int k = 0; k < LANES; k++) mx = lane[k] > mx ? lane[k] : mx;
    return mx;
}

/* row = exp(row + kb - shift): the (unnormalised when shift is a running
 * max, normalised when it is the LSE) probabilities of one tile row. */
static void exp_row(float *restrict row, const float *restrict kb, int64_t n, float shift)
{
    for (int64_t c = 0; c < n; c++) row[c] = ast_expf(row[c] + kb[c] - shift);
}

/* pd = p * Z for query row i and keys [j0, j0 + n), as drop_factor with
 * the fields in locals, so the loop vectorises; only called with dropout. */
static void drop_row(const core_saved *s, int64_t bh, int64_t i, int64_t j0, const float *restrict p,
                     float *restrict pd, int64_t n)
{
    uint32_t key = attn_row_key(s->seed, bh * s->N + i), below = (uint32_t)s->drop_below;
    float keep = s->keep_scale;
    for (int64_t c = 0; c < n; c++) pd[c] = p[c] * (attn_cell_hash(key, j0 + c) < below ? 0.0f : keep);
}

/* dS = Pd * dPd - P * D for one row (see tile_grads), in place in dp. */
static void score_grad_row(const float *restrict p, const float *restrict pd, float *restrict dp, int64_t n,
                           float d)
{
    for (int64_t c = 0; c < n; c++) dp[c] = pd[c] * dp[c] - p[c] * d;
}

/* ---- tiled forward ------------------------------------------------------ */

/* Folds row r of a score tile (query i, keys from j0) into the running
 * max/sum; the row becomes the unnormalised probabilities, and t->pd's row
 * their dropped version for P V. The output row acc is rescaled when the
 * max grows. */
static void online_row(const core_saved *s, const head_io *io, const tile_buf *t, int64_t r, int64_t bc, int64_t i,
                       int64_t j0, float *acc)
{
    float *row = t->p + r * bc, m_old = t->m[r];
    float mx = row_max(row, io->kb + j0, bc, m_old);
    float shift = isinf(mx) ? 0.0f : mx; /* every key seen so far is padding */
    exp_row(row, io->kb + j0, bc, shift);
    float alpha = ast_expf(m_old - shift);
    t->l[r] = t->l[r] * alpha + sum_row(row, bc);
    t->m[r] = mx;
    if (s->drop_below) drop_row(s, io->bh, i, j0, row, t->pd + r * bc, bc);
    if (alpha != 1.0f)
        for (int64_t e = 0; e < s->dh; e++) acc[e] *= alpha;
}

static void tiled_forward_head(const core_saved *s, const head_io *io, const tile_buf *t)
{
    int64_t N = s->N, dh = s->dh;
    for (int64_t i0 = 0; i0 < N; i0 += s->tile) {
        int64_t br = min64(s->tile, N - i0);
        float *oi = io->o + i0 * dh;
        for (int64_t r = 0; r < br; r++) {
            t->m[r] = -INFINITY;
            t->l[r] = 0.0f;
        }
        for (int64_t j0 = 0; j0 < N; j0 += s->tile) {
            int64_t bc = min64(s->tile, N - j0);
            ast_sgemm(0, 1, (int)br, (int)bc, (int)dh, s->scale, io->q + i0 * dh, (int)dh, io->k + j0 * dh,
                      (int)dh, 0.0f, t->p, (int)bc);
            for (int64_t r = 0; r < br; r++) online_row(s, io, t, r, bc, i0 + r, j0, oi + r * dh);
            ast_sgemm(0, 0, (int)br, (int)dh, (int)bc, 1.0f, t->pd, (int)bc, io->v + j0 * dh, (int)dh, 1.0f, oi,
                      (int)dh);
        }
        for (int64_t r = 0; r < br; r++) {
            for (int64_t e = 0; e < dh; e++) oi[r * dh + e] /= t->l[r];
            io->rows[i0 + r] = t->m[r] + logf(t->l[r]);
        }
    }
}

/* ---- naive forward ------------------------------------------------------ */

static void naive_forward_head(const core_saved *s, const head_io *io, const tile_buf *t)
{
    int64_t N = s->N, dh = s->dh;
    float *p = io->rows;
    ast_sgemm(0, 1, (int)N, (int)N, (int)dh, s->scale, io->q, (int)dh, io->k, (int)dh, 0.0f, p, (int)N);
    for (int64_t i = 0; i < N; i++) {
        float *row = p + i * N, mx = -INFINITY, sum = 0.0f;
        for (int64_t j = 0; j < N; j++) {
            row[j] += io->kb[j];
            mx = fmaxf(mx, row[j]);
        }
        for (int64_t j = 0; j < N; j++) sum += row[j] = expf(row[j] - mx);
        for (int64_t j = 0; j < N; j++) {
            row[j] /= sum;
            t->pd[i * N + j] = row[j] * drop_factor(s, io->bh, i, j);
        }
    }
    ast_sgemm(0, 0, (int)N, (int)dh, (int)N, 1.0f, t->pd, (int)N, io->v, (int)dh, 0.0f, io->o, (int)dh);
}

/* ---- backward ----------------------------------------------------------- */

/* Gradients from one tile of query rows [i0, i0+br) and keys [j0, j0+bc),
 * given its probabilities P and dropped probabilities Pd in t. With
 * Pd = Z * P and O = Pd V: dV += Pd^T dO, dPd = dO V^T, and
 * dS = P * (Z dPd - D) = Pd * dPd - P * D with D_i = rowsum(dP * P); D
 * comes from t->d, or from this tile when it spans every key (have_d = 0). */
static void tile_grads(const core_saved *s, const head_io *io, const tile_buf *t, int64_t i0, int64_t br,
                       int64_t j0, int64_t bc, int have_d)
{
    int dh = (int)s->dh;
    const float *dout = io->dout + i0 * dh;
    if (io->gv) ast_sgemm(1, 0, (int)bc, dh, (int)br, 1.0f, t->pd, (int)bc, dout, dh, 1.0f, io->gv + j0 * dh, dh);
    if (!io->gq && !io->gk) return;
    ast_sgemm(0, 1, (int)br, (int)bc, dh, 1.0f, dout, dh, io->v + j0 * dh, dh, 0.0f, t->dp, (int)bc);
    for (int64_t r = 0; r < br; r++) {
        const float *p = t->p + r * bc, *pd = t->pd + r * bc;
        float *dp = t->dp + r * bc, d = 0.0f;
        if (have_d) d = t->d[r];
        else
            for (int64_t c = 0; c < bc; c++) d += pd[c] * dp[c];
        score_grad_row(p, pd, dp, bc, d);
    }
    if (io->gq)
        ast_sgemm(0, 0, (int)br, dh, (int)bc, s->scale, t->dp, (int)bc, io->k + j0 * dh, dh, 1.0f,
                  io->gq + i0 * dh, dh);
    if (io->gk)
        ast_sgemm(1, 0, (int)bc, dh, (int)br, s->scale, t->dp, (int)bc, io->q + i0 * dh, dh, 1.0f,
                  io->gk + j0 * dh, dh);
}

/* Recomputes P = exp(S + bias - LSE) and, with dropout, Pd for one tile
 * from Q, K and the LSE. */
static void recompute_tile(const core_saved *s, const head_io *io, const tile_buf *t, int64_t i0, int64_t br,
                           int64_t j0, int64_t bc)
{
    int dh = (int)s->dh;
    ast_sgemm(0, 1, (int)br, (int)bc, dh, s->scale, io->q + i0 * dh, dh, io->k + j0 * dh, dh, 0.0f, t->p,
              (int)bc);
    for (int64_t r = 0; r < br; r++) {
        float *p = t->p + r * bc;
        exp_row(p, io->kb + j0, bc, io->rows[i0 + r]);
        if (s->drop_below) drop_row(s, io->bh, i0 + r, j0, p, t->pd + r * bc, bc);
    }
}

static void tiled_backward_head(const core_saved *s, const head_io *io, const tile_buf *t)
{
    int64_t N = s->N, dh = s->dh;
    for (int64_t i0 = 0; i0 < N; i0 += s->tile) {
        int64_t br = min64(s->tile, N - i0);
        for (int64_t r = 0; r < br; r++) {
            const float *o = io->o + (i0 + r) * dh, *g = io->dout + (i0 + r) * dh;
            float d = 0.0f;
            for (int64_t e = 0; e < dh; e++) d += o[e] * g[e];
            t->d[r] = d;
        }
        for (int64_t j0 = 0; j0 < N; j0 += s->tile) {
            int64_t bc = min64(s->tile, N - j0);
            recompute_tile(s, io, t, i0, br, j0, bc);
            tile_grads(s, io, t, i0, br, j0, bc, 1);
        }
    }
}

static void naive_backward_head(const core_saved *s, const head_io *io, const tile_buf *t)
{
    int64_t N = s->N;
    tile_buf full = *t;
    full.p = io->rows;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++) t->pd[i * N + j] = full.p[i * N + j] * drop_factor(s, io->bh, i, j);
    tile_grads(s, io, &full, 0, N, 0, N, 0);
}

/* ---- driver ------------------------------------------------------------- */

/* The naive kernel's scratch: full N x N Pd and dPd; its probabilities live
 * in the saved rows. */
static tile_buf naive_buf(const core_saved *s, ast_ctx *c)
{
    size_t sq = (size_t)(s->N * s->N) * sizeof(float);
    return (tile_buf){.pd = ast_alloc(c, sq), .dp = ast_alloc(c, sq)};
}

/* Floats rounded up to whole cache lines, so every part of a slot stays
 * 64-byte aligned like the arena block it is cut from. */
static int64_t whole_lines(int64_t floats) { return (floats + 15) / 16 * 16; }

/* One slot of tiled scratch: P, dPd, Pd (with dropout only), m, l and D. */
static int64_t slot_floats(const core_saved *s)
{
    return (s->drop_below ? 3 : 2) * whole_lines(s->tile * s->tile) + 3 * whole_lines(s->tile);
}

static tile_buf slot_at(const core_saved *s, float *scratch, int64_t i)
{
    int64_t sq = whole_lines(s->tile * s->tile), row = whole_lines(s->tile);
    float *x = scratch + i * slot_floats(s);
    tile_buf t = {.p = x, .pd = x, .dp = x + sq};
    x += 2 * sq;
    if (s->drop_below) {
        t.pd = x;
        x += sq;
    }
    t.m = x;
    t.l = x + row;
    t.d = x + 2 * row;
    return t;
}

static head_io head_of(const core_saved *s, const ast_node *n, int64_t bh, float *gq, float *gk, float *gv)
{
    int64_t off = bh * s->N * s->dh;
    int64_t per_head = s->kernel == ATTN_KERNEL_TILED ? s->N : s->N * s->N;
    return (head_io){.bh = bh,
                     .q = n->in[0]->data + off,
                     .k = n->in[1]->data + off,
                     .v = n->in[2]->data + off,
                     .kb = s->key_bias + (bh / s->H) * s->N,
                     .o = n->out->data + off,
                     .rows = s->rows + bh * per_head,
                     .dout = n->out->grad ? n->out->grad + off : NULL,
                     .gq = gq ? gq + off : NULL,
                     .gk = gk ? gk + off : NULL,
                     .gv = gv ? gv + off : NULL};
}

typedef struct heads_job {
    const core_saved *s;
    const ast_node *n;
    float *gq, *gk, *gv; /* backward: as in head_io */
    float *scratch;      /* one slot per (set, head) */
    int backward;
} heads_job;

/* Heads [lo, hi) of the tiled kernel on one thread. The range works in the
 * slot of its first head: ranges are disjoint, so no two threads share a
 * slot, and the slots no range starts at are never touched. */
static void heads_range(void *arg, int64_t lo, int64_t hi)
{
    const heads_job *j = arg;
    tile_buf t = slot_at(j->s, j->scratch, lo);
    for (int64_t bh = lo; bh < hi; bh++) {
        head_io io = head_of(j->s, j->n, bh, j->gq, j->gk, j->gv);
        if (j->backward) tiled_backward_head(j->s, &io, &t);
        else tiled_forward_head(j->s, &io, &t);
    }
}

/* One pass over every (set, head). The tiled kernel runs the heads on the
 * host's threads: each writes only its own slices of O, the LSE and the
 * gradients, and its scratch is taken here because the arena must not be
 * used from the threads. The naive kernel, the reference, stays serial. */
static void run_heads(ast_ctx *c, const core_saved *s, const ast_node *n, float *gq, float *gk, float *gv,
                      int backward)
{
    int64_t heads = s->B * s->H;
    if (s->kernel == ATTN_KERNEL_TILED) {
        float *scratch = ast_alloc_uninit(c, (size_t)(heads * slot_floats(s)) * sizeof(float));
        ast_parallel_for(heads, 1, heads_range, &(heads_job){s, n, gq, gk, gv, scratch, backward});
        return;
    }
    tile_buf t = naive_buf(s, c);
    for (int64_t bh = 0; bh < heads; bh++) {
        head_io io = head_of(s, n, bh, gq, gk, gv);
        if (backward) naive_backward_head(s, &io, &t);
        else naive_forward_head(s, &io, &t);
    }
}

static void core_backward(ast_ctx *c, const ast_node *n)
{
    const core_saved *s = n->saved;
    run_heads(c, s, n, ast_grad(c, n->in[0]), ast_grad(c, n->in[1]), ast_grad(c, n->in[2]), 1);
}

static core_saved *saved_new(ast_ctx *c, const ast_tensor *q, const ast_tensor *mask, const attn_core_cfg *cfg)
{
    core_saved *s = ast_alloc(c, sizeof *s);
    s->B = q->shape[0];
    s->H = q->shape[1];
    s->N = q->shape[2];
    s->dh = q->shape[3];
    s->kernel = cfg->kernel;
    s->tile = min64(cfg->tile > 0 ? cfg->tile : 64, s->N > 0 ? s->N : 1);
    s->scale = 1.0f / sqrtf((float)s->dh);
    if (cfg->dropout > 0.0f) {
        const uint64_t *on_backend; /* a device kernel's copy; this one takes the key itself */
        s->seed = ast_rng_key(c, &on_backend);
        s->drop_below = attn_drop_below(cfg->dropout);
        s->keep_scale = 1.0f / (1.0f - cfg->dropout);
    }
    s->key_bias = key_bias(c, mask, s->B, s->N);
    int64_t per_head = s->kernel == ATTN_KERNEL_TILED ? s->N : s->N * s->N;
    s->rows = ast_alloc(c, (size_t)(s->B * s->H * per_head) * sizeof(float));
    return s;
}

static int same_shape(const ast_tensor *a, const ast_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

ast_tensor *attn_core(ast_ctx *c, ast_tensor *q, ast_tensor *k, ast_tensor *v, const ast_tensor *mask,
                      const attn_core_cfg *cfg)
{
    if (q->ndim != 4 || !same_shape(q, k) || !same_shape(q, v)) {
        ast_log(AST_LOG_ERROR, "attention core: q, k, v must share one [B, H, N, dh] shape");
        abort();
    }
    core_saved *s = saved_new(c, q, mask, cfg);
    ast_tensor *o = ast_zeros(c, 4, q->shape);
    ast_node n = {.op = "attn_core", .backward = core_backward, .out = o, .in = {q, k, v}, .n_in = 3, .saved = s};
    run_heads(c, s, &n, NULL, NULL, NULL, 0);
    ast_record(c, &n);
    return o;
}
