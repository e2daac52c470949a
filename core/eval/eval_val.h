/* alphast/eval_val.h: the sampled validation score that model selection
 * uses (training.select_on: sampled): the validation cells placed as the
 * evaluation places the test cells (evaluation.protocol's sets, on the
 * val split), by the sampler in training.val_sample_steps steps, scored by
 * the task's primary metric (ast_eval_primary). Training calls it through
 * ast_train_config.val_score, since the train layer is below this one. */
#ifndef ALPHAST_EVAL_VAL_H
#define ALPHAST_EVAL_VAL_H

#include "eval/evaluate.h"

typedef struct ast_val_scorer {
    ast_eval_sets truth;   /* made once: the same cells and sets every epoch */
    ast_sampler_config sc; /* a fixed noise seed, so that epochs compare */
    int k;                 /* evaluation.k_neighbors */
    float *out_expr, *out_pos;
} ast_val_scorer;

/* The sets of val->split as ec's protocol forms them, from ec->seed;
 * `steps` sampler steps. */
void ast_val_scorer_init(ast_val_scorer *v, const ast_set_sampler *val, const ast_eval_config *ec, int steps);
/* The primary metric of m's sampled placement (higher is better; NaN when
 * no set is large enough to score); an ast_val_score_fn. */
double ast_val_scorer_score(void *v, ast_model *m, const ast_schedule *s);
void ast_val_scorer_free(ast_val_scorer *v);

#endif
