/* attn_distbias: an example out-of-tree attention plugin.
 *
 * Multi-head softmax attention whose logits get a learned bias from the
 * distance between the two cells:
 *
 *     logit_hij = q_hi . k_hj / sqrt(dh) + b_h(d_ij)
 *     b_h(d)    = sum_k w_hk exp(-(d - mu_k)^2 / (2 sigma^2))
 *
 * with K Gaussian radial basis functions centred at mu_k = k * sigma,
 * sigma = max_distance / (K - 1), and K learnable weights per head
 * ("distance_bias.weight" [H, K], zero at the start, so an untrained layer
 * is plain softmax attention). Everything is built from host ops except
 * the radial basis expansion, which is a fused op with its own backward:
 * the guide (docs/plugin-guide.md) walks through both.
 *
 * It includes nothing but alphast/plugin.h and the C library; build it
 * with the Makefile next to it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <alphast/plugin.h>

/* Subtracted from padded cells' key logits: their exp underflows to
 * exactly 0, while valid logits get + 0 and keep their exact values. */
#define MASKED_LOGIT 1e9f

/* ---- options ------------------------------------------------------------ */

enum { OPT_NUM_KERNELS, OPT_MAX_DISTANCE, OPT_USE_GATE };

static const ast_option_spec options[] = {
    [OPT_NUM_KERNELS] = {"num_kernels", AST_OPT_INT, "16", 2, 256, NULL,
                         "Gaussian radial basis functions per head, centred evenly on [0, max_distance]"},
    [OPT_MAX_DISTANCE] = {"max_distance", AST_OPT_FLOAT, "4.0", 1e-3, 1e6, NULL,
                          "centre of the last basis function, in the units of the layer's positions"},
    [OPT_USE_GATE] = {"use_gate", AST_OPT_BOOL, "false", 0, -1, NULL,
                      "scale each head's output by a sigmoid gate predicted from the token"},
};

/* ---- the fused op: radial basis expansion of distances ------------------- */

typedef struct rbf_saved {
    const ast_host *host;
    int kernels;
    float sigma; /* also the spacing of the centres */
} rbf_saved;

/* d phi_k / d d = -(d - mu_k) / sigma^2 * phi_k, summed over k into dD. */
static void rbf_backward(ast_ctx *c, const ast_node *n)
{
    const rbf_saved *s = n->saved;
    float *gd = s->host->grad(c, n->in[0]);
    if (!gd) return;
    const float *d = n->in[0]->data, *phi = n->out->data, *gphi = n->out->grad;
    for (int64_t i = 0; i < n->in[0]->size; i++) {
        float acc = 0.0f;
        for (int k = 0; k < s->kernels; k++) {
            int64_t ik = i * s->kernels + k;
            float z = (d[i] - (float)k * s->sigma) / s->sigma;
            acc += gphi[ik] * phi[ik] * (-z / s->sigma);
        }
        gd[i] += acc;
    }
}

/* d [..., ] -> phi [..., K]: phi_k = exp(-(d - k sigma)^2 / (2 sigma^2)). */
static ast_tensor *rbf_expand(const ast_host *h, ast_ctx *c, ast_tensor *d, int kernels, float sigma)
{
    if (d->ndim >= AST_MAX_DIMS) {
        h->log(AST_LOG_ERROR, "rbf_expand: input has %d dims; at most %d fit", d->ndim, AST_MAX_DIMS - 1);
        abort();
    }
    int64_t shape[AST_MAX_DIMS];
    for (int i = 0; i < d->ndim; i++) shape[i] = d->shape[i];
    shape[d->ndim] = kernels;
    ast_tensor *phi = h->ops->zeros(c, d->ndim + 1, shape);
    for (int64_t i = 0; i < d->size; i++)
        for (int k = 0; k < kernels; k++) {
            float z = (d->data[i] - (float)k * sigma) / sigma;
            phi->data[i * kernels + k] = expf(-0.5f * z * z);
        }
    rbf_saved *s = h->alloc(c, sizeof *s);
    *s = (rbf_saved){h, kernels, sigma};
    h->record(c, &(ast_node){.op = "rbf_expand", .backward = rbf_backward, .out = phi, .in = {d}, .n_in = 1,
                             .saved = s});
    return phi;
}

/* ---- the layer ------------------------------------------------------------ */

typedef struct distbias {
    const ast_host *host;
    int heads, kernels;
    float sigma, dropout;
    ast_tensor *wq, *bq, *wk, *bk, *wv, *bv, *wo, *bo;
    ast_tensor *bias_w;          /* [H, K] */
    ast_tensor *wg, *bg;         /* [H, E], [H]; NULL without the gate */
} distbias;

/* A PyTorch Linear(in, out): "<name>.weight" [out, in], "<name>.bias" [out],
 * both U(+-1/sqrt(in)). */
static void linear_params(const ast_host *h, ast_scope *s, const char *name, int in, int out, ast_tensor **w,
                          ast_tensor **b)
{
    char full[128];
    float bound = 1.0f / sqrtf((float)in);
    snprintf(full, sizeof full, "%s.weight", name);
    *w = h->param(s, full, 2, (int64_t[]){out, in}, AST_INIT_UNIFORM, bound);
    snprintf(full, sizeof full, "%s.bias", name);
    *b = h->param(s, full, 1, (int64_t[]){out}, AST_INIT_UNIFORM, bound);
}

static void *distbias_create(const ast_create_args *a, char *err, size_t errlen)
{
    const ast_layer_dims *dims = a->dims;
    if (dims->d_model <= 0 || dims->heads <= 0 || dims->d_model % dims->heads) {
        snprintf(err, errlen, "attention 'distbias': d_model %d is not a positive multiple of num_heads %d; "
                 "choose num_heads dividing d_model", dims->d_model, dims->heads);
        return NULL;
    }
    distbias *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "attention 'distbias': out of memory");
        return NULL;
    }
    const ast_host *h = a->host;
    int E = dims->d_model;
    l->host = h;
    l->heads = dims->heads;
    l->dropout = dims->dropout;
    l->kernels = (int)a->opts[OPT_NUM_KERNELS].i;
    l->sigma = (float)(a->opts[OPT_MAX_DISTANCE].f / (l->kernels - 1));
    linear_params(h, a->scope, "q_proj", E, E, &l->wq, &l->bq);
    linear_params(h, a->scope, "k_proj", E, E, &l->wk, &l->bk);
    linear_params(h, a->scope, "v_proj", E, E, &l->wv, &l->bv);
    linear_params(h, a->scope, "o_proj", E, E, &l->wo, &l->bo);
    l->bias_w = h->param(a->scope, "distance_bias.weight", 2, (int64_t[]){l->heads, l->kernels}, AST_INIT_ZERO, 0.0f);
    if (a->opts[OPT_USE_GATE].i) linear_params(h, a->scope, "gate_proj", E, l->heads, &l->wg, &l->bg);
    return l;
}

static void distbias_destroy(void *self) { free(self); }

/* Pairwise distances [B, N, N] -> bias [B, H, N, N]. */
static ast_tensor *distance_bias(const distbias *l, ast_ctx *c, ast_tensor *dist)
{
    const ast_host *h = l->host;
    ast_tensor *phi = rbf_expand(h, c, dist, l->kernels, l->sigma);   /* [B, N, N, K] */
    ast_tensor *bias = h->ops->linear(c, phi, l->bias_w, NULL);              /* [B, N, N, H] */
    return h->ops->permute(c, bias, (int[]){0, 3, 1, 2});
}

/* mask [B, N] -> [B, 1, 1, N]: 0 for valid keys, -MASKED_LOGIT for padding. */
static ast_tensor *key_mask_bias(const ast_host *h, ast_ctx *c, ast_tensor *mask)
{
    ast_tensor *m = h->ops->reshape(c, mask, 4, (int64_t[]){mask->shape[0], 1, 1, mask->shape[1]});
    return h->ops->affine(c, m, MASKED_LOGIT, -MASKED_LOGIT);
}

/* Statistic for monitors: per head, the attention-weighted distance
 * sum_j p_hij d_ij averaged over the valid query cells. */
static void publish_attended_distance(const distbias *l, ast_ctx *c, const ast_tensor *p, const ast_tensor *dist,
                                      const ast_tensor *mask, int layer)
{
    int64_t B = p->shape[0], H = p->shape[1], N = p->shape[2];
    float *per_head = l->host->alloc(c, (size_t)H * sizeof *per_head);
    double queries = 0.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < N; i++) {
            float valid = mask ? mask->data[b * N + i] : 1.0f;
            queries += valid;
            for (int64_t hd = 0; hd < H; hd++) {
                const float *prow = p->data + ((b * H + hd) * N + i) * N, *drow = dist->data + (b * N + i) * N;
                float acc = 0.0f;
                for (int64_t j = 0; j < N; j++) acc += prow[j] * drow[j];
                per_head[hd] += valid * acc;
            }
        }
    for (int64_t hd = 0; hd < H; hd++) per_head[hd] = queries > 0 ? (float)(per_head[hd] / queries) : 0.0f;
    l->host->stat(c, "distbias.attended_distance", layer, per_head, (int)H);
}

/* o [B, H, N, dh] scaled per head and token by sigmoid(gate_proj(x)). */
static ast_tensor *apply_gate(const distbias *l, ast_ctx *c, ast_tensor *x, ast_tensor *o)
{
    const ast_host *h = l->host;
    ast_tensor *g = h->ops->sigmoid(c, h->ops->linear(c, x, l->wg, l->bg)); /* [B, N, H] */
    g = h->ops->reshape(c, g, 4, (int64_t[]){g->shape[0], g->shape[1], g->shape[2], 1});
    return h->ops->mul(c, o, h->ops->permute(c, g, (int[]){0, 2, 1, 3}));
}

/* The plugin ABI promises positions; a caller that omits them is broken. */
static void require_positions(const distbias *l, const ast_tensor *x, const ast_fwd_args *a)
{
    const ast_tensor *p = a ? a->positions : NULL;
    if (p && p->ndim == 3 && p->shape[0] == x->shape[0] && p->shape[1] == x->shape[1]) return;
    l->host->log(AST_LOG_ERROR, "attention 'distbias' needs positions [B, N, D] matching x [B, N, E]");
    abort();
}

static ast_tensor *distbias_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    const distbias *l = self;
    const ast_host *h = l->host;
    require_positions(l, x, a);
    ast_tensor *q = h->ops->split_heads(c, h->ops->linear(c, x, l->wq, l->bq), l->heads);
    ast_tensor *k = h->ops->split_heads(c, h->ops->linear(c, x, l->wk, l->bk), l->heads);
    ast_tensor *v = h->ops->split_heads(c, h->ops->linear(c, x, l->wv, l->bv), l->heads);
    ast_tensor *dist = h->ops->pdist(c, a->positions);

    ast_tensor *logits = h->ops->affine(c, h->ops->bmm(c, q, k, 0, 1), 1.0f / sqrtf((float)q->shape[3]), 0.0f);
    logits = h->ops->add(c, logits, distance_bias(l, c, dist));
    if (a->mask) logits = h->ops->add(c, logits, key_mask_bias(h, c, a->mask));
    ast_tensor *p = h->ops->softmax(c, logits, -1);
    publish_attended_distance(l, c, p, dist, a->mask, a->layer);

    ast_tensor *o = h->ops->bmm(c, h->ops->dropout(c, p, l->dropout), v, 0, 0);
    if (l->wg) o = apply_gate(l, c, x, o);
    return h->ops->linear(c, h->ops->merge_heads(c, o), l->wo, l->bo);
}

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_ATTENTION, "distbias", "1.0",
                         "softmax attention with a learned per-head bias from pairwise cell distances (example)"),
    .options = options,
    .n_options = AST_N_OPTIONS(options),
    .create = distbias_create,
    .destroy = distbias_destroy,
    .forward = distbias_forward,
};

AST_PLUGIN_DEFINE(desc)
