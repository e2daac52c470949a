/* alphast/evaluate.h: held-out evaluation of a trained model — place the
 * cells of a held-out split with the sampler (by default every cell of a
 * held-out region at once; see alphast/eval_sets.h), score them with the
 * metrics of alphast/metrics.h, and score the baselines of
 * alphast/baselines.h on the same cells with the same code, so every
 * number comes with what a model has to beat. Cells, sets and sampler
 * noise come from evaluation.seed, not the training seed: every run of a
 * sweep is scored on the same cells. */
#ifndef ALPHAST_EVALUATE_H
#define ALPHAST_EVALUATE_H

#include <stdio.h>

#include "config/config.h"
#include "data/data.h"
#include "eval/eval_sets.h"
#include "eval/metrics.h"
#include "eval/sample.h"
#include "eval/uncertainty.h"

typedef struct ast_eval_config {
    ast_train_mode mode;         /* the mode the model was trained in (training_mode) */
    ast_eval_protocol protocol;  /* evaluation.protocol */
    int sets;                    /* evaluation.sets: oracle neighbourhoods scored */
    int max_set_size;            /* evaluation.max_set_size: regions above are split by expression */
    int k;                       /* evaluation.k_neighbors: graph metrics and the kNN baselines */
    int num_steps;               /* sampling.num_steps */
    ast_sample_return ret;       /* sampling.return */
    uint64_t seed;               /* evaluation.seed */
    int noise_seeds;             /* evaluation.noise_seeds: samples per set for the uncertainty measures */
    int mlp_epochs;              /* evaluation.mlp_epochs; 0: no mlp_regression baseline (evaluation.mlp_regression false) */
    ast_pos_param pos_param;     /* how the model's position output is read (as trained) */
    int align;                   /* align x0 predictions to the state while sampling (aligned loss) */
    ast_precision precision;     /* of the sampler's GEMMs (training.precision, as trained) */
    int *genes;                  /* evaluation.morans_genes as gene indices; NULL: the most spatially variable */
    int n_genes;
    ast_split_opts split;        /* the held-out protocol (data.split ...), named in the results */
    ast_split_kind split_kind;   /* split.kind resolved on the data */
} ast_eval_config;

/* From a loaded config; gene names are looked up in d. 0, or -1 with e set
 * (e.g. an unknown gene, located at its line in the config). */
int ast_eval_config_from_cfg(const ast_cfg *cfg, const ast_dataset *d, ast_eval_config *ec, ast_error *e);
void ast_eval_config_free(ast_eval_config *ec);

/* The cells of sets->split an evaluation places, grouped into sets per
 * ec->protocol from evaluation.seed: what ast_evaluate scores and
 * `alphast-run sample` writes. */
void ast_eval_make_sets(const ast_set_sampler *sets, const ast_eval_config *ec, ast_eval_sets *out);
/* The sampler's seed for the evaluation's placement number `noise` (0: the
 * one scored and written; 1..: the further samples of the uncertainty
 * measures). */
uint64_t ast_eval_noise_seed(uint64_t eval_seed, uint64_t noise);

/* How well one placement of the cells matches the truth. */
typedef struct ast_eval_scores {
    ast_pos_metrics pos;   /* when positions were generated */
    ast_expr_metrics expr; /* when expression was generated */
    double *morans;        /* [n_genes] Moran's I of the true expression on these coordinates */
} ast_eval_scores;

enum { AST_EVAL_MAX_TASKS = 2, AST_EVAL_MAX_BASELINES = 8, AST_EVAL_MAX_STEP_COUNTS = 3, AST_EVAL_DEFAULT_GENES = 5 };

typedef struct ast_eval_baseline {
    const char *name;       /* random, expression_mds, ... (the table in evaluate_baselines.c) */
    const char *short_name; /* its column head in the printed table */
    ast_eval_scores scores;
} ast_eval_baseline;

typedef struct ast_eval_task {
    ast_train_mode mode;    /* what was generated */
    ast_eval_scores model;  /* by the sampler */
    ast_eval_baseline baselines[AST_EVAL_MAX_BASELINES];
    int n_baselines;
    int best;               /* index of the best baseline on the task's primary metric */
    ast_uncertainty uncertainty; /* positions: of evaluation.noise_seeds samples per set (alphast/uncertainty.h) */
    int step_counts[AST_EVAL_MAX_STEP_COUNTS]; /* positions: the score at other sampler step counts */
    ast_pos_metrics by_steps[AST_EVAL_MAX_STEP_COUNTS];
    int n_step_counts;
} ast_eval_task;

/* Where the model put the held-out cells of the expr_to_pos task, for
 * people to look at: per set the true positions and the placed ones
 * aligned onto them (rotation or reflection, as the RMSD metric does; no
 * scaling, so a wrong scale shows), both in the data's units and centred
 * per set. Empty (B = 0) when no task placed cells. */
typedef struct ast_eval_placement {
    int B, N;
    int64_t *cells;       /* [B, N] dataset indices; -1 on padding */
    float *truth, *placed; /* [B, N, 3] */
} ast_eval_placement;

typedef struct ast_eval_report {
    const char *split;        /* the held-out part evaluated: test or val */
    ast_split_opts split_opts; /* the held-out protocol that dealt it (key borrowed from the config) */
    ast_split_kind split_kind; /* resolved */
    ast_eval_protocol protocol;
    uint64_t seed;
    int sets, set_size, cells, k, num_steps, evaluations;
    ast_sample_return ret;
    int n_genes;
    int *genes;               /* indices of the Moran's I genes */
    const char *const *gene_names; /* [n_genes], borrowed from the dataset */
    double *morans_true;      /* [n_genes] on the true coordinates */
    ast_eval_task tasks[AST_EVAL_MAX_TASKS];
    int n_tasks;              /* the training mode's task; for joint also expr_to_pos */
    ast_eval_placement placement;
    double seconds;
} ast_eval_report;

/* The primary metric of a task and its value in a score (higher is better):
 * knn_k10 for positions, pcc_gene for expression. */
const char *ast_eval_primary_name(ast_train_mode mode);
double ast_eval_primary(ast_train_mode mode, const ast_eval_scores *s);

/* Evaluates model m on the cells of `sets->split` (sets->rotate and
 * expr_dropout should be off); `train` is the training split, whose cells
 * the kNN baselines look up. Positions are in the sets' units (divided by
 * sets->pos_scale). */
int ast_evaluate(ast_model *m, const ast_schedule *s, const ast_set_sampler *sets, const ast_split *train,
                 const ast_eval_config *ec, const char *split_name, ast_eval_report *r, ast_error *e);
void ast_eval_report_free(ast_eval_report *r);

/* A short table: each metric for the model and every baseline. */
void ast_eval_report_print(const ast_eval_report *r, FILE *out);
/* The whole report as JSON, written atomically. */
int ast_eval_report_write_json(const ast_eval_report *r, const char *path, ast_error *e);
/* The placement as CSV, written atomically: a row per cell with its set,
 * name (obs_names, else its row number), cell type (when the data has a
 * cell type column, else empty), true x, y, z and placed x, y, z. Nothing
 * is written when no task placed cells. */
int ast_eval_placement_write_csv(const ast_eval_report *r, const ast_dataset *d, const char *path, ast_error *e);

#endif
