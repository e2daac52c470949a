/* attn_linear: the lucidrains LinearAttentionTransformer block (docs/model.md §2.5):
 * pre-norm linear attention (queries softmaxed over the head's features,
 * keys over the sequence, no normaliser) and a GELU feed-forward, each
 * with a residual. Parameter names follow its state_dict (docs/model.md §2.10a). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attn_util.h"

#define LN_EPS 1e-5f
#define FF_MULT 4
/* Subtracted from padded cells' key logits: their exp underflows to exactly
 * 0, while valid logits get + 0 and keep their exact values. */
#define MASKED_LOGIT 1e9f

typedef struct linear_attn {
    const ast_host *host;
    int heads;
    ast_tensor *wq, *wk, *wv, *wo, *bo, *ln_attn_w, *ln_attn_b;
    ast_tensor *w1, *b1, *w2, *b2, *ln_ff_w, *ln_ff_b;
} linear_attn;

static void layernorm_params(const ast_host *h, ast_scope *s, const char *prefix, int64_t E, ast_tensor **w,
                             ast_tensor **b)
{
    char name[128];
    snprintf(name, sizeof name, "%s.weight", prefix);
    *w = h->param(s, name, 1, &E, AST_INIT_ONE, 0.0f);
    snprintf(name, sizeof name, "%s.bias", prefix);
    *b = h->param(s, name, 1, &E, AST_INIT_ZERO, 0.0f);
}

static void *linear_create(const ast_create_args *a, char *err, size_t errlen)
{
    if (!attn_check_dims(a->dims, "linear", err, errlen)) return NULL;
    const ast_host *h = a->host;
    linear_attn *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "attention 'linear': out of memory");
        return NULL;
    }
    l->host = h;
    l->heads = a->dims->heads;
    int E = a->dims->d_model;
    ast_scope *s = a->scope;
    /* state_dict order: the attention PreNorm (fn before norm), then the FF PreNorm */
    attn_linear_params(h, s, "layers.layers.0.0.fn.to_q", E, E, &l->wq, NULL);
    attn_linear_params(h, s, "layers.layers.0.0.fn.to_k", E, E, &l->wk, NULL);
    attn_linear_params(h, s, "layers.layers.0.0.fn.to_v", E, E, &l->wv, NULL);
    attn_linear_params(h, s, "layers.layers.0.0.fn.to_out", E, E, &l->wo, &l->bo);
    layernorm_params(h, s, "layers.layers.0.0.norm", E, &l->ln_attn_w, &l->ln_attn_b);
    attn_linear_params(h, s, "layers.layers.0.1.fn.fn.w1", E, FF_MULT * E, &l->w1, &l->b1);
    attn_linear_params(h, s, "layers.layers.0.1.fn.fn.w2", FF_MULT * E, E, &l->w2, &l->b2);
    layernorm_params(h, s, "layers.layers.0.1.norm", E, &l->ln_ff_w, &l->ln_ff_b);
    return l;
}

static void linear_destroy(void *self) { free(self); }

/* Keys [B, H, N, dh] softmaxed over the sequence; padded cells get no weight. */
static ast_tensor *key_softmax(const linear_attn *l, ast_ctx *c, ast_tensor *k, ast_tensor *mask)
{
    const ast_host *h = l->host;
    if (mask) {
        ast_tensor *m = h->ops->reshape(c, mask, 4, (int64_t[]){k->shape[0], 1, k->shape[2], 1});
        k = h->ops->add(c, k, h->ops->affine(c, m, MASKED_LOGIT, -MASKED_LOGIT));
    }
    return h->ops->softmax(c, k, 2);
}

/* h + to_out(merge(softmax_dh(q) * dh^-1/2 . (k^T v))) on the pre-normed a. */
static ast_tensor *attention(const linear_attn *l, ast_ctx *c, ast_tensor *x, ast_tensor *mask)
{
    const ast_host *h = l->host;
    ast_tensor *a = h->ops->layernorm(c, x, l->ln_attn_w, l->ln_attn_b, LN_EPS);
    ast_tensor *q = h->ops->split_heads(c, h->ops->linear(c, a, l->wq, NULL), l->heads);
    ast_tensor *k = h->ops->split_heads(c, h->ops->linear(c, a, l->wk, NULL), l->heads);
    ast_tensor *v = h->ops->split_heads(c, h->ops->linear(c, a, l->wv, NULL), l->heads);
    q = h->ops->affine(c, h->ops->softmax(c, q, -1), 1.0f / sqrtf((float)q->shape[3]), 0.0f);
    k = key_softmax(l, c, k, mask);
    ast_tensor *context = h->ops->bmm(c, k, v, 1, 0); /* [B, H, dh, dh] */
    ast_tensor *o = h->ops->merge_heads(c, h->ops->bmm(c, q, context, 0, 0));
    return h->ops->add(c, x, h->ops->linear(c, o, l->wo, l->bo));
}

static ast_tensor *feed_forward(const linear_attn *l, ast_ctx *c, ast_tensor *x)
{
    const ast_host *h = l->host;
    ast_tensor *a = h->ops->layernorm(c, x, l->ln_ff_w, l->ln_ff_b, LN_EPS);
    ast_tensor *f = h->ops->linear(c, h->ops->gelu(c, h->ops->linear(c, a, l->w1, l->b1)), l->w2, l->b2);
    return h->ops->add(c, x, f);
}

static ast_tensor *linear_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    const linear_attn *l = self;
    return feed_forward(l, c, attention(l, c, x, a ? a->mask : NULL));
}

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_ATTENTION, "linear", "1.0",
                         "lucidrains linear-attention transformer block (pre-norm, GELU feed-forward)"),
    .create = linear_create,
    .destroy = linear_destroy,
    .forward = linear_forward,
};

AST_PLUGIN_DEFINE(desc)
