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
 * It includes nothing but alphast/plugin_api.h (the plugin kit: ops and
 * host services called as ast_<name>(...), as the alphast core calls them)
 * and the C library; build it with the Makefile next to it. */
#include <math.h>
#include <stdlib.h>

#include <alphast/plugin_api.h>

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
    int kernels;
    float sigma; /* also the spacing of the centres */
} rbf_saved;

/* d phi_k / d d = -(d - mu_k) / sigma^2 * phi_k, summed over k into dD. */
static void rbf_backward(ast_ctx *c, const ast_node *n)
{
    const rbf_saved *s = n->saved;
    float *gd = ast_grad(c, n->in[0]);
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
static ast_tensor *rbf_expand(ast_ctx *c, ast_tensor *d, int kernels, float sigma)
{
    if (d->ndim >= AST_MAX_DIMS) {
        ast_log(AST_LOG_ERROR, "rbf_expand: input has %d dims; at most %d fit", d->ndim, AST_MAX_DIMS - 1);
        abort();
    }
    int64_t shape[AST_MAX_DIMS];
    for (int i = 0; i < d->ndim; i++) shape[i] = d->shape[i];
    shape[d->ndim] = kernels;
    ast_tensor *phi = ast_zeros(c, d->ndim + 1, shape);
    for (int64_t i = 0; i < d->size; i++)
        for (int k = 0; k < kernels; k++) {
            float z = (d->data[i] - (float)k * sigma) / sigma;
            phi->data[i * kernels + k] = expf(-0.5f * z * z);
        }
    rbf_saved *s = ast_alloc(c, sizeof *s);
    *s = (rbf_saved){kernels, sigma};
    ast_record(c, &(ast_node){.op = "rbf_expand", .backward = rbf_backward, .out = phi, .in = {d}, .n_in = 1,
                              .saved = s});
    return phi;
}

/* ---- the layer ------------------------------------------------------------ */

typedef struct distbias {
    int heads, kernels;
    float sigma, dropout;
    ast_weights q_proj, k_proj, v_proj, o_proj;
    ast_tensor *bias_w; /* [H, K] */
    ast_weights gate;   /* gate_proj [H, E], [H]; NULLs without the gate */
} distbias;

static void *distbias_create(const ast_create_args *a, char *err, size_t errlen)
{
    const ast_layer_dims *dims = a->dims; /* the host checked: heads divide d_model */
    distbias *l = calloc(1, sizeof *l);
    AST_REQUIRE(l, err, errlen, "attention 'distbias': out of memory");
    int E = dims->d_model;
    l->heads = dims->heads;
    l->dropout = dims->dropout;
    l->kernels = (int)a->opts[OPT_NUM_KERNELS].i;
    l->sigma = (float)(a->opts[OPT_MAX_DISTANCE].f / (l->kernels - 1));
    l->q_proj = ast_linear_params(a->scope, "q_proj", E, E, 1);
    l->k_proj = ast_linear_params(a->scope, "k_proj", E, E, 1);
    l->v_proj = ast_linear_params(a->scope, "v_proj", E, E, 1);
    l->o_proj = ast_linear_params(a->scope, "o_proj", E, E, 1);
    l->bias_w = ast_param(a->scope, "distance_bias.weight", 2, (int64_t[]){l->heads, l->kernels}, AST_INIT_ZERO, 0.0f);
    if (a->opts[OPT_USE_GATE].i) l->gate = ast_linear_params(a->scope, "gate_proj", E, l->heads, 1);
    return l;
}

/* Pairwise distances [B, N, N] -> bias [B, H, N, N]. */
static ast_tensor *distance_bias(const distbias *l, ast_ctx *c, ast_tensor *dist)
{
    ast_tensor *phi = rbf_expand(c, dist, l->kernels, l->sigma); /* [B, N, N, K] */
    ast_tensor *bias = ast_linear(c, phi, l->bias_w, NULL);      /* [B, N, N, H] */
    return ast_permute(c, bias, (int[]){0, 3, 1, 2});
}

/* Statistic for monitors: per head, the attention-weighted distance
 * sum_j p_hij d_ij averaged over the valid query cells. */
static void publish_attended_distance(ast_ctx *c, const ast_tensor *p, const ast_tensor *dist,
                                      const ast_tensor *mask, int layer)
{
    int64_t B = p->shape[0], H = p->shape[1], N = p->shape[2];
    float *per_head = ast_alloc(c, (size_t)H * sizeof *per_head);
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
    ast_publish_stat(c, "distbias.attended_distance", layer, per_head, (int)H);
}

/* o [B, H, N, dh] scaled per head and token by sigmoid(gate_proj(x)). */
static ast_tensor *apply_gate(const distbias *l, ast_ctx *c, ast_tensor *x, ast_tensor *o)
{
    ast_tensor *g = ast_sigmoid(c, ast_linear(c, x, l->gate.weight, l->gate.bias)); /* [B, N, H] */
    g = ast_reshape(c, g, 4, (int64_t[]){g->shape[0], g->shape[1], g->shape[2], 1});
    return ast_mul(c, o, ast_permute(c, g, (int[]){0, 2, 1, 3}));
}

/* The plugin ABI promises positions; a caller that omits them is broken. */
static void require_positions(const ast_tensor *x, const ast_fwd_args *a)
{
    const ast_tensor *p = a ? a->positions : NULL;
    if (p && p->ndim == 3 && p->shape[0] == x->shape[0] && p->shape[1] == x->shape[1]) return;
    ast_log(AST_LOG_ERROR, "attention 'distbias' needs positions [B, N, D] matching x [B, N, E]");
    abort();
}

static ast_tensor *distbias_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    const distbias *l = self;
    require_positions(x, a);
    ast_tensor *q = ast_split_heads(c, ast_linear(c, x, l->q_proj.weight, l->q_proj.bias), l->heads);
    ast_tensor *k = ast_split_heads(c, ast_linear(c, x, l->k_proj.weight, l->k_proj.bias), l->heads);
    ast_tensor *v = ast_split_heads(c, ast_linear(c, x, l->v_proj.weight, l->v_proj.bias), l->heads);
    ast_tensor *dist = ast_pdist(c, a->positions);

    ast_tensor *logits = ast_affine(c, ast_bmm(c, q, k, 0, 1), 1.0f / sqrtf((float)q->shape[3]), 0.0f);
    logits = ast_add(c, logits, distance_bias(l, c, dist));
    if (a->mask) logits = ast_add(c, logits, ast_key_mask_bias(c, a->mask, AST_MASKED_LOGIT));
    ast_tensor *p = ast_softmax(c, logits, -1);
    publish_attended_distance(c, p, dist, a->mask, a->layer);

    ast_tensor *o = ast_bmm(c, ast_dropout(c, p, l->dropout), v, 0, 0);
    if (l->gate.weight) o = apply_gate(l, c, x, o);
    return ast_linear(c, ast_merge_heads(c, o), l->o_proj.weight, l->o_proj.bias);
}

AST_PLUGIN(AST_KIND_ATTENTION, "distbias", "1.0",
           "softmax attention with a learned per-head bias from pairwise cell distances (example)",
           AST_OPTIONS(options), .create = distbias_create, .forward = distbias_forward)
