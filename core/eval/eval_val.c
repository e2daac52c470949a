/* The sampled validation score (see alphast/eval_val.h). */
#include <stdlib.h>
#include <string.h>

#include "eval/eval_val.h"

/* Its own stream, apart from the evaluation's (evaluate.c), so that the
 * validation cells' sets and noise never depend on the test's. */
#define VAL_SEED 0x5a3b1ed0ull

void ast_val_scorer_init(ast_val_scorer *v, const ast_set_sampler *val, const ast_eval_config *ec, int steps)
{
    memset(v, 0, sizeof *v);
    if (ec->protocol == AST_EVAL_REGION)
        ast_eval_sets_region(val, ec->max_set_size, ec->seed ^ VAL_SEED, &v->truth);
    else
        ast_eval_sets_oracle(val, ec->sets, ec->seed ^ VAL_SEED, &v->truth);
    v->sc = (ast_sampler_config){ec->mode, steps, ec->ret, ec->seed ^ VAL_SEED, ec->pos_param, ec->align, ec->precision, 0};
    v->k = ec->k;
    const ast_eval_sets *t = &v->truth;
    /* Expression given, not generated: the sampler is spared the [B, N, G] copy. */
    if (ast_mode_noises(ec->mode, AST_MOD_EXPR)) v->out_expr = ast_xcalloc((size_t)t->B * t->N * t->G, sizeof(float));
    v->out_pos = ast_xcalloc((size_t)t->B * t->N * 3, sizeof(float));
}

double ast_val_scorer_score(void *ud, ast_model *m, const ast_schedule *s)
{
    ast_val_scorer *v = ud;
    const ast_eval_sets *t = &v->truth;
    ast_sample(m, s, &v->sc, t->B, t->N, t->expr, t->pos, t->mask, v->out_expr, v->out_pos);
    ast_eval_scores sc = {0};
    if (ast_mode_noises(v->sc.mode, AST_MOD_POS)) ast_pos_metrics_compute(t->B, t->N, v->out_pos, t->pos, t->mask, v->k, &sc.pos);
    if (ast_mode_noises(v->sc.mode, AST_MOD_EXPR))
        ast_expr_metrics_compute(t->B, t->N, t->G, v->out_expr, t->expr, t->mask, &sc.expr);
    return ast_eval_primary(v->sc.mode, &sc);
}

void ast_val_scorer_free(ast_val_scorer *v)
{
    ast_eval_sets_free(&v->truth);
    free(v->out_expr), free(v->out_pos);
    memset(v, 0, sizeof *v);
}
