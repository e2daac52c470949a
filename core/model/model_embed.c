/* Input encoders (docs/model.md §2.2): expression and diffusion-time MLPs, each
 * ending in a ReLU, and the PositionMLP that relearns each cell's length. */
#include "model_internal.h"

void model_embed_register(model_embed *e, ast_params *p, const ast_model_config *cfg)
{
    ast_scope *s = ast_scope_new(p, "");
    e->expr0 = model_linear_new(s, "mlp_in_expression.0", cfg->num_genes, cfg->expr_hidden, 1);
    e->expr2 = model_linear_new(s, "mlp_in_expression.2", cfg->expr_hidden, cfg->d_model, 1);
    e->time0 = model_linear_new(s, "mlp_in_diffusion_time.0", 1, cfg->time_hidden, 1);
    e->time2 = model_linear_new(s, "mlp_in_diffusion_time.2", cfg->time_hidden, cfg->d_time, 1);
    e->pm0 = model_linear_new(s, "position_mlp.mlp.0", 1, cfg->pos_hidden, 1);
    e->pm2 = model_linear_new(s, "position_mlp.mlp.2", cfg->pos_hidden, 1, 1);
}

/* pos * r' / (r + 1e-6) with r' = MLP(r), r = |pos|. */
static ast_tensor *position_mlp(const model_embed *e, ast_ctx *c, ast_tensor *pos)
{
    ast_tensor *len = ast_vecnorm(c, pos);
    return model_rescale(c, pos, model_mlp2(c, len, &e->pm0, &e->pm2, 0), len);
}

model_state model_embed_forward(const model_embed *e, const model_run *r, ast_tensor *expression,
                                ast_tensor *t, ast_tensor *positions)
{
    model_state s;
    s.x = model_mlp2(r->c, expression, &e->expr0, &e->expr2, 1);
    s.y = model_mlp2(r->c, t, &e->time0, &e->time2, 1);
    s.pos = position_mlp(e, r->c, positions);
    model_tap(r, s.x, "embed.expression");
    model_tap(r, s.y, "embed.time");
    model_tap(r, s.pos, "embed.positions");
    return s;
}
