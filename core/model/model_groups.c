/* Parameter counts per module group, and the active count they add up to
 * (MoE: the router and top-k experts of each layer count as active). */
#include "model_internal.h"

static int64_t lin_numel(const model_lin *l) { return l->w->size + (l->b ? l->b->size : 0); }

static int64_t lins_numel(const model_lin *l, int n)
{
    int64_t s = 0;
    for (int i = 0; i < n; i++) s += lin_numel(&l[i]);
    return s;
}

static void add_plugin(ast_param_group *g, const model_plugin *p)
{
    g->total += p->numel;
    g->active += p->desc->active_params ? p->desc->active_params(p->self) : p->numel;
}

static void add_fixed(ast_param_group *g, int64_t n)
{
    g->total += n;
    g->active += n;
}

void ast_model_param_groups(const ast_model *m, ast_param_group out[AST_N_PARAM_GROUPS])
{
    static const char *const names[AST_N_PARAM_GROUPS] = {
        "input encoders", "attention wrappers", "attention plugin", "ffn plugin", "layer norms and time branch",
        "output heads"};
    for (int i = 0; i < AST_N_PARAM_GROUPS; i++) out[i] = (ast_param_group){names[i], 0, 0};
    const model_embed *e = &m->embed;
    add_fixed(&out[0], lins_numel((model_lin[]){e->expr0, e->expr2, e->time0, e->time2, e->pm0, e->pm2}, 6));
    for (int i = 0; i < m->cfg.num_layers; i++) {
        const model_layer *l = &m->layers[i];
        add_fixed(&out[1], lins_numel((model_lin[]){l->pos0, l->pos2, l->concat, l->expr0, l->expr2, l->head_pos,
                                                    l->head_expr, l->y_y}, 8));
        add_plugin(&out[2], &l->attn);
        add_plugin(&out[3], &l->ffn);
        add_fixed(&out[4], l->pos_norm_w->size + lins_numel((model_lin[]){l->norm1, l->norm2, l->lin_t1, l->lin_t2,
                                                                          l->norm_t1, l->norm_t2}, 6));
    }
    const model_heads *h = &m->heads;
    add_fixed(&out[5], lins_numel((model_lin[]){h->expr0, h->expr2, h->pos_feat, h->pos_norm0, h->pos_norm2}, 5));
    /* the structural prior: its input channels encode, its gain is part of the position output */
    if (m->prior_in.w) add_fixed(&out[0], lin_numel(&m->prior_in));
    if (m->prior_gain) add_fixed(&out[5], m->prior_gain->size);
}

/* Parameters outside the groups (the mask tokens a masking trainer adds to
 * the store) are always active. */
int64_t ast_model_active_param_count(const ast_model *m)
{
    ast_param_group g[AST_N_PARAM_GROUPS];
    ast_model_param_groups(m, g);
    int64_t n = ast_model_param_count(m);
    for (int i = 0; i < AST_N_PARAM_GROUPS; i++) n -= g[i].total - g[i].active;
    return n;
}
