/* The CPU kernels of linear_attention (ops/dispatch_attention.c). q, k,
 * v, the output and their gradients stay [B, N, E] with E = H dh: a head
 * is a block of dh columns, read and written with row stride E, so no
 * head is split out or merged back (only the softmaxed keys are kept per
 * head, contiguous: keys_range). The work goes to the pool as items of two kinds: (set, head) for
 * what sums over the cells (the key softmax, the context K^T V and their
 * gradients), and (set, block of cells) for what is per cell (the query
 * softmax, Q C and its gradient), so that 16 threads find B H and
 * B N / ROW_BLOCK items. Each item's small GEMMs run on its own thread
 * (ast_gemm stays on the calling thread inside a pool range). The
 * softmaxes are ops_norm.c's loops, so the result is the unfused ops'
 * up to the GEMMs' summation order. */
#include "engine/backend.h"
#include "ops_softmax.h"

/* Cells per per-cell item: a [64, dh] block of each head, in cache
 * between its softmax and its GEMM. */
#define ROW_BLOCK 64

typedef struct attn_args {
    const float *q, *k, *v, *bias, *dout;
    float *qs;           /* softmax_dh(q) dh^-1/2, [B, N, E] */
    float *ks;           /* softmax_N(k + bias), per (set, head) a contiguous [N, dh] */
    float *ctx, *dctx;   /* per (set, head): ks^T v and its gradient, [dh, dh] */
    float *out, *d;      /* the output; the backward's dqs ([B, N, E]), then dks (as ks) */
    float *gq, *gk, *gv; /* the inputs' gradients, or NULL */
    int assign_q, assign_k, assign_v;
    float *scratch; /* per (set, head): 2 dh floats for the softmax's column statistics */
    int64_t b, n, e, heads, dh, blocks;
    float scale;
    ast_precision p;
} attn_args;

/* What a node says of its shapes; saved (the forward's qs, ks, ctx and
 * scratch) is carved from one block. */
static attn_args args_of(ast_ctx *c, const ast_node *n, float *saved)
{
    const ast_tensor *q = n->in[0];
    attn_args a = {.q = q->data, .k = n->in[1]->data, .v = n->in[2]->data, .bias = n->n_in > 3 ? n->in[3]->data : NULL,
                   .b = q->shape[0], .n = q->shape[1], .e = q->shape[2], .heads = n->iarg[0],
                   .scale = n->farg[0], .p = ast_ctx_precision(c)};
    a.dh = a.e / a.heads;
    a.blocks = (a.n + ROW_BLOCK - 1) / ROW_BLOCK;
    a.qs = saved, a.ks = a.qs + a.b * a.n * a.e, a.ctx = a.ks + a.b * a.n * a.e;
    a.scratch = a.ctx + a.b * a.heads * a.dh * a.dh;
    return a;
}

static size_t saved_floats(const ast_tensor *q, int64_t heads)
{
    int64_t dh = q->shape[2] / heads;
    return (size_t)(2 * q->size + q->shape[0] * heads * dh * (dh + 2));
}

/* Item i = (set, head): where its column block starts in [B, N, E]. */
static int64_t head_at(const attn_args *a, int64_t i) { return i / a->heads * a->n * a->e + i % a->heads * a->dh; }

/* (set, head): the keys copied out contiguous, shifted by the bias (as
 * add does it), softmaxed down the cells in place, and the context
 * ks^T v. Contiguous because the softmax walks the block three times: at
 * row stride E (often a power of two: 1 KB at the reference size) its
 * rows fall into 1/16 of the cache's sets, so a [512, 32] block (64 KB)
 * would not stay in a 512 KB 8-way L2 between the walks. */
static void keys_range(void *arg, int64_t lo, int64_t hi)
{
    const attn_args *a = arg;
    int64_t dh = a->dh;
    for (int64_t i = lo; i < hi; i++) {
        int64_t at = head_at(a, i), set = i / a->heads;
        const float *k = a->k + at;
        float *ks = a->ks + i * a->n * dh, *stats = a->scratch + 2 * i * dh;
        for (int64_t r = 0; r < a->n; r++) {
            float shift = a->bias ? a->bias[set * a->n + r] : 0.0f;
            for (int64_t j = 0; j < dh; j++) ks[r * dh + j] = a->bias ? k[r * a->e + j] + shift : k[r * a->e + j];
        }
        ast_softmax_slab(ks, ks, a->n, dh, 0, dh, stats, stats + dh);
        ast_gemm(a->p, 1, 0, (int)dh, (int)dh, (int)a->n, ks, (int)dh, a->v + at, (int)a->e, 0.0f, a->ctx + i * dh * dh,
                 (int)dh, NULL);
    }
}

/* Item i = (set, block of cells): its first element and its rows. */
static int64_t block_at(const attn_args *a, int64_t i, int *rows)
{
    int64_t first = i % a->blocks * ROW_BLOCK;
    *rows = (int)(a->n - first < ROW_BLOCK ? a->n - first : ROW_BLOCK);
    return (i / a->blocks * a->n + first) * a->e;
}

/* (set, block): the queries softmaxed along each head's features and
 * scaled (softmax then affine, the same float operations), row by row
 * across the heads so that q is read in order; then each head's block of
 * the output, qs ctx, while the block of qs is in cache. */
static void queries_range(void *arg, int64_t lo, int64_t hi)
{
    const attn_args *a = arg;
    for (int64_t i = lo; i < hi; i++) {
        int rows;
        int64_t at = block_at(a, i, &rows), set = i / a->blocks;
        for (int64_t o = at; o < at + rows * a->e; o += a->dh) {
            float *y = a->qs + o;
            ast_softmax_row(a->q + o, y, a->dh);
            for (int64_t j = 0; j < a->dh; j++) y[j] *= a->scale; /* affine's y scale + 0: y >= 0 */
        }
        for (int64_t h = 0; h < a->heads; h++)
            ast_gemm(a->p, 0, 0, rows, (int)a->dh, (int)a->dh, a->qs + at + h * a->dh, (int)a->e,
                     a->ctx + (set * a->heads + h) * a->dh * a->dh, (int)a->dh, 0.0f, a->out + at + h * a->dh,
                     (int)a->e, NULL);
    }
}

/* saved (on the tape only): qs, ks, ctx and the scratch, one block. */
static void linear_attention_forward(ast_ctx *c, ast_node *n)
{
    size_t floats = saved_floats(n->in[0], n->iarg[0]);
    attn_args a = args_of(c, n, ast_alloc_uninit(c, floats * sizeof(float)));
    a.out = n->out->data;
    n->saved = ast_needs_grad(c, n->in, n->n_in) ? a.qs : NULL;
    if (!a.n) return; /* no cells: the output is empty */
    ast_parallel_for(a.b * a.heads, ast_row_grain(a.n * a.dh), keys_range, &a);
    ast_parallel_for(a.b * a.blocks, ast_row_grain(ROW_BLOCK * a.e), queries_range, &a);
}

/* The query softmax's backward from qs = s dh^-1/2 (s the softmax) and
 * g = dL/dqs: dq = s (g - <g, s>) dh^-1/2 = qs (g - <g, qs> / scale). */
static void query_row_backward(const float *qs, const float *g, float *dq, int64_t dh, float scale, int assign)
{
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < dh; j++) dot += g[j] * qs[j];
    dot /= scale;
    for (int64_t j = 0; j < dh; j++) {
        float v = qs[j] * (g[j] - dot);
        dq[j] = assign ? v : dq[j] + v;
    }
}

/* (set, block): per head dqs = dout ctx^T into d, then dq row by row
 * across the heads (in memory order, as the forward's softmax). */
static void queries_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const attn_args *a = arg;
    for (int64_t i = lo; i < hi; i++) {
        int rows;
        int64_t at = block_at(a, i, &rows), set = i / a->blocks;
        for (int64_t h = 0; h < a->heads; h++)
            ast_gemm(a->p, 0, 1, rows, (int)a->dh, (int)a->dh, a->dout + at + h * a->dh, (int)a->e,
                     a->ctx + (set * a->heads + h) * a->dh * a->dh, (int)a->dh, 0.0f, a->d + at + h * a->dh,
                     (int)a->e, NULL);
        for (int64_t o = at; o < at + rows * a->e; o += a->dh)
            query_row_backward(a->qs + o, a->d + o, a->gq + o, a->dh, a->scale, a->assign_q);
    }
}

/* (set, head): dctx = qs^T dout; dks = v dctx^T (contiguous, in d), the
 * key softmax's backward in place there, then written or added into dk;
 * dv = ks dctx. dk before dv: where k and v are one tensor, dk is written
 * first and dv added (ast_op_grads). */
static void keys_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const attn_args *a = arg;
    int dh = (int)a->dh, e = (int)a->e, n = (int)a->n;
    for (int64_t i = lo; i < hi; i++) {
        int64_t at = head_at(a, i);
        float *dctx = a->dctx + i * dh * dh, *ks = a->ks + i * n * dh, *dks = a->d + i * n * dh;
        ast_gemm(a->p, 1, 0, dh, dh, n, a->qs + at, e, a->dout + at, e, 0.0f, dctx, dh, NULL);
        if (a->gk) {
            ast_gemm(a->p, 0, 1, n, dh, dh, a->v + at, e, dctx, dh, 0.0f, dks, dh, NULL);
            ast_softmax_slab_backward(ks, dks, dks, n, dh, 0, dh, a->scratch + 2 * i * dh, 1);
            for (int64_t r = 0; r < n; r++) {
                float *dk = a->gk + at + r * e;
                for (int64_t j = 0; j < dh; j++) dk[j] = a->assign_k ? dks[r * dh + j] : dk[j] + dks[r * dh + j];
            }
        }
        if (a->gv) ast_gemm(a->p, 0, 0, n, dh, dh, ks, dh, dctx, dh, a->assign_v ? 0.0f : 1.0f, a->gv + at, e, NULL);
    }
}

/* q's gradient first, then k's and v's: the order ast_op_grads asks where
 * inputs are one tensor. The bias gets none. */
static void linear_attention_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    attn_args a = args_of(c, n, n->saved);
    a.dout = n->out->grad;
    a.gq = g->g[0], a.gk = g->g[1], a.gv = g->g[2];
    a.assign_q = g->assign[0], a.assign_k = g->assign[1], a.assign_v = g->assign[2];
    if (!a.n || !(a.gq || a.gk || a.gv)) return;
    a.d = ast_alloc_uninit(c, (size_t)(n->out->size + a.b * a.heads * a.dh * a.dh) * sizeof(float));
    a.dctx = a.d + n->out->size;
    if (a.gq) ast_parallel_for(a.b * a.blocks, ast_row_grain(ROW_BLOCK * a.e), queries_backward_range, &a);
    if (a.gk || a.gv) ast_parallel_for(a.b * a.heads, ast_row_grain(a.n * a.dh), keys_backward_range, &a);
}

void ast_cpu_attention_kernels(ast_op_kernel *t)
{
    t[AST_OP_linear_attention] =
        (ast_op_kernel){.forward = linear_attention_forward, .backward = linear_attention_backward, .assigns = 7};
}
