/* alphast/evaluate.h: held-out evaluation of a trained model — generate the
 * cells of fixed neighbourhood sets of a split with the sampler, score them
 * with the metrics of alphast/metrics.h, and score random cells the same
 * way, so every number comes with its chance level. */
#ifndef ALPHAST_EVALUATE_H
#define ALPHAST_EVALUATE_H

#include <stdio.h>

#include "alphast/config.h"
#include "alphast/data.h"
#include "alphast/metrics.h"
#include "alphast/sample.h"

typedef struct ast_eval_config {
    ast_train_mode mode; /* the mode the model was trained in (training_mode) */
    int sets;            /* evaluation.sets: fixed sets of the split */
    int k;               /* evaluation.k_neighbors */
    int num_steps;       /* sampling.num_steps */
    ast_sample_return ret; /* sampling.return */
    uint64_t seed;       /* seed.value: the sets' centres and the sampler */
    int *genes;          /* evaluation.morans_genes as gene indices; NULL: the most variable */
    int n_genes;
} ast_eval_config;

/* From a loaded config; gene names are looked up in d. 0, or -1 with e set
 * (e.g. an unknown gene, located at its line in the config). */
int ast_eval_config_from_cfg(const ast_cfg *cfg, const ast_dataset *d, ast_eval_config *ec, ast_error *e);
void ast_eval_config_free(ast_eval_config *ec);

/* How well one set of cells matches the truth. */
typedef struct ast_eval_scores {
    ast_pos_metrics pos;   /* when positions were generated */
    ast_expr_metrics expr; /* when expression was generated */
    double *morans;        /* [n_genes] Moran's I of the true expression on these coordinates */
} ast_eval_scores;

typedef struct ast_eval_task {
    ast_train_mode mode;   /* what was generated */
    ast_eval_scores model; /* by the sampler */
    ast_eval_scores random; /* N(0, 1) positions / expression */
} ast_eval_task;

enum { AST_EVAL_MAX_TASKS = 2, AST_EVAL_DEFAULT_GENES = 5 };

typedef struct ast_eval_report {
    const char *split;
    int sets, set_size, cells, k, num_steps, evaluations;
    ast_sample_return ret;
    int n_genes;
    int *genes;               /* indices of the Moran's I genes */
    const char *const *gene_names; /* [n_genes], borrowed from the dataset */
    double *morans_true;      /* [n_genes] on the true coordinates */
    ast_eval_task tasks[AST_EVAL_MAX_TASKS];
    int n_tasks;              /* the training mode's task; for joint also expr_to_pos */
    double seconds;
} ast_eval_report;

/* Evaluates model m on ec->sets sets of `sets->split` (sets centred on
 * fixed cells; sets->rotate and expr_dropout should be off). Positions
 * are in the sets' units (divided by sets->pos_scale). */
int ast_evaluate(ast_model *m, const ast_schedule *s, const ast_set_sampler *sets, const ast_eval_config *ec,
                 const char *split_name, ast_eval_report *r, ast_error *e);
void ast_eval_report_free(ast_eval_report *r);

/* A short table: each metric for the model and for random cells. */
void ast_eval_report_print(const ast_eval_report *r, FILE *out);
/* The whole report as JSON, written atomically. */
int ast_eval_report_write_json(const ast_eval_report *r, const char *path, ast_error *e);

#endif
