/* Shared by evaluate.c and evaluate_baselines.c; not a public interface. */
#ifndef ALPHAST_EVALUATE_INTERNAL_H
#define ALPHAST_EVALUATE_INTERNAL_H

#include "eval/evaluate.h"

/* What one evaluation works on. */
typedef struct eval_run {
    const ast_set_sampler *sets; /* the held-out split and its length unit */
    const ast_split *train;      /* the cells the kNN baselines look up */
    const ast_eval_config *ec;
    const ast_eval_sets *truth;
    ast_eval_report *r;
} eval_run;

/* Scores one placement (pos [B,N,3] and/or expr [B,N,G], per the mode). */
void eval_score(const eval_run *run, ast_train_mode mode, const float *pos, const float *expr, ast_eval_scores *out);

/* Scores every baseline that applies to the task on the same cells. */
void eval_baselines(const eval_run *run, ast_eval_task *task);

/* Keeps the placement pos [B, N, 3] of the sets in run->r->placement
 * (eval_placement.c). */
void eval_keep_placement(const eval_run *run, const float *pos);
void eval_placement_free(ast_eval_placement *p);

/* The number of valid cells of set b (they come first). */
int eval_set_cells(const ast_eval_sets *t, int b);

#endif
