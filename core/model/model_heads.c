/* Output heads (docs/model.md §2.8): the expression MLP, the position head that
 * rescales each cell's length, then masking and per-set centring. */
#include "model_internal.h"

void model_heads_register(model_heads *h, ast_params *p, const ast_model_config *cfg)
{
    ast_scope *s = ast_scope_new(p, "");
    int E = cfg->d_model, Hp = cfg->out_pos_hidden;
    h->expr0 = model_linear_new(s, "mlp_out_expression.0", E, cfg->out_expr_hidden, 1);
    h->expr2 = model_linear_new(s, "mlp_out_expression.2", cfg->out_expr_hidden, cfg->num_genes, 1);
    h->pos_feat = model_linear_new(s, "mlp_out_pos_features.0", E, Hp, 1);
    h->pos_norm0 = model_linear_new(s, "mlp_out_position_norm.0", Hp + MODEL_POS_DIM + 1, Hp, 1);
    h->pos_norm2 = model_linear_new(s, "mlp_out_position_norm.2", Hp, 1, 1);
}

/* pos * r' / (r + 1e-6), r' = MLP([ReLU(Linear(x)), pos, r]). */
static ast_tensor *position_head(const model_heads *h, ast_ctx *c, ast_tensor *x, ast_tensor *pos)
{
    ast_tensor *u = ast_relu(c, model_apply(c, x, &h->pos_feat));
    ast_tensor *len = ast_vecnorm(c, pos);
    ast_tensor *feat = ast_concat(c, (ast_tensor *[]){u, pos, len}, 3);
    return model_rescale(c, pos, model_mlp2(c, feat, &h->pos_norm0, &h->pos_norm2, 0), len);
}

/* (p - mean of the set's valid cells) * m, for p already masked. */
static ast_tensor *centre(ast_ctx *c, const model_run *r, ast_tensor *p)
{
    ast_tensor *mu = ast_div(c, ast_sum_axis(c, p, 1), r->counts);
    return ast_mul(c, ast_sub(c, p, mu), r->mask3);
}

ast_model_out model_heads_forward(const model_heads *h, const model_run *r, model_state in)
{
    ast_ctx *c = r->c;
    ast_model_out out;
    out.expression = ast_mul(c, model_mlp2(c, in.x, &h->expr0, &h->expr2, 0), r->mask3);
    out.positions = centre(c, r, ast_mul(c, position_head(h, c, in.x, in.pos), r->mask3));
    return out;
}
