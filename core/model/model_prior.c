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

void ast_model_prior_wants(const ast_model *m, int *prior, int *geodesic)
{
    *prior = m->cfg.prior.kind != AST_PRIOR_NONE;
    *geodesic = m->wants_geodesic;
}

void ast_model_prior_host(ast_model *m, int B, int N, const float *expr, const float *mask, float *prior, float *geo)
{
    if (!m->prior_cache) return;
    ast_prior_config pc = m->cfg.prior;
    if (pc.dims == 0) pc.dims = MODEL_POS_DIM;
    pc.geodesic = m->wants_geodesic;
    ast_prior_batch(m->prior_cache, &pc, B, N, m->cfg.num_genes, expr, mask,
                    pc.kind != AST_PRIOR_NONE ? prior : NULL, pc.geodesic ? geo : NULL);
}

/* Without given inputs: both computed from the expression, read back from
 * a device (which waits for the ops before it) and uploaded again. */
static ast_model_prior_in computed(ast_model *m, model_run *r, ast_tensor *expression)
{
    int64_t b = expression->shape[0], n = expression->shape[1];
    int with_prior, with_geo;
    ast_model_prior_wants(m, &with_prior, &with_geo);
    const float *x = model_host_data(r->c, expression), *mask = model_host_data(r->c, r->mask);
    float *prior = with_prior ? ast_alloc(r->c, (size_t)(b * n * MODEL_POS_DIM) * sizeof *prior) : NULL;
    float *geo = with_geo ? ast_alloc(r->c, (size_t)(b * n * n) * sizeof *geo) : NULL;
    ast_model_prior_host(m, (int)b, (int)n, x, mask, prior, geo);
    ast_model_prior_in in = {NULL, NULL};
    if (prior) in.prior = ast_tensor_from(r->c, 3, (int64_t[]){b, n, MODEL_POS_DIM}, prior);
    if (geo) in.geodesic = ast_tensor_from(r->c, 3, (int64_t[]){b, n, n}, geo);
    return in;
}

/* Given inputs must be the ones the model needs, shaped for this batch. */
static void check_given(const ast_model *m, const ast_model_prior_in *in, const ast_tensor *expression)
{
    int with_prior, with_geo;
    ast_model_prior_wants(m, &with_prior, &with_geo);
    int64_t b = expression->shape[0], n = expression->shape[1];
    const ast_tensor *p = in->prior, *g = in->geodesic;
    AST_ASSERT(!with_prior || (p && p->ndim == 3 && p->shape[0] == b && p->shape[1] == n && p->shape[2] == MODEL_POS_DIM),
               "model: the given prior is missing or not [%lld, %lld, 3]", (long long)b, (long long)n);
    AST_ASSERT(!with_geo || (g && g->ndim == 3 && g->shape[0] == b && g->shape[1] == n && g->shape[2] == n),
               "model: the given geodesics are missing or not [%lld, %lld, %lld]", (long long)b, (long long)n,
               (long long)n);
}

ast_tensor *model_prior_tensor(ast_model *m, model_run *r, ast_tensor *expression, const ast_model_prior_in *in)
{
    if (!m->prior_cache) return NULL;
    if (in) check_given(m, in, expression);
    ast_model_prior_in use = in ? *in : computed(m, r, expression);
    r->geodesic = m->wants_geodesic ? use.geodesic : NULL;
    if (m->cfg.prior.kind == AST_PRIOR_NONE) return NULL;
    model_tap(r, use.prior, "prior");
    return use.prior;
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
