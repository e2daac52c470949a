/* attn_linear: the lucidrains LinearAttentionTransformer block (docs/model.md §2.5):
 * pre-norm linear attention (queries softmaxed over the head's features,
 * keys over the sequence, no normaliser) and a GELU feed-forward, each
 * with a residual. Parameter names follow its state_dict (docs/model.md §2.10a). */
#include <stdlib.h>

#include "alphast/plugin_api.h"

#define LN_EPS 1e-5f
#define FF_MULT 4

typedef struct linear_attn {
    int heads;
    ast_weights to_q, to_k, to_v, to_out, ln_attn; /* to_q, to_k, to_v: no bias */
    ast_weights w1, w2, ln_ff;
} linear_attn;

static void *linear_create(const ast_create_args *a, char *err, size_t errlen)
{
    const ast_layer_dims *d = a->dims;
    linear_attn *l = calloc(1, sizeof *l);
    AST_REQUIRE(l, err, errlen, "attention 'linear': out of memory");
    l->heads = d->heads;
    int E = d->d_model;
    ast_scope *s = a->scope;
    /* state_dict order: the attention PreNorm (fn before norm), then the FF PreNorm */
    l->to_q = ast_linear_params(s, "layers.layers.0.0.fn.to_q", E, E, 0);
    l->to_k = ast_linear_params(s, "layers.layers.0.0.fn.to_k", E, E, 0);
    l->to_v = ast_linear_params(s, "layers.layers.0.0.fn.to_v", E, E, 0);
    l->to_out = ast_linear_params(s, "layers.layers.0.0.fn.to_out", E, E, 1);
    l->ln_attn = ast_layernorm_params(s, "layers.layers.0.0.norm", E);
    l->w1 = ast_linear_params(s, "layers.layers.0.1.fn.fn.w1", E, FF_MULT * E, 1);
    l->w2 = ast_linear_params(s, "layers.layers.0.1.fn.fn.w2", FF_MULT * E, E, 1);
    l->ln_ff = ast_layernorm_params(s, "layers.layers.0.1.norm", E);
    return l;
}

/* h + to_out(merge(softmax_dh(q) * dh^-1/2 . (k^T v))) on the pre-normed a,
 * keys softmaxed over the sequence; padded cells get no weight (the key
 * mask bias). The core is one op (linear_attention): no head is split out. */
static ast_tensor *attention(const linear_attn *l, ast_ctx *c, ast_tensor *x, ast_tensor *mask)
{
    ast_tensor *a = ast_layernorm(c, x, l->ln_attn.weight, l->ln_attn.bias, LN_EPS);
    ast_tensor *q = ast_linear(c, a, l->to_q.weight, NULL);
    ast_tensor *k = ast_linear(c, a, l->to_k.weight, NULL);
    ast_tensor *v = ast_linear(c, a, l->to_v.weight, NULL);
    ast_tensor *bias = mask ? ast_key_mask_bias(c, mask, AST_MASKED_LOGIT) : NULL;
    ast_tensor *o = ast_linear_attention(c, q, k, v, bias, l->heads);
    return ast_add(c, x, ast_linear(c, o, l->to_out.weight, l->to_out.bias));
}

static ast_tensor *feed_forward(const linear_attn *l, ast_ctx *c, ast_tensor *x)
{
    ast_tensor *a = ast_layernorm(c, x, l->ln_ff.weight, l->ln_ff.bias, LN_EPS);
    ast_tensor *f = ast_linear(c, ast_gelu(c, ast_linear(c, a, l->w1.weight, l->w1.bias)), l->w2.weight, l->w2.bias);
    return ast_add(c, x, f);
}

static ast_tensor *linear_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    const linear_attn *l = self;
    return feed_forward(l, c, attention(l, c, x, a ? a->mask : NULL));
}

AST_PLUGIN(AST_KIND_ATTENTION, "linear", "1.0", "lucidrains linear-attention transformer block (pre-norm, GELU feed-forward)",
           .create = linear_create, .forward = linear_forward)
