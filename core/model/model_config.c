/* The model's sizes and plugins from a config (docs/model.md §1), and the small
 * BASE_CONFIG of compare_configs.py (docs/model.md §10). */
#include <string.h>

#include "engine/backend.h"
#include "model/model.h"
#include "plugin/loader.h"

#define TL "TransformerLayer_setting."

void ast_model_config_base(ast_model_config *cfg, int num_genes)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->num_genes = num_genes;
    cfg->expr_hidden = 64;
    cfg->d_model = 128;
    cfg->time_hidden = 32;
    cfg->d_time = 32;
    cfg->pos_hidden = 32;
    cfg->num_layers = 2;
    cfg->num_heads = 4;
    cfg->d_ff = 256;
    cfg->d_ff_time = 64;
    cfg->out_expr_hidden = 128;
    cfg->out_pos_hidden = 64;
    cfg->dropout = 0.1f;
    cfg->ln_eps = 1e-6f;
    cfg->honour_mask = 1;
    cfg->attention = "linear";
    cfg->ffn = "dense";
}

void ast_model_config_data_dims(ast_model_config *cfg, int coord_dims)
{
    if (cfg->prior.dims == 0 && coord_dims > 0) cfg->prior.dims = coord_dims;
}

/* How a reference switch chooses a plugin: true names `on`, false `off`.
 * Which keys then feed the plugin's options is the plugin's own business
 * (its descriptor's legacy_keys). */
typedef struct plugin_rule {
    const char *key; /* "attention" */
    ast_plugin_kind kind;
    const char *sw;  /* TL "use_gated_attention" */
    const char *on, *off;
} plugin_rule;

static const plugin_rule attention_rule = {"attention", AST_KIND_ATTENTION, TL "use_gated_attention", "gated", "linear"};
static const plugin_rule ffn_rule = {"ffn", AST_KIND_FFN, TL "use_moe", "moe", "dense"};

static const ast_optsrc *find_opt(const ast_cfg_plugin *p, const char *key)
{
    for (int i = 0; i < p->n_opts; i++)
        if (!strcmp(p->opts[i].key, key)) return &p->opts[i];
    return NULL;
}

/* The plugin's legacy keys, n of them (none when it declares none, or
 * cannot be loaded: building the model then says why). Plugins stay
 * loaded for the process (plugin_loader.c), so the table stays valid. */
static const ast_legacy_key *legacy_of(const plugin_rule *r, const char *name, int *n)
{
    ast_error ignored;
    const ast_legacy_key *keys = NULL;
    *n = 0;
    if (!ast_plugins_init(&ignored)) return NULL;
    const ast_plugin *pl = ast_plugin_load(r->kind, name, &ignored);
    if (pl) keys = ast_plugin_desc_of(pl)->legacy_keys, *n = ast_plugin_desc_of(pl)->n_legacy_keys;
    ast_plugins_shutdown();
    return keys;
}

/* Adds the options the plugin's legacy keys give. They apply when the
 * switch chose the plugin (with the reference's defaults) or when written
 * explicitly. */
static int add_legacy_opts(const ast_cfg *cfg, const plugin_rule *r, int named, ast_cfg_plugin *p, ast_error *e)
{
    const ast_cfg_node *sw = ast_cfg_get(cfg, r->sw);
    int n;
    const ast_legacy_key *keys = legacy_of(r, p->name, &n);
    for (int i = 0; i < n; i++) {
        const ast_legacy_key *lk = &keys[i];
        const ast_cfg_node *src = ast_cfg_get(cfg, lk->key);
        if (!src && named) continue;
        const ast_optsrc *twice = find_opt(p, lk->option);
        if (twice) {
            ast_cfg_fail(e, src->file, src->line, src->col, src->path,
                     "also given as %s.%s at %s; keep one of the two", r->key, twice->key, twice->where);
            return -1;
        }
        if (p->n_opts == AST_MAX_PLUGIN_OPTS) {
            ast_error_set(e, "%s: %s: more than %d options; remove some", p->where, r->key, AST_MAX_PLUGIN_OPTS);
            return -1;
        }
        p->opts[p->n_opts++] = (ast_optsrc){lk->option, src ? src->value : ast_cfg_default(lk->key),
                                            src ? src->where : sw ? sw->where : r->sw};
    }
    return 0;
}

static int choose_plugin(const ast_cfg *cfg, const plugin_rule *r, ast_cfg_plugin *p, ast_error *e)
{
    const ast_cfg_node *given = ast_cfg_get(cfg, r->key), *sw = ast_cfg_get(cfg, r->sw);
    const char *by_switch = ast_cfg_bool(cfg, r->sw) ? r->on : r->off;
    if (given) {
        ast_cfg_plugin_of(given, p);
        if (sw && strcmp(p->name, by_switch)) {
            ast_cfg_fail(e, given->file, given->line, given->col, given->path,
                     "'%s' disagrees with %s: %s at %s; remove one of the two", p->name, r->sw, sw->value,
                     sw->where);
            return -1;
        }
    } else {
        memset(p, 0, sizeof *p);
        p->name = by_switch;
        p->where = sw ? sw->where : r->sw;
    }
    return add_legacy_opts(cfg, r, given != NULL, p, e);
}

static void put_plugin(const ast_cfg_plugin *p, const char **name, ast_optsrc *opts, int *n_opts)
{
    *name = p->name;
    memcpy(opts, p->opts, (size_t)p->n_opts * sizeof *opts);
    *n_opts = p->n_opts;
}

static void read_sizes(const ast_cfg *cfg, int num_genes, ast_model_config *out)
{
    out->num_genes = num_genes;
    out->expr_hidden = (int)ast_cfg_int(cfg, "mlp_in_expression_setting.mlp_in_expression_dims");
    out->d_model = (int)ast_cfg_int(cfg, "mlp_in_expression_setting.mlp_out_expression_dims");
    out->time_hidden = (int)ast_cfg_int(cfg, "mlp_in_diffusion_time_setting.mlp_in_diffusion_time_dims");
    out->d_time = (int)ast_cfg_int(cfg, "mlp_in_diffusion_time_setting.mlp_out_diffusion_time_dims");
    out->pos_hidden = (int)ast_cfg_int(cfg, "PositionMLP_setting.hidden_dims");
    out->num_layers = (int)ast_cfg_int(cfg, TL "num_layers");
    out->num_heads = (int)ast_cfg_int(cfg, TL "num_heads");
    out->d_ff = (int)ast_cfg_int(cfg, TL "dim_ff_expression");
    out->d_ff_time = (int)ast_cfg_int(cfg, TL "dim_ff_diffusion_time");
    out->out_expr_hidden = (int)ast_cfg_int(cfg, "mlp_out_expression_setting.hidden_dims");
    out->out_pos_hidden = (int)ast_cfg_int(cfg, "mlp_out_position_norm_setting.hidden_dims");
    out->dropout = (float)ast_cfg_float(cfg, TL "dropout");
    out->ln_eps = (float)ast_cfg_float(cfg, TL "layer_norm_eps");
    out->honour_mask = ast_cfg_bool(cfg, TL "honour_mask");
}

static int check_heads(const ast_cfg *cfg, const ast_model_config *m, ast_error *e)
{
    if (m->d_model % m->num_heads == 0) return 0;
    const ast_cfg_node *at = ast_cfg_get(cfg, TL "num_heads");
    if (!at) at = ast_cfg_get(cfg, "mlp_in_expression_setting.mlp_out_expression_dims");
    ast_cfg_fail(e, at->file, at->line, at->col, TL "num_heads",
             "%d heads do not divide d_model %d (mlp_in_expression_setting.mlp_out_expression_dims); "
             "choose a divisor of d_model", m->num_heads, m->d_model);
    return -1;
}

/* Where the prior's network inputs are clean expression: only expr_to_pos
 * gives the model its expression unnoised; the residual adds the prior to
 * x0 itself, which v-prediction does not output. */
static int read_prior(const ast_cfg *cfg, ast_model_config *out, ast_error *e)
{
    const ast_cfg_node *at = ast_cfg_get(cfg, "model.prior");
    /* auto settles with the data (ast_train_resolve_recipe); a model built
     * without any (params, a plugin's tests) has none. */
    const char *prior = ast_cfg_str(cfg, "model.prior");
    if (!strcmp(prior, "auto")) prior = "none";
    if (ast_prior_parse(prior, &out->prior.kind) < 0) return -1; /* the schema checked it */
    out->prior.k = (int)ast_cfg_int(cfg, "model.prior_k");
    out->prior.dims = (int)ast_cfg_int(cfg, "model.prior_dims");
    out->prior_inputs = ast_cfg_bool(cfg, "model.prior_inputs");
    out->prior_residual = ast_cfg_bool(cfg, "model.prior_residual");
    if (out->prior.kind == AST_PRIOR_NONE) return 0;
    if (out->prior.dims > 3) {
        const ast_cfg_node *d = ast_cfg_get(cfg, "model.prior_dims");
        ast_cfg_fail(e, d->file, d->line, d->col, d->path, "%d axes; use 1..3, or 0 for the data's", out->prior.dims);
        return -1;
    }
    if (strcmp(ast_cfg_str(cfg, "training_mode"), "expr_to_pos")) {
        ast_cfg_fail(e, at->file, at->line, at->col, at->path,
                     "the prior is computed from clean expression, which only training_mode: expr_to_pos gives; "
                     "set model.prior: none or training_mode: expr_to_pos");
        return -1;
    }
    if (out->prior_residual && !strcmp(ast_cfg_str(cfg, "diffusion.position_parameterisation"), "v")) {
        ast_cfg_fail(e, at->file, at->line, at->col, at->path,
                     "model.prior_residual adds the prior to the x0 prediction, which "
                     "diffusion.position_parameterisation: v does not output; use x0 or model.prior_residual: false");
        return -1;
    }
    return 0;
}

int ast_cfg_model(const ast_cfg *cfg, int num_genes, ast_model_config *out, ast_error *e)
{
    ast_cfg_plugin attention, ffn;
    if (num_genes <= 0) {
        ast_error_set(e, "%s: the data has %d genes; it needs at least one", ast_cfg_name(cfg), num_genes);
        return -1;
    }
    memset(out, 0, sizeof *out);
    read_sizes(cfg, num_genes, out);
    if (check_heads(cfg, out, e) < 0 || read_prior(cfg, out, e) < 0) return -1;
    if (choose_plugin(cfg, &attention_rule, &attention, e) < 0 || choose_plugin(cfg, &ffn_rule, &ffn, e) < 0)
        return -1;
    put_plugin(&attention, &out->attention, out->attention_opts, &out->n_attention_opts);
    put_plugin(&ffn, &out->ffn, out->ffn_opts, &out->n_ffn_opts);
    out->device = ast_cfg_str(cfg, "device");
    const ast_cfg_node *device = ast_cfg_get(cfg, "device");
    ast_error why;
    if (!ast_backend_require(out->device, &why)) {
        ast_cfg_fail(e, device->file, device->line, device->col, device->path, "%s", why.msg);
        return -1;
    }
    const ast_cfg_node *capacity = ast_cfg_get(cfg, TL "expert_capacity_factor");
    if (capacity)
        ast_log(AST_LOG_INFO, "%s: %s is ignored as in the reference, which never used it; "
                "set ffn: {name: moe, capacity_factor: ...} for a capacity limit", capacity->where, capacity->path);
    return 0;
}
