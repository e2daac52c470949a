/* attn_gated: GatedMultiHeadAttention (docs/model.md §2.6). Softmax attention whose
 * output is scaled per head (or per feature) by a sigmoid gate predicted
 * from the token by extra columns of q_proj, optionally with RMSNorm on
 * each head's queries and keys. The attention core is one fused op
 * (attn_gated_kernel.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn_gated_kernel.h"
#include "attn_util.h"

#define QK_NORM_EPS 1e-6f

enum { GATE_HEADWISE, GATE_ELEMENTWISE, GATE_NONE };
enum { OPT_GATE_TYPE, OPT_QK_NORM, OPT_KERNEL, OPT_TILE };

static const ast_option_spec options[] = {
    [OPT_GATE_TYPE] = {"gate_type", AST_OPT_ENUM, "headwise", 0, -1, "headwise|elementwise|none",
                       "sigmoid gate on the attention output: one per head and token, one per feature, or none"},
    [OPT_QK_NORM] = {"use_qk_norm", AST_OPT_BOOL, "true", 0, -1, NULL,
                     "RMSNorm (eps 1e-6, weight shared by the heads) on queries and keys"},
    [OPT_KERNEL] = {"kernel", AST_OPT_ENUM, "tiled", 0, -1, "tiled|naive",
                    "tiled: FlashAttention-2 style, memory O(N) per head; naive: stores the N x N probabilities"},
    [OPT_TILE] = {"tile_size", AST_OPT_INT, "128", 1, 4096, NULL,
                  "query and key rows per tile of the tiled kernel (memory per head grows as its square)"},
};

typedef struct gated {
    const ast_host *host;
    int d_model, heads, gate_type, qk_norm;
    float dropout;
    attn_core_cfg core;
    ast_tensor *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo;
    ast_tensor *q_norm, *k_norm; /* NULL without qk-norm */
} gated;

/* Extra q_proj columns holding the gate scores. */
static int gate_width(const gated *g)
{
    if (g->gate_type == GATE_HEADWISE) return g->heads;
    return g->gate_type == GATE_ELEMENTWISE ? g->d_model : 0;
}

static void *gated_create(const ast_create_args *a, char *err, size_t errlen)
{
    if (!attn_check_dims(a->dims, "gated", err, errlen)) return NULL;
    const ast_host *h = a->host;
    gated *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "attention 'gated': out of memory");
        return NULL;
    }
    g->host = h;
    g->d_model = a->dims->d_model;
    g->heads = a->dims->heads;
    g->dropout = a->dims->dropout;
    g->gate_type = (int)a->opts[OPT_GATE_TYPE].i;
    g->qk_norm = a->opts[OPT_QK_NORM].i != 0;
    g->core.kernel = a->opts[OPT_KERNEL].i == 1 ? ATTN_KERNEL_NAIVE : ATTN_KERNEL_TILED;
    g->core.tile = (int)a->opts[OPT_TILE].i;

    int E = g->d_model;
    attn_linear_params(h, a->scope, "q_proj", E, E + gate_width(g), &g->wq, &g->bq);
    attn_linear_params(h, a->scope, "k_proj", E, E, &g->wk, &g->bk);
    attn_linear_params(h, a->scope, "v_proj", E, E, &g->wv, &g->bv);
    attn_linear_params(h, a->scope, "o_proj", E, E, &g->wo, &g->bo);
    if (g->qk_norm) {
        int64_t dh = E / g->heads;
        g->q_norm = h->param(a->scope, "q_norm.weight", 1, &dh, AST_INIT_ONE, 0.0f);
        g->k_norm = h->param(a->scope, "k_norm.weight", 1, &dh, AST_INIT_ONE, 0.0f);
    }
    return g;
}

static void gated_destroy(void *self) { free(self); }

/* [B, N, E] projection -> [B, H, N, dh], RMS-normalised when asked. */
static ast_tensor *heads_of(const gated *g, ast_ctx *c, ast_tensor *x, ast_tensor *norm_w)
{
    ast_tensor *t = g->host->ops->split_heads(c, x, g->heads);
    return norm_w ? g->host->ops->rmsnorm(c, t, norm_w, QK_NORM_EPS) : t;
}

/* For the gate_activation monitor, per layer: attn.gate_mean [1] and
 * attn.gate_std [1] (population) of the sigmoid gate factors gate
 * [B, H, N, w] over the valid cells. */
static void publish_gate_stats(const gated *g, ast_ctx *c, const ast_tensor *gate, const ast_fwd_args *a)
{
    const ast_tensor *mask = a ? a->mask : NULL;
    int64_t n = gate->shape[2], w = gate->shape[3], per_set = gate->shape[1] * n * w;
    double sum = 0.0, sq = 0.0, count = 0.0;
    for (int64_t i = 0; i < gate->size; i++) {
        if (mask && mask->data[(i / per_set) * n + (i / w) % n] == 0.0f) continue;
        sum += gate->data[i];
        sq += (double)gate->data[i] * gate->data[i];
        count += 1.0;
    }
    if (count == 0.0) return;
    double mean = sum / count, var = sq / count - mean * mean;
    float mean_f = (float)mean, std_f = var > 0.0 ? (float)sqrt(var) : 0.0f;
    g->host->stat(c, "attn.gate_mean", a ? a->layer : -1, &mean_f, 1);
    g->host->stat(c, "attn.gate_std", a ? a->layer : -1, &std_f, 1);
}

/* Scales o [B, H, N, dh] by sigmoid of the gate columns of q_proj's output. */
static ast_tensor *apply_gate(const gated *g, ast_ctx *c, ast_tensor *qg, ast_tensor *o, const ast_fwd_args *a)
{
    const ast_host *h = g->host;
    if (g->gate_type == GATE_NONE) return o;
    ast_tensor *score = h->ops->slice(c, qg, g->d_model, gate_width(g));
    if (g->gate_type == GATE_HEADWISE) {
        /* [B, N, H] -> [B, H, N, 1]: one factor per head and token */
        const int64_t *s = score->shape;
        score = h->ops->reshape(c, score, 4, (int64_t[]){s[0], s[1], s[2], 1});
        score = h->ops->permute(c, score, (int[]){0, 2, 1, 3});
    } else {
        score = h->ops->split_heads(c, score, g->heads);
    }
    ast_tensor *gate = h->ops->sigmoid(c, score);
    publish_gate_stats(g, c, gate, a);
    return h->ops->mul(c, o, gate);
}

static ast_tensor *gated_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    const gated *g = self;
    const ast_host *h = g->host;
    ast_tensor *qg = h->ops->linear(c, x, g->wq, g->bq);
    ast_tensor *q = gate_width(g) ? h->ops->slice(c, qg, 0, g->d_model) : qg;
    ast_tensor *Q = heads_of(g, c, q, g->q_norm);
    ast_tensor *K = heads_of(g, c, h->ops->linear(c, x, g->wk, g->bk), g->k_norm);
    ast_tensor *V = heads_of(g, c, h->ops->linear(c, x, g->wv, g->bv), NULL);

    attn_core_cfg core = g->core;
    core.dropout = h->training(c) ? g->dropout : 0.0f;
    ast_tensor *o = attn_core(h, c, Q, K, V, a ? a->mask : NULL, &core);
    o = apply_gate(g, c, qg, o, a);
    return h->ops->linear(c, h->ops->merge_heads(c, o), g->wo, g->bo);
}

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_ATTENTION, "gated", "1.0",
                         "gated multi-head softmax attention (sigmoid output gate, QK RMSNorm, fused tiled core)"),
    .options = options,
    .n_options = AST_N_OPTIONS(options),
    .create = gated_create,
    .destroy = gated_destroy,
    .forward = gated_forward,
};

AST_PLUGIN_DEFINE(desc)
