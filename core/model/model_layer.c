/* One transformer layer (docs/model.md §2.3): the attention wrapper around the
 * attention plugin (docs/model.md §2.4), PositionNorm, the FFN plugin with post-norm
 * residuals, and the diffusion-time branch. */
#include <math.h>

#include "base/crash.h"
#include "model_internal.h"

static int plugin_create(model_plugin *mp, const ast_plugin *pl, const ast_model *m, const char *scope,
                         const ast_layer_dims *dims, const ast_optval *opts, ast_error *e)
{
    char err[512] = "";
    ast_params *p = m->params;
    const char *backend = ast_model_backend(m)->name;
    if (ast_plugin_check_backend(pl, backend, e)) return -1;
    int64_t before = ast_params_numel(p);
    ast_create_args a = {.host = ast_host_table(), .scope = ast_scope_new(p, scope), .dims = dims, .opts = opts,
                         .backend = backend};
    mp->desc = ast_plugin_desc_of(pl);
    mp->path = ast_plugin_path(pl);
    if (ast_plugin_dims_ok(mp->desc, dims, err, sizeof err)) {
        ast_crash_scope saved;
        ast_crash_enter(&saved, "create of plugin", mp->desc->name, mp->path, dims->layer);
        mp->self = mp->desc->create(&a, err, sizeof err);
        ast_crash_leave(&saved);
    }
    if (!mp->self) {
        ast_error_set(e, "%s plugin '%s' could not be built for layer %d: %s", ast_kind_name(mp->desc->kind),
                      mp->desc->name, dims->layer, err[0] ? err : "no reason given");
        return -1;
    }
    mp->numel = ast_params_numel(p) - before;
    return 0;
}

/* A plugin's forward, named for the crash report while it runs. */
static ast_tensor *plugin_forward(const model_plugin *mp, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a, int layer)
{
    ast_crash_scope saved;
    ast_crash_enter(&saved, mp->desc->kind == AST_KIND_ATTENTION ? "forward of attention plugin" : "forward of ffn plugin",
                    mp->desc->name, mp->path, layer);
    ast_tensor *y = mp->desc->forward(mp->self, c, x, a);
    ast_crash_leave(&saved);
    return y;
}

static void layer_dims(ast_layer_dims *d, const ast_model_config *cfg, int index)
{
    *d = (ast_layer_dims){.d_model = cfg->d_model, .heads = cfg->num_heads, .d_ff = cfg->d_ff,
                          .d_time = cfg->d_time, .layer = index, .num_layers = cfg->num_layers,
                          .dropout = cfg->dropout, .ln_eps = cfg->ln_eps};
}

int model_layer_register(ast_model *m, model_layer *l, int index, const ast_plugin *attn,
                         const ast_plugin *ffn, ast_error *e)
{
    const ast_model_config *cfg = &m->cfg;
    int E = cfg->d_model, T = cfg->d_time, W = MODEL_WRAP_HIDDEN;
    char name[96];
    l->index = index;
    layer_dims(&l->dims, cfg, index);
    snprintf(name, sizeof name, "transformer_layers.%d", index);
    ast_scope *ls = ast_scope_new(m->params, name);
    ast_scope *ws = ast_scope_child(ls, "attn_model");

    l->pos0 = model_linear_new(ws, "transform_positions_for_attn_mlp.0", MODEL_POS_DIM + 1, W, 1);
    l->pos2 = model_linear_new(ws, "transform_positions_for_attn_mlp.2", W, MODEL_POS_DIM, 1);
    l->concat = model_linear_new(ws, "concatenated_features", E + T + MODEL_POS_DIM, E, 1);
    l->expr0 = model_linear_new(ws, "transform_expression_for_attn_mlp.0", E, W, 1);
    l->expr2 = model_linear_new(ws, "transform_expression_for_attn_mlp.2", W, E, 1);
    snprintf(name, sizeof name, "transformer_layers.%d.attn_model.attention", index);
    if (plugin_create(&l->attn, attn, m, name, &l->dims, m->attn_opts, e)) return -1;
    l->head_pos = model_linear_new(ws, "head_features_to_position", E, MODEL_POS_DIM, 1);
    l->head_expr = model_linear_new(ws, "head_features_to_expression", E, E, 1);
    l->y_y = model_linear_new(ws, "y_y", T, T, 1);

    snprintf(name, sizeof name, "transformer_layers.%d", index);
    if (plugin_create(&l->ffn, ffn, m, name, &l->dims, m->ffn_opts, e)) return -1;
    l->norm1 = model_norm_new(ls, "norm_node_features_1", E);
    l->norm2 = model_norm_new(ls, "norm_node_features_2", E);
    l->pos_norm_w = ast_param(ls, "norm_positions_1.weight", 1, (int64_t[]){1}, AST_INIT_ONE, 0.0f);
    l->lin_t1 = model_linear_new(ls, "lin_diffusion_time_1", T, cfg->d_ff_time, 1);
    l->lin_t2 = model_linear_new(ls, "lin_diffusion_time_2", cfg->d_ff_time, T, 1);
    l->norm_t1 = model_norm_new(ls, "norm_diffusion_time_1", T);
    l->norm_t2 = model_norm_new(ls, "norm_diffusion_time_2", T);
    return 0;
}

/* [B, T] -> [B, N, T]: one time vector per set, repeated for each cell. */
static ast_tensor *repeat_over_cells(ast_ctx *c, ast_tensor *y, int64_t n)
{
    int64_t b = y->shape[0], t = y->shape[1];
    ast_tensor *y3 = ast_reshape(c, y, 3, (int64_t[]){b, 1, t});
    return ast_add(c, ast_zeros(c, 3, (int64_t[]){b, n, t}), y3);
}

/* [direction(3), length(1)] of each cell's position. */
static ast_tensor *position_features(ast_ctx *c, ast_tensor *pos)
{
    ast_tensor *len = ast_vecnorm(c, pos);
    ast_tensor *dir = ast_div(c, pos, ast_affine(c, len, 1.0f, MODEL_DIR_EPS));
    return ast_concat(c, (ast_tensor *[]){dir, len}, 2);
}

/* For the time_conditioning monitor, per layer: time.modulation_norm [B],
 * the L2 norm of each set's a_y = y_y(y), the time signal this layer
 * concatenates into every cell's attention input (and adds to the time
 * branch's residual). Reduced where the step runs, off the tape (vecnorm
 * sums the squares in float64 on the CPU, as this did on the host), so a
 * device step does not wait for it. */
static void publish_time_modulation(ast_ctx *c, int layer, ast_tensor *ty)
{
    int grad = ast_grad_enabled(c);
    ast_ctx_set_grad(c, 0);
    ast_tensor *norms = ast_vecnorm(c, ty);
    ast_ctx_set_grad(c, grad);
    ast_publish_stat_tensor(c, "time.modulation_norm", layer, norms);
}

typedef struct wrapper_out {
    ast_tensor *x, *pos, *y;
} wrapper_out;

static wrapper_out attn_wrapper(const model_layer *l, const model_run *r, model_state in, const ast_fwd_args *args)
{
    ast_ctx *c = r->c;
    ast_tensor *te = model_mlp2(c, in.x, &l->expr0, &l->expr2, 0);
    ast_tensor *tp = model_mlp2(c, position_features(c, in.pos), &l->pos0, &l->pos2, 0);
    ast_tensor *ty = model_apply(c, in.y, &l->y_y);
    if (r->stats) publish_time_modulation(c, l->index, ty);
    ast_tensor *parts[] = {te, repeat_over_cells(c, ty, in.x->shape[1]), tp};
    ast_tensor *h = model_apply(c, ast_concat(c, parts, 3), &l->concat);
    model_tap(r, h, "layer%d.attn_core_in", l->index);
    h = plugin_forward(&l->attn, c, h, args, l->index);
    model_tap(r, h, "layer%d.attn_core_out", l->index);

    wrapper_out w = {model_apply(c, h, &l->head_expr), model_apply(c, h, &l->head_pos), ty};
    model_tap(r, w.x, "layer%d.attn.expression", l->index);
    model_tap(r, w.pos, "layer%d.attn.positions", l->index);
    model_tap(r, w.y, "layer%d.attn.time", l->index);
    return w;
}

/* w * p / (mean length of the set's cells + eps). The reference averages
 * over all N cells; honouring the mask averages over the valid ones. */
static ast_tensor *position_norm(const model_layer *l, const model_run *r, ast_tensor *pos)
{
    ast_ctx *c = r->c;
    ast_tensor *len = ast_vecnorm(c, pos);
    ast_tensor *mean;
    if (r->plugin_mask)
        mean = ast_div(c, ast_sum_axis(c, ast_mul(c, len, r->mask3), 1), r->counts);
    else
        mean = ast_affine(c, ast_sum_axis(c, len, 1), 1.0f / (float)pos->shape[1], 0.0f);
    return ast_div(c, ast_mul(c, pos, l->pos_norm_w), ast_affine(c, mean, 1.0f, l->dims.ln_eps));
}

/* LN(a + Dropout(b)), the post-norm residual of every branch: the add and
 * the norm in one pass (add_layernorm). */
static ast_tensor *residual_norm(const model_run *r, ast_tensor *a, ast_tensor *b, const model_lin *ln)
{
    return ast_add_layernorm(r->c, a, ast_dropout(r->c, b, r->cfg->dropout), ln->w, ln->b, r->cfg->ln_eps);
}

/* The losses (MoE load balance) the FFN published during this layer. */
static void tap_layer_losses(const model_layer *l, const model_run *r, int first)
{
    ast_tensor *sum = NULL;
    for (int i = first; i < ast_ctx_n_losses(r->c); i++) {
        ast_tensor *li = ast_ctx_loss(r->c, i);
        sum = sum ? ast_add(r->c, sum, li) : li;
    }
    if (sum) model_tap(r, sum, "layer%d.out.moe_aux", l->index);
}

static ast_tensor *time_branch(const model_layer *l, const model_run *r, ast_tensor *y, ast_tensor *a_y)
{
    ast_ctx *c = r->c;
    ast_tensor *y1 = residual_norm(r, y, a_y, &l->norm_t1);
    ast_tensor *g = ast_dropout(c, ast_gelu(c, model_apply(c, y1, &l->lin_t1)), r->cfg->dropout);
    return residual_norm(r, y1, model_apply(c, g, &l->lin_t2), &l->norm_t2);
}

model_state model_layer_forward(const model_layer *l, const model_run *r, model_state in)
{
    ast_fwd_args args = {.mask = r->plugin_mask, .time = in.y, .positions = in.pos, .layer = l->index,
                         .geodesic = r->geodesic};
    wrapper_out w = attn_wrapper(l, r, in, &args);
    model_state out;
    out.pos = position_norm(l, r, w.pos);

    ast_tensor *x1 = residual_norm(r, in.x, w.x, &l->norm1);
    int first_loss = ast_ctx_n_losses(r->c);
    ast_tensor *f = plugin_forward(&l->ffn, r->c, x1, &args, l->index);
    out.x = residual_norm(r, x1, f, &l->norm2);
    out.y = time_branch(l, r, in.y, w.y);

    model_tap(r, out.x, "layer%d.out.expression", l->index);
    model_tap(r, out.pos, "layer%d.out.positions", l->index);
    model_tap(r, out.y, "layer%d.out.time", l->index);
    tap_layer_losses(l, r, first_loss);
    return out;
}
