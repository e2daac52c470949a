/* The model's lifecycle: configuration checks, plugin loading, parameter
 * registration in state_dict order (docs/model.md §2.10), counts and the forward
 * pass over encoders, layers and heads (docs/model.md §2.1). */
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

static int check_positive(const char *key, int v, ast_error *e)
{
    if (v > 0) return 0;
    ast_error_set(e, "model: %s is %d; it must be a positive integer", key, v);
    return -1;
}

static int check_config(const ast_model_config *cfg, ast_error *e)
{
    const struct { const char *key; int v; } dims[] = {
        {"num_genes", cfg->num_genes}, {"mlp_in_expression_dims", cfg->expr_hidden},
        {"mlp_out_expression_dims", cfg->d_model}, {"mlp_in_diffusion_time_dims", cfg->time_hidden},
        {"mlp_out_diffusion_time_dims", cfg->d_time}, {"PositionMLP_setting.hidden_dims", cfg->pos_hidden},
        {"num_layers", cfg->num_layers}, {"num_heads", cfg->num_heads}, {"dim_ff_expression", cfg->d_ff},
        {"dim_ff_diffusion_time", cfg->d_ff_time}, {"mlp_out_expression_setting.hidden_dims", cfg->out_expr_hidden},
        {"mlp_out_position_norm_setting.hidden_dims", cfg->out_pos_hidden}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++)
        if (check_positive(dims[i].key, dims[i].v, e)) return -1;
    if (cfg->d_model % cfg->num_heads) {
        ast_error_set(e, "model: mlp_out_expression_dims (%d) must be divisible by num_heads (%d)", cfg->d_model,
                      cfg->num_heads);
        return -1;
    }
    if (!(cfg->dropout >= 0.0f && cfg->dropout < 1.0f) || !(cfg->ln_eps > 0.0f)) {
        ast_error_set(e, "model: dropout (%g) must be in [0, 1) and layer_norm_eps (%g) positive", cfg->dropout,
                      cfg->ln_eps);
        return -1;
    }
    if (cfg->prior.kind != AST_PRIOR_NONE && !(cfg->prior.dims >= 0 && cfg->prior.dims <= 3 && cfg->prior.k >= 1)) {
        ast_error_set(e, "model: prior_dims (%d) must be 0..3 and prior_k (%d) positive", cfg->prior.dims, cfg->prior.k);
        return -1;
    }
    if (!cfg->attention || !cfg->ffn || cfg->n_attention_opts > AST_MAX_PLUGIN_OPTS ||
        cfg->n_ffn_opts > AST_MAX_PLUGIN_OPTS) {
        ast_error_set(e, "model: an attention and an ffn plugin must be named, each with at most %d options",
                      AST_MAX_PLUGIN_OPTS);
        return -1;
    }
    return 0;
}

static void copy_opts(ast_optsrc *dst, const ast_optsrc *src, int n)
{
    for (int i = 0; i < n; i++)
        dst[i] = (ast_optsrc){ast_xstrdup(src[i].key), ast_xstrdup(src[i].value),
                              ast_xstrdup(src[i].where ? src[i].where : "")};
}

static void free_opts(ast_optsrc *o, int n)
{
    for (int i = 0; i < n; i++) {
        free((char *)o[i].key);
        free((char *)o[i].value);
        free((char *)o[i].where);
    }
}

/* The model keeps its own copy of every string the plugins may point at. */
static void copy_config(ast_model_config *dst, const ast_model_config *src)
{
    *dst = *src;
    dst->attention = ast_xstrdup(src->attention);
    dst->ffn = ast_xstrdup(src->ffn);
    dst->device = NULL; /* the model keeps its backend instead */
    copy_opts(dst->attention_opts, src->attention_opts, src->n_attention_opts);
    copy_opts(dst->ffn_opts, src->ffn_opts, src->n_ffn_opts);
}

static const ast_plugin *load_plugin(ast_plugin_kind kind, const char *name, const ast_optsrc *src, int n,
                                     ast_optval *out, ast_error *e)
{
    const ast_plugin *p = ast_plugin_load(kind, name, e);
    if (!p || !ast_plugin_options(p, src, n, out, e)) return NULL;
    return p;
}

static int build(ast_model *m, ast_error *e)
{
    const ast_model_config *cfg = &m->cfg;
    const ast_plugin *attn = load_plugin(AST_KIND_ATTENTION, cfg->attention, cfg->attention_opts,
                                         cfg->n_attention_opts, m->attn_opts, e);
    if (!attn) return -1;
    const ast_plugin *ffn = load_plugin(AST_KIND_FFN, cfg->ffn, cfg->ffn_opts, cfg->n_ffn_opts, m->ffn_opts, e);
    if (!ffn) return -1;
    model_embed_register(&m->embed, m->params, cfg);
    for (int i = 0; i < cfg->num_layers; i++)
        if (model_layer_register(m, &m->layers[i], i, attn, ffn, e)) return -1;
    model_heads_register(&m->heads, m->params, cfg);
    model_prior_register(m);
    return 0;
}

ast_model *ast_model_new(const ast_model_config *cfg, uint64_t seed, ast_error *e)
{
    if (check_config(cfg, e)) return NULL;
    const ast_backend *backend = ast_backend_require(cfg->device, e); /* ast_cfg_model said where, for a config */
    if (!backend) return NULL;
    /* The model holds a reference on the plugin registry, so the plugins'
     * code stays loaded as long as their instances live. */
    if (!ast_plugins_init(e)) return NULL;
    ast_model *m = ast_xcalloc(1, sizeof *m);
    copy_config(&m->cfg, cfg);
    m->backend = backend;
    m->params = ast_params_new(seed);
    m->layers = ast_xcalloc((size_t)cfg->num_layers, sizeof *m->layers);
    if (build(m, e)) {
        ast_model_free(m);
        return NULL;
    }
    return m;
}

static void destroy_plugin(model_plugin *p)
{
    if (p->self) ast_plugin_destroy(p->desc, p->self);
}

void ast_model_free(ast_model *m)
{
    if (!m) return;
    for (int i = 0; i < m->cfg.num_layers; i++) {
        destroy_plugin(&m->layers[i].attn);
        destroy_plugin(&m->layers[i].ffn);
    }
    free(m->layers);
    ast_prior_cache_free(m->prior_cache);
    ast_params_free(m->params);
    free((char *)m->cfg.attention);
    free((char *)m->cfg.ffn);
    free_opts(m->cfg.attention_opts, m->cfg.n_attention_opts);
    free_opts(m->cfg.ffn_opts, m->cfg.n_ffn_opts);
    free(m);
    ast_plugins_shutdown();
}

ast_params *ast_model_params(ast_model *m) { return m->params; }
const ast_model_config *ast_model_cfg(const ast_model *m) { return &m->cfg; }
int64_t ast_model_param_count(const ast_model *m) { return ast_params_numel(m->params); }

static void check_inputs(const ast_model *m, ast_tensor *x, ast_tensor *t, ast_tensor *pos, ast_tensor *mask)
{
    char s1[64], s2[64];
    AST_ASSERT(x->ndim == 3 && x->shape[2] == m->cfg.num_genes, "model: expression %s for %d genes",
               ast_shape_str(x, s1, sizeof s1), m->cfg.num_genes);
    AST_ASSERT(t->ndim == 2 && t->shape[0] == x->shape[0] && t->shape[1] == 1, "model: t %s for expression %s",
               ast_shape_str(t, s1, sizeof s1), ast_shape_str(x, s2, sizeof s2));
    AST_ASSERT(pos->ndim == 3 && pos->shape[0] == x->shape[0] && pos->shape[1] == x->shape[1] &&
                   pos->shape[2] == MODEL_POS_DIM,
               "model: positions %s for expression %s", ast_shape_str(pos, s1, sizeof s1),
               ast_shape_str(x, s2, sizeof s2));
    AST_ASSERT(!mask || (mask->ndim == 2 && mask->shape[0] == x->shape[0] && mask->shape[1] == x->shape[1]),
               "model: mask %s for expression %s", ast_shape_str(mask, s1, sizeof s1),
               ast_shape_str(x, s2, sizeof s2));
}

ast_model_out ast_model_forward(ast_model *m, ast_ctx *c, ast_tensor *expression, ast_tensor *t,
                                ast_tensor *positions, ast_tensor *mask, ast_tap_fn tap, void *tap_ud)
{
    return ast_model_forward_given(m, c, expression, t, positions, mask, NULL, tap, tap_ud);
}

ast_model_out ast_model_forward_given(ast_model *m, ast_ctx *c, ast_tensor *expression, ast_tensor *t,
                                      ast_tensor *positions, ast_tensor *mask, const ast_model_prior_in *in,
                                      ast_tap_fn tap, void *tap_ud)
{
    check_inputs(m, expression, t, positions, mask);
    int64_t b = expression->shape[0], n = expression->shape[1];
    model_run r = {.c = c, .cfg = &m->cfg, .tap = tap, .tap_ud = tap_ud};
    /* Without a mask nothing needs honouring: plugins get NULL (no padding). */
    r.plugin_mask = m->cfg.honour_mask ? mask : NULL;
    r.stats = ast_ctx_stats_wanted(c); /* plugins ask too, with host->stats_wanted */
    r.mask = mask ? mask : model_all_valid(c, b, n);
    r.mask3 = ast_reshape(c, r.mask, 3, (int64_t[]){b, n, 1});
    r.counts = model_valid_counts(c, r.mask);

    /* Monitors bucket per-set statistics by each set's diffusion time. */
    if (r.stats) ast_publish_stat_tensor(c, "time.t", -1, t);
    ast_tensor *prior = model_prior_tensor(m, &r, expression, in);
    model_state s = model_embed_forward(&m->embed, &r, expression, t, positions);
    s.x = model_prior_inputs(m, &r, s.x, prior);
    for (int i = 0; i < m->cfg.num_layers; i++) s = model_layer_forward(&m->layers[i], &r, s);
    ast_model_out out = model_heads_forward(&m->heads, &r, s);
    out.positions = model_prior_residual(m, &r, out.positions, prior);
    return out;
}

const ast_backend *ast_model_backend(const ast_model *m) { return m->backend; }


int ast_model_place(ast_model *m, ast_error *e)
{
    if (m->placed) return 0;
    char why[256] = "";
    if (!m->backend->available(m->backend, why, sizeof why)) {
        ast_error_set(e, "device: %s cannot run here: %s (in the config, or --device cpu)", m->backend->name, why);
        return -1;
    }
    ast_params_to_backend(m->params, m->backend);
    m->placed = 1;
    return 0;
}
