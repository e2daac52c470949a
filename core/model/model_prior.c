/* The structural prior inside the network (docs/model.md §2.12): the
 * per-set embedding of model/prior.h as input channels of every cell's
 * token, and as the base of the position prediction. */
#include "model_internal.h"

/* Sets remembered: a sampler's pass holds PASS_CELLS / N sets (eval/sample.c)
 * and revisits them at each of its steps. */
#define PRIOR_CACHE_SETS 256

void model_prior_register(ast_model *m)
{
    const ast_model_config *cfg = &m->cfg;
    for (int i = 0; i < cfg->num_layers; i++)
        m->wants_geodesic |= m->layers[i].attn.desc->wants_geodesic || m->layers[i].ffn.desc->wants_geodesic;
    if (cfg->prior.kind != AST_PRIOR_NONE || m->wants_geodesic) m->prior_cache = ast_prior_cache_new(PRIOR_CACHE_SETS);
    if (cfg->prior.kind == AST_PRIOR_NONE) return;
    ast_scope *s = ast_scope_new(m->params, "");
    if (cfg->prior_inputs) m->prior_in = model_linear_new(s, "prior_in", MODEL_POS_DIM, cfg->d_model, 1);
    /* Zero: the untrained network returns the prior exactly; the gain's
     * own gradient, sum(head * dL/dx0), is what opens the residual. */
    if (cfg->prior_residual) m->prior_gain = ast_param(s, "prior_gain", 1, (int64_t[]){1}, AST_INIT_ZERO, 0.0f);
}

ast_tensor *model_prior_tensor(ast_model *m, model_run *r, ast_tensor *expression)
{
    if (!m->prior_cache) return NULL;
    int64_t b = expression->shape[0], n = expression->shape[1], g = expression->shape[2];
    ast_prior_config pc = m->cfg.prior;
    if (pc.dims == 0) pc.dims = MODEL_POS_DIM;
    pc.geodesic = m->wants_geodesic;
    const float *x = model_host_data(r->c, expression), *mask = model_host_data(r->c, r->mask);
    int with_prior = pc.kind != AST_PRIOR_NONE;
    float *prior = with_prior ? ast_alloc(r->c, (size_t)(b * n * MODEL_POS_DIM) * sizeof *prior) : NULL;
    float *geo = pc.geodesic ? ast_alloc(r->c, (size_t)(b * n * n) * sizeof *geo) : NULL;
    ast_prior_batch(m->prior_cache, &pc, (int)b, (int)n, (int)g, x, mask, prior, geo);
    if (geo) r->geodesic = ast_tensor_from(r->c, 3, (int64_t[]){b, n, n}, geo);
    if (!with_prior) return NULL;
    ast_tensor *t = ast_tensor_from(r->c, 3, (int64_t[]){b, n, MODEL_POS_DIM}, prior);
    model_tap(r, t, "prior");
    return t;
}

ast_tensor *model_prior_inputs(const ast_model *m, const model_run *r, ast_tensor *x, ast_tensor *prior)
{
    if (!prior || !m->cfg.prior_inputs) return x;
    return ast_add(r->c, x, model_apply(r->c, prior, &m->prior_in));
}

/* prior + gain * head: both are masked and centred over the valid cells,
 * so the sum is too. */
ast_tensor *model_prior_residual(const ast_model *m, const model_run *r, ast_tensor *head, ast_tensor *prior)
{
    if (!prior || !m->cfg.prior_residual) return head;
    return ast_add(r->c, prior, ast_mul(r->c, head, m->prior_gain));
}
