/* The fused attention core: forward and backward of
 * O = Dropout(softmax(Q K^T / sqrt(dh) + key bias)) V, per (set, head).
 *
 * Tiled: the forward walks key tiles with an online softmax (running row
 * max m and sum l, the accumulated output rescaled when m grows) and keeps
 * only LSE = m + log l per row; the backward recomputes P = exp(S - LSE)
 * tile by tile and uses D = rowsum(dO * O), which equals rowsum(dP * P)
 * even with dropout, so no N x N buffer exists in either pass.
 * Naive: stores P and derives the row sums from the full tile instead,
 * which makes it an independent check of the tiled path. */
#include <math.h>
#include <stdlib.h>

#include "attn_gated_kernel.h"

typedef struct core_saved {
    const ast_host *host;
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

/* Scratch for one tile, reused across tiles and heads. */
typedef struct tile_buf {
    float *p, *pd, *dp; /* [tile, tile]: probabilities, after dropout, dL/d(dropped) */
    float *m, *l, *d;   /* [tile]: running max, running sum, row sums D */
} tile_buf;

/* Dropout factor of probability (bh, i, j): a splitmix64 hash of the cell's
 * flat index and the call's seed, so any pass can recompute it. */
static inline float drop_factor(const core_saved *s, int64_t bh, int64_t i, int64_t j)
{
    if (!s->drop_below) return 1.0f;
    uint64_t z = s->seed + ((uint64_t)((bh * s->N + i) * s->N + j) + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (z >> 40) < s->drop_below ? 0.0f : s->keep_scale;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* 0 for valid keys, -inf for padded ones; a set with no valid cell keeps
 * all its keys, so every softmax row has at least one finite entry. */
static float *key_bias(const ast_host *h, ast_ctx *c, const ast_tensor *mask, int64_t B, int64_t N)
{
    float *kb = h->alloc(c, (size_t)(B * N) * sizeof(float));
    if (!mask) return kb;
    if (mask->size != B * N) {
        h->log(AST_LOG_ERROR, "attention core: mask has %lld elements, expected [%lld, %lld]",
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

/* ---- tiled forward ------------------------------------------------------ */

/* Folds one row of a score tile into the running max/sum of query row i;
 * the row becomes the (dropped) unnormalised probabilities for P V. */
static void online_row(const core_saved *s, const head_io *io, float *row, int64_t bc, int64_t i, int64_t j0,
                       float *m, float *l, float *acc)
{
    float mx = *m;
    for (int64_t c = 0; c < bc; c++) {
        row[c] += io->kb[j0 + c];
        mx = fmaxf(mx, row[c]);
    }
    float shift = isinf(mx) ? 0.0f : mx; /* every key seen so far is padding */
    float alpha = expf(*m - shift), sum = 0.0f;
    for (int64_t c = 0; c < bc; c++) {
        float p = expf(row[c] - shift);
        sum += p;
        row[c] = p * drop_factor(s, io->bh, i, j0 + c);
    }
    *l = *l * alpha + sum;
    *m = mx;
    if (alpha != 1.0f)
        for (int64_t e = 0; e < s->dh; e++) acc[e] *= alpha;
}

static void tiled_forward_head(const core_saved *s, const head_io *io, const tile_buf *t)
{
    const ast_host *h = s->host;
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
            h->sgemm(0, 1, (int)br, (int)bc, (int)dh, s->scale, io->q + i0 * dh, (int)dh, io->k + j0 * dh,
                     (int)dh, 0.0f, t->p, (int)bc);
            for (int64_t r = 0; r < br; r++)
                online_row(s, io, t->p + r * bc, bc, i0 + r, j0, &t->m[r], &t->l[r], oi + r * dh);
            h->sgemm(0, 0, (int)br, (int)dh, (int)bc, 1.0f, t->p, (int)bc, io->v + j0 * dh, (int)dh, 1.0f, oi,
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
    s->host->sgemm(0, 1, (int)N, (int)N, (int)dh, s->scale, io->q, (int)dh, io->k, (int)dh, 0.0f, p, (int)N);
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
    s->host->sgemm(0, 0, (int)N, (int)dh, (int)N, 1.0f, t->pd, (int)N, io->v, (int)dh, 0.0f, io->o, (int)dh);
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
    const ast_host *h = s->host;
    int dh = (int)s->dh;
    const float *dout = io->dout + i0 * dh;
    if (io->gv) h->sgemm(1, 0, (int)bc, dh, (int)br, 1.0f, t->pd, (int)bc, dout, dh, 1.0f, io->gv + j0 * dh, dh);
    if (!io->gq && !io->gk) return;
    h->sgemm(0, 1, (int)br, (int)bc, dh, 1.0f, dout, dh, io->v + j0 * dh, dh, 0.0f, t->dp, (int)bc);
    for (int64_t r = 0; r < br; r++) {
        const float *p = t->p + r * bc, *pd = t->pd + r * bc;
        float *dp = t->dp + r * bc, d = 0.0f;
        if (have_d) d = t->d[r];
        else
            for (int64_t c = 0; c < bc; c++) d += pd[c] * dp[c];
        for (int64_t c = 0; c < bc; c++) dp[c] = pd[c] * dp[c] - p[c] * d;
    }
    if (io->gq)
        h->sgemm(0, 0, (int)br, dh, (int)bc, s->scale, t->dp, (int)bc, io->k + j0 * dh, dh, 1.0f,
                 io->gq + i0 * dh, dh);
    if (io->gk)
        h->sgemm(1, 0, (int)bc, dh, (int)br, s->scale, t->dp, (int)bc, io->q + i0 * dh, dh, 1.0f,
                 io->gk + j0 * dh, dh);
}

/* Recomputes P = exp(S + bias - LSE) and Pd for one tile from Q, K and the LSE. */
static void recompute_tile(const core_saved *s, const head_io *io, const tile_buf *t, int64_t i0, int64_t br,
                           int64_t j0, int64_t bc)
{
    int dh = (int)s->dh;
    s->host->sgemm(0, 1, (int)br, (int)bc, dh, s->scale, io->q + i0 * dh, dh, io->k + j0 * dh, dh, 0.0f, t->p,
                   (int)bc);
    for (int64_t r = 0; r < br; r++)
        for (int64_t c = 0; c < bc; c++) {
            float *p = t->p + r * bc + c;
            *p = expf(*p + io->kb[j0 + c] - io->rows[i0 + r]);
            t->pd[r * bc + c] = *p * drop_factor(s, io->bh, i0 + r, j0 + c);
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

/* Tiled: one tile of each kind. Naive: full N x N rows for Pd and dPd; its
 * probabilities live in the saved rows. */
static tile_buf tile_buf_new(const core_saved *s, ast_ctx *c)
{
    int tiled = s->kernel == ATTN_KERNEL_TILED;
    int64_t t = tiled ? s->tile : s->N;
    size_t sq = (size_t)(t * t) * sizeof(float), row = (size_t)t * sizeof(float);
    const ast_host *h = s->host;
    return (tile_buf){tiled ? h->alloc(c, sq) : NULL, h->alloc(c, sq), h->alloc(c, sq),
                      h->alloc(c, row), h->alloc(c, row), h->alloc(c, row)};
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

static void core_backward(ast_ctx *c, const ast_node *n)
{
    const core_saved *s = n->saved;
    const ast_host *h = s->host;
    float *gq = h->grad(c, n->in[0]), *gk = h->grad(c, n->in[1]), *gv = h->grad(c, n->in[2]);
    tile_buf t = tile_buf_new(s, c);
    for (int64_t bh = 0; bh < s->B * s->H; bh++) {
        head_io io = head_of(s, n, bh, gq, gk, gv);
        if (s->kernel == ATTN_KERNEL_TILED) tiled_backward_head(s, &io, &t);
        else naive_backward_head(s, &io, &t);
    }
}

static core_saved *saved_new(const ast_host *h, ast_ctx *c, const ast_tensor *q, const ast_tensor *mask,
                             const attn_core_cfg *cfg)
{
    core_saved *s = h->alloc(c, sizeof *s);
    s->host = h;
    s->B = q->shape[0];
    s->H = q->shape[1];
    s->N = q->shape[2];
    s->dh = q->shape[3];
    s->kernel = cfg->kernel;
    s->tile = min64(cfg->tile > 0 ? cfg->tile : 64, s->N > 0 ? s->N : 1);
    s->scale = 1.0f / sqrtf((float)s->dh);
    if (cfg->dropout > 0.0f) {
        s->seed = h->rng_u64(c);
        s->drop_below = (uint64_t)((double)cfg->dropout * 16777216.0);
        s->keep_scale = 1.0f / (1.0f - cfg->dropout);
    }
    s->key_bias = key_bias(h, c, mask, s->B, s->N);
    int64_t per_head = s->kernel == ATTN_KERNEL_TILED ? s->N : s->N * s->N;
    s->rows = h->alloc(c, (size_t)(s->B * s->H * per_head) * sizeof(float));
    return s;
}

static int same_shape(const ast_tensor *a, const ast_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

ast_tensor *attn_core(const ast_host *host, ast_ctx *c, ast_tensor *q, ast_tensor *k, ast_tensor *v,
                      const ast_tensor *mask, const attn_core_cfg *cfg)
{
    if (q->ndim != 4 || !same_shape(q, k) || !same_shape(q, v)) {
        host->log(AST_LOG_ERROR, "attention core: q, k, v must share one [B, H, N, dh] shape");
        abort();
    }
    core_saved *s = saved_new(host, c, q, mask, cfg);
    ast_tensor *o = host->zeros(c, 4, q->shape);
    ast_node n = {.op = "attn_core", .backward = core_backward, .out = o, .in = {q, k, v}, .n_in = 3, .saved = s};
    tile_buf t = tile_buf_new(s, c);
    for (int64_t bh = 0; bh < s->B * s->H; bh++) {
        head_io io = head_of(s, &n, bh, NULL, NULL, NULL);
        if (s->kernel == ATTN_KERNEL_TILED) tiled_forward_head(s, &io, &t);
        else naive_forward_head(s, &io, &t);
    }
    host->record(c, &n);
    return o;
}
