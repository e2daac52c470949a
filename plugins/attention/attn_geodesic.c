/* attn_geodesic: multi-head softmax attention whose logits are biased
 * towards cells near each other in expression (docs/model.md §2.12): head
 * h adds -w_h * g_ij, g the geodesic distance between cells i and j along
 * the set's expression k-NN graph over its mean (ast_fwd_args.geodesic,
 * ABI 2.5, which the host computes because the descriptor asks for it).
 * w_h is learned per head from `bias_init`; w_h = 0 is plain softmax
 * attention. Built from host ops (the N x N logits are stored, as the
 * gated plugin's naive kernel stores them), so the backward comes from the
 * tape and it runs on every backend. */
#include <math.h>
#include <stdlib.h>

#include "alphast/plugin_api.h"

/* Subtracted from padded cells' key logits: their exp underflows to 0
 * while valid logits keep their exact values (as attn_linear). */
#define MASKED_LOGIT 1e9f

enum { OPT_BIAS_INIT };

static const ast_option_spec options[] = {
    [OPT_BIAS_INIT] = {"bias_init", AST_OPT_FLOAT, "1.0", 0.0, 100.0, NULL,
                       "initial per-head weight w of the logit bias -w * geodesic distance (over its mean); "
                       "0 starts as plain softmax attention"},
};

typedef struct geodesic_attn {
    int heads;
    float dropout;
    ast_weights q_proj, k_proj, v_proj, o_proj;
    ast_tensor *bias_weight; /* [H] */
} geodesic_attn;

static void *geodesic_create(const ast_create_args *a, char *err, size_t errlen)
{
    const ast_layer_dims *d = a->dims;
    AST_REQUIRE(d->d_model > 0 && d->heads > 0 && d->d_model % d->heads == 0, err, errlen,
                "attention 'geodesic': d_model %d is not a positive multiple of num_heads %d; "
                "choose num_heads dividing d_model",
                d->d_model, d->heads);
    geodesic_attn *g = calloc(1, sizeof *g);
    AST_REQUIRE(g, err, errlen, "attention 'geodesic': out of memory");
    g->heads = d->heads;
    g->dropout = d->dropout;
    int E = d->d_model;
    g->q_proj = ast_linear_params(a->scope, "q_proj", E, E, 1);
    g->k_proj = ast_linear_params(a->scope, "k_proj", E, E, 1);
    g->v_proj = ast_linear_params(a->scope, "v_proj", E, E, 1);
    g->o_proj = ast_linear_params(a->scope, "o_proj", E, E, 1);
    int64_t h = d->heads;
    g->bias_weight = ast_param(a->scope, "geodesic_bias.weight", 1, &h, AST_INIT_ONE, 0.0f);
    float init = (float)a->opts[OPT_BIAS_INIT].f;
    for (int i = 0; i < d->heads; i++) g->bias_weight->data[i] = init; /* created on the host, moved later */
    return g;
}

static void geodesic_destroy(void *self) { free(self); }

/* logits [B, H, N, N] - w [1, H, 1, 1] * geodesic [B, 1, N, N]. */
static ast_tensor *geodesic_bias(const geodesic_attn *g, ast_ctx *c, ast_tensor *logits, ast_tensor *geodesic)
{
    int64_t b = geodesic->shape[0], n = geodesic->shape[1];
    ast_tensor *geo = ast_reshape(c, geodesic, 4, (int64_t[]){b, 1, n, n});
    ast_tensor *w = ast_reshape(c, g->bias_weight, 4, (int64_t[]){1, g->heads, 1, 1});
    return ast_sub(c, logits, ast_mul(c, geo, w));
}

static ast_tensor *geodesic_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    const geodesic_attn *g = self;
    int64_t dh = x->shape[2] / g->heads;
    ast_tensor *Q = ast_split_heads(c, ast_linear(c, x, g->q_proj.weight, g->q_proj.bias), g->heads);
    ast_tensor *K = ast_split_heads(c, ast_linear(c, x, g->k_proj.weight, g->k_proj.bias), g->heads);
    ast_tensor *V = ast_split_heads(c, ast_linear(c, x, g->v_proj.weight, g->v_proj.bias), g->heads);
    ast_tensor *logits = ast_affine(c, ast_bmm(c, Q, K, 0, 1), 1.0f / sqrtf((float)dh), 0.0f);
    if (a && a->geodesic) logits = geodesic_bias(g, c, logits, a->geodesic);
    if (a && a->mask) logits = ast_add(c, logits, ast_key_mask_bias(c, a->mask, MASKED_LOGIT));
    ast_tensor *p = ast_dropout(c, ast_softmax(c, logits, -1), g->dropout);
    ast_tensor *o = ast_merge_heads(c, ast_bmm(c, p, V, 0, 0));
    return ast_linear(c, o, g->o_proj.weight, g->o_proj.bias);
}

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_ATTENTION, "geodesic", "1.0",
                         "softmax attention biased per head by the expression k-NN graph's geodesic distances"),
    .options = options,
    .n_options = AST_N_OPTIONS(options),
    .create = geodesic_create,
    .destroy = geodesic_destroy,
    .forward = geodesic_forward,
    .wants_geodesic = 1,
};

AST_API_DEFINE;
AST_PLUGIN_DEFINE(desc)
