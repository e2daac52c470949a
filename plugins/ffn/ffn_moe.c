/* Mixture-of-experts FFN (docs/model.md §2.7): the reference's noisy top-k router
 * with ReLU experts and the load-balance loss, plus capacity limits,
 * shared experts, expert-choice routing, aux-loss-free bias balancing and
 * time-conditioned routing as options. Padded cells (fwd mask) are neither
 * routed nor counted in the balance statistics. */
#include <stdlib.h>
#include <string.h>

#include "moe.h"

enum {
    OPT_NUM_EXPERTS,
    OPT_TOP_K,
    OPT_LB_WEIGHT,
    OPT_NOISE_EPS,
    OPT_EXPERT_HIDDEN,
    OPT_CAPACITY_FACTOR,
    OPT_NUM_SHARED,
    OPT_ROUTER,
    OPT_BALANCE,
    OPT_BIAS_RATE,
    OPT_TIME_CONDITIONED
};

static const ast_option_spec moe_options[] = {
    [OPT_NUM_EXPERTS] = {"num_experts", AST_OPT_INT, "8", 1, 4096, NULL, "routed experts per layer"},
    [OPT_TOP_K] = {"top_k", AST_OPT_INT, "2", 1, 4096, NULL,
                   "experts per token (expert_choice: average experts per token)"},
    [OPT_LB_WEIGHT] = {"load_balance_weight", AST_OPT_FLOAT, "0.01", 0, 1e6, NULL,
                       "weight of the load-balance loss n * sum_e f_e P_e (balance: loss)"},
    [OPT_NOISE_EPS] = {"noise_epsilon", AST_OPT_FLOAT, "0.01", 0, 1e6, NULL,
                       "training-time router noise eps * N(0,1) * softplus(w_noise x); 0 = off"},
    [OPT_EXPERT_HIDDEN] = {"expert_hidden", AST_OPT_ENUM, "split", 1, 0, "split|full",
                           "expert width: split = max(1, F/num_experts) (reference HEAD), full = F (legacy)"},
    [OPT_CAPACITY_FACTOR] = {"capacity_factor", AST_OPT_FLOAT, "0", 0, 1e6, NULL,
                             "topk router: 0 = dropless; else an expert keeps at most ceil(tokens*k/num_experts*cf) "
                             "assignments and the overflow passes through the residual"},
    [OPT_NUM_SHARED] = {"num_shared_experts", AST_OPT_INT, "0", 0, 4096, NULL,
                        "always-on experts of the same width, added unweighted"},
    [OPT_ROUTER] = {"router", AST_OPT_ENUM, "topk", 1, 0, "topk|expert_choice",
                    "topk: each token picks k experts; expert_choice: each expert picks tokens*k/num_experts tokens"},
    [OPT_BALANCE] = {"balance", AST_OPT_ENUM, "loss", 1, 0, "loss|bias|none",
                     "loss: auxiliary load-balance loss; bias: aux-loss-free selection bias (DeepSeek-V3)"},
    [OPT_BIAS_RATE] = {"bias_update_rate", AST_OPT_FLOAT, "1e-3", 0, 1e6, NULL,
                       "balance: bias step per training forward"},
    [OPT_TIME_CONDITIONED] = {"time_conditioned", AST_OPT_BOOL, "false", 1, 0, NULL,
                              "add a projection of the diffusion-time embedding to the router logits"},
};

/* The options as an instance keeps them. */
static moe_opts read_opts(const ast_create_args *a)
{
    const ast_optval *v = a->opts;
    moe_opts o = {
        .num_experts = (int)v[OPT_NUM_EXPERTS].i,
        .top_k = (int)v[OPT_TOP_K].i,
        .num_shared = (int)v[OPT_NUM_SHARED].i,
        .lb_weight = (float)v[OPT_LB_WEIGHT].f,
        .noise_eps = (float)v[OPT_NOISE_EPS].f,
        .capacity_factor = (float)v[OPT_CAPACITY_FACTOR].f,
        .bias_rate = (float)v[OPT_BIAS_RATE].f,
        .router = (moe_router_kind)v[OPT_ROUTER].i,
        .balance = (moe_balance_kind)v[OPT_BALANCE].i,
        .time_conditioned = (int)v[OPT_TIME_CONDITIONED].i,
    };
    int split = a->dims->d_ff / o.num_experts;
    o.hidden = v[OPT_EXPERT_HIDDEN].i == 0 ? (split > 1 ? split : 1) : a->dims->d_ff;
    return o;
}

/* Parameters in the reference state_dict order (docs/model.md §2.10 d), then the
 * router's time projection and the shared experts, which it does not have. */
static void register_params(moe *m, const ast_create_args *a)
{
    int n = m->o.num_experts, d = m->d_model;
    for (int j = 0; j < n; j++)
        moe_expert_init(a->scope, "expression_ffn.ffn.experts", j, d, m->o.hidden, &m->experts[j]);
    m->gate = ast_linear_params(a->scope, "expression_ffn.ffn.router.gate", d, n, 0);
    m->w_noise = ast_linear_params(a->scope, "expression_ffn.ffn.router.w_noise", d, n, 0);
    if (m->o.time_conditioned)
        m->time_proj = ast_linear_params(a->scope, "expression_ffn.ffn.router.time_proj", a->dims->d_time, n, 1);
    for (int j = 0; j < m->o.num_shared; j++)
        moe_expert_init(a->scope, "expression_ffn.ffn.shared_experts", j, d, m->o.hidden, &m->shared[j]);
}

/* Defined at the end of the file; create() looks up its kernels. */
static const ast_plugin_desc ast_plugin_self;

static void *moe_create(const ast_create_args *a, char *err, size_t errlen)
{
    moe_opts o = read_opts(a);
    const char *backend = a->backend ? a->backend : "cpu";
    AST_REQUIRE(o.top_k <= o.num_experts, err, errlen, "top_k (%d) must not exceed num_experts (%d)", o.top_k,
                o.num_experts);
    AST_REQUIRE(o.balance != MOE_BALANCE_BIAS || o.router != MOE_ROUTER_EXPERT_CHOICE, err, errlen,
                "balance: bias needs router: topk (expert_choice is balanced by construction)");
    AST_REQUIRE(!o.time_conditioned || a->dims->d_time >= 1, err, errlen,
                "time_conditioned needs a time embedding (d_time %d)", a->dims->d_time);
    moe_combine_fn combine =
        (moe_combine_fn)ast_kernel_find(ast_plugin_self.kernels, ast_plugin_self.n_kernels, "moe_combine", backend);
    AST_REQUIRE(combine, err, errlen, "no moe_combine kernel for backend '%s' (it has: cpu, cuda)", backend);
    moe *m = calloc(1, sizeof *m + (size_t)(o.num_experts + o.num_shared) * sizeof *m->experts);
    AST_REQUIRE(m, err, errlen, "out of memory");
    m->o = o;
    m->d_model = a->dims->d_model;
    m->dropout = a->dims->dropout;
    m->combine = combine;
    m->route_on_device = strcmp(backend, "cpu") != 0 && o.router == MOE_ROUTER_TOPK && o.balance != MOE_BALANCE_BIAS;
    m->shared = m->experts + o.num_experts;
    register_params(m, a);
    if (moe_experts_group(m)) {
        free(m);
        AST_REQUIRE(0, err, errlen, "out of memory");
    }
    /* Not trained but saved (checkpoints, best.safetensors), so a resumed
     * run and evaluation route with the bias training left. */
    if (o.balance == MOE_BALANCE_BIAS)
        m->sel_bias = ast_buffer(a->scope, "expression_ffn.ffn.router.selection_bias", 1, (int64_t[]){o.num_experts});
    return m;
}

static void moe_destroy(void *self)
{
    moe *m = self;
    free(m->w1); /* the grouped parameter lists, one block */
    free(m);
}

/* Flattens x [B, N, E] to rows and keeps the valid ones (mask != 0);
 * returns the kept row indices, or NULL when every row is valid. */
static const int32_t *select_tokens(const moe *m, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a, moe_tokens *tk)
{
    int64_t rows = x->size / m->d_model, per_set = x->ndim > 2 ? x->shape[x->ndim - 2] : rows;
    ast_tensor *flat = ast_reshape(c, x, 2, (int64_t[]){rows, m->d_model});
    const ast_tensor *mask = a ? a->mask : NULL;
    MOE_REQUIRE(!mask || mask->size == rows, "mask has %lld entries for %lld cells", (long long)mask->size,
                (long long)rows);
    const float *mask_h = mask ? ast_host_copy(c, mask) : NULL;
    int32_t *keep = ast_alloc(c, (size_t)rows * sizeof *keep);
    int32_t *batch = ast_alloc(c, (size_t)rows * sizeof *batch);
    int64_t n = 0;
    for (int64_t r = 0; r < rows; r++) {
        if (mask_h && mask_h[r] == 0.0f) continue;
        keep[n] = (int32_t)r;
        batch[n++] = (int32_t)(r / per_set);
    }
    tk->n = n;
    tk->batch = batch;
    tk->sets = rows / per_set;
    tk->valid = NULL;
    tk->x = n == rows ? flat : ast_gather_rows(c, flat, keep, n);
    return n == rows ? NULL : keep;
}

/* For the time_conditioning monitor, per layer: moe.set_tokens_per_expert
 * [sets, n], the kept assignments of each set's tokens to each expert. */
static void publish_set_stats(const moe *m, ast_ctx *c, int layer, const moe_tokens *tk, const moe_routing *r,
                              int64_t sets)
{
    int n = m->o.num_experts;
    float *v = ast_alloc(c, (size_t)(sets * n) * sizeof *v);
    for (int e = 0; e < n; e++)
        for (int64_t p = r->offset[e]; p < r->offset[e + 1]; p++) v[tk->batch[r->token[p]] * n + e] += 1.0f;
    ast_publish_stat(c, "moe.set_tokens_per_expert", layer, v, (int)(sets * n));
}

/* For monitors, per layer: moe.tokens_per_expert [n] (kept assignments),
 * moe.router_prob_mean [n] (P_e), moe.dropped_tokens [1] (topk: (token,
 * slot) assignments over capacity; expert_choice: tokens no expert took)
 * and moe.aux_loss [1] (the weighted balance loss; 0 unless balance: loss). */
static void publish_stats(const moe *m, ast_ctx *c, int layer, const moe_routing *r, const moe_scores *s,
                          ast_tensor *aux)
{
    int n = m->o.num_experts;
    int64_t tokens = s->probs->shape[0];
    float *v = ast_alloc(c, (size_t)n * sizeof *v);
    for (int e = 0; e < n; e++) v[e] = (float)(r->offset[e + 1] - r->offset[e]);
    ast_publish_stat(c, "moe.tokens_per_expert", layer, v, n);
    double *sum = ast_alloc(c, (size_t)n * sizeof *sum);
    for (int64_t t = 0; t < tokens; t++) /* row by row: each sum in token order, memory in order */
        for (int e = 0; e < n; e++) sum[e] += s->probs_h[t * n + e];
    for (int e = 0; e < n; e++) v[e] = (float)(sum[e] / (double)tokens);
    ast_publish_stat(c, "moe.router_prob_mean", layer, v, n);
    float dropped = (float)r->dropped, aux_value = 0.0f;
    if (aux) ast_tensor_read(c, aux, 0, 1, &aux_value);
    ast_publish_stat(c, "moe.dropped_tokens", layer, &dropped, 1);
    ast_publish_stat(c, "moe.aux_loss", layer, &aux_value, 1);
}

static ast_tensor *moe_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    moe *m = self;
    if (m->route_on_device) return moe_forward_on_device(m, c, x, a);
    moe_tokens tk;
    const int32_t *valid = select_tokens(m, c, x, a, &tk);
    if (tk.n == 0) return ast_zeros(c, x->ndim, x->shape);

    moe_scores s = {.logits = moe_router_logits(m, c, &tk, a ? a->time : NULL)};
    s.probs = ast_softmax(c, s.logits, -1);
    s.logits_h = ast_host_copy(c, s.logits);
    s.probs_h = ast_host_copy(c, s.probs);
    moe_routing r;
    moe_route(m, c, &s, &r);
    ast_tensor *y = moe_dispatch(m, c, &tk, &r);
    for (int j = 0; j < m->o.num_shared; j++) y = ast_add(c, y, moe_expert_forward(m, c, &m->shared[j], tk.x));

    ast_tensor *aux = NULL;
    if (m->o.balance == MOE_BALANCE_LOSS) {
        aux = moe_balance_loss(m, c, &s);
        ast_add_loss(c, "moe_aux", aux);
    }
    if (m->o.balance == MOE_BALANCE_BIAS && ast_training(c)) moe_update_bias(m, &r, tk.n);
    if (ast_stats_wanted(c)) {
        publish_stats(m, c, a ? a->layer : -1, &r, &s, aux);
        publish_set_stats(m, c, a ? a->layer : -1, &tk, &r, x->ndim > 2 ? x->shape[0] : 1);
    }

    if (valid) y = ast_scatter_add_rows(c, y, valid, NULL, x->size / m->d_model);
    return ast_reshape(c, y, x->ndim, x->shape);
}

/* What one token uses (docs/model.md §2.11 "Activated"): the router and k experts,
 * plus the shared experts. */
static int64_t moe_active_params(void *self)
{
    const moe *m = self;
    const ast_weights *t = &m->time_proj;
    int64_t router = m->gate.weight->size + m->w_noise.weight->size;
    if (t->weight) router += t->weight->size + t->bias->size;
    int64_t expert = moe_expert_numel(&m->experts[0]);
    return router + (int64_t)(m->o.top_k + m->o.num_shared) * expert;
}

/* The fused kernel on the CPU; elsewhere the same from ops, which every
 * backend runs (moe_combine_ops.c). */
static const ast_kernel kernels[] = {{"moe_combine", "cpu", (ast_kernel_fn)moe_combine},
                                     {"moe_combine", "cuda", (ast_kernel_fn)moe_combine_ops}};

/* The reference's keys for three options: use_moe: true chose this plugin. */
static const ast_legacy_key legacy_keys[] = {{"TransformerLayer_setting.num_experts", "num_experts"},
                                             {"TransformerLayer_setting.moe_top_k", "top_k"},
                                             {"TransformerLayer_setting.moe_load_balance_loss_weight", "load_balance_weight"}};

AST_PLUGIN(AST_KIND_FFN, "moe", "1.0",
           "mixture of ReLU experts: noisy top-k or expert-choice routing, optional capacity, shared experts, loss or "
           "bias balancing",
           AST_OPTIONS(moe_options), AST_KERNELS(kernels), AST_LEGACY_KEYS(legacy_keys), .create = moe_create,
           .destroy = moe_destroy, .forward = moe_forward, .active_params = moe_active_params)
