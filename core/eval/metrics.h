/* alphast/metrics.h: how close generated cells are to the truth (docs/model.md §7),
 * plus the spatial statistics issue 4 asks for (distance-matrix
 * correlations, Moran's I). Batches are B sets of N cells with a node mask
 * [B,N] (NULL = all valid); only valid cells count. */
#ifndef ALPHAST_METRICS_H
#define ALPHAST_METRICS_H

#include <stddef.h>

#include "engine/engine.h"

/* Expression, pooled over the valid cells of all sets (docs/model.md §7). */
typedef struct ast_expr_metrics {
    double mse, mae;
    double pcc_gene; /* per gene over cells; a gene constant in truth or prediction counts 0 */
    double pcc_cell; /* per cell over genes, likewise */
    double cosine;   /* per cell, averaged */
    double spearman; /* per gene; 0 for a gene constant in truth, skipped if constant in prediction */
} ast_expr_metrics;

void ast_expr_metrics_compute(int B, int N, int G, const float *pred, const float *truth, const float *mask,
                              ast_expr_metrics *out);

/* Positions, per set then averaged over the sets where each is defined.
 * k-NN preservation is measured at these fixed k so that runs with
 * different evaluation.k_neighbors stay comparable. */
enum { AST_N_KNN_KS = 3 };
extern const int ast_knn_ks[AST_N_KNN_KS]; /* 5, 10, 20 */

typedef struct ast_pos_metrics {
    double knn[AST_N_KNN_KS]; /* k-NN preservation at ast_knn_ks; sets with n > k; NaN if no set qualifies */
    double dist_row_spearman; /* per cell, Spearman of its true vs predicted distances to the others (LUNA);
                                 mean over cells, then sets with n > 2; NaN if none */
    double rmsd;              /* ast_rmsd_aligned: rigid, no scaling, input units; sets with n > 1; NaN if none */
    double graph_precision, graph_recall, graph_f1; /* ast_knn_graph_scores at k; sets with n > k; NaN if none */
    double dist_mse;          /* mean (D_pred - D_true)^2 over n^2 pairs; sets with n > 1 */
    double procrustes;        /* SciPy disparity in [0, 1]; sets with n > 2 */
    double dist_pearson;      /* correlation of the pairwise distances (i < j) */
    double dist_spearman;
    double energy_score;      /* the energy score of this placement as a point forecast (eval/uncertainty.h, S = 1):
                                 the mean over sets of the RMS error of its pairwise distances; set by the evaluation
                                 (evaluate.c), NaN from ast_pos_metrics_compute */
} ast_pos_metrics;

/* k (> 0) is the k-NN graph's (evaluation.k_neighbors). */
void ast_pos_metrics_compute(int B, int N, const float *pred, const float *truth, const float *mask, int k,
                             ast_pos_metrics *out);

/* ---- the table of metrics (metric_table.c) -------------------------------- */

/* Which way a metric is better; eval.json says it per key ("better":
 * "higher", "lower" or "closer_to_truth") and the report ranks by it. */
typedef enum ast_better { AST_BETTER_LOWER = -1, AST_BETTER_TRUTH = 0, AST_BETTER_HIGHER = 1 } ast_better;

/* The struct a metric's value is kept in, and eval.json's group for it. */
typedef enum ast_metric_group { AST_METRIC_POSITIONS, AST_METRIC_EXPRESSION } ast_metric_group;

typedef struct ast_metric_def {
    const char *name;       /* its key in eval.json */
    ast_metric_group group; /* ast_pos_metrics ("positions") or ast_expr_metrics ("expression") */
    size_t offset;          /* of its double in that struct */
    ast_better better;
    const char *label;      /* for people; NULL: the name says it */
} ast_metric_def;

/* Every metric eval.json reports, in the order it reports them. */
extern const ast_metric_def ast_metric_defs[];
extern const int ast_n_metric_defs;

/* m's value in an ast_pos_metrics or ast_expr_metrics (as m->group says). */
double ast_metric_value(const ast_metric_def *m, const void *metrics);
const char *ast_better_name(ast_better b);

/* Moran's I of one value per cell (values[(b*N + n) * stride]) on the
 * coordinates pos [B,N,3], averaged over sets with at least 3 valid cells:
 * Gaussian weights exp(-d^2 / 2h^2) with h the 25th percentile of the
 * set's non-zero distances, zero diagonal — the reference's morans_i. */
double ast_morans_i(int B, int N, const float *pos, const float *values, int stride, const float *mask);

/* The `count` genes with the largest Moran's I (ast_morans_i) of their
 * expression expr [B,N,G] on the true positions pos of these B sets,
 * largest first; ties by index. count <= G. */
void ast_most_spatial_genes(int B, int N, int G, const float *pos, const float *expr, const float *mask, int count,
                            int *out);

/* ---- building blocks (one set, or one pair of vectors) -------------------- */

/* Pearson r; NaN if either has standard deviation <= 1e-8. */
double ast_pearson(const double *x, const double *y, int n);
/* Spearman rho: Pearson r of the ranks, ties sharing their average rank. */
double ast_spearman(const double *x, const double *y, int n);
/* Ranks 1..n with ties averaged. */
void ast_ranks(const double *x, int n, double *rank);
/* SciPy procrustes(truth, pred) disparity of n points (rows of 3): both
 * centred and scaled to unit norm, pred mapped by the best rotation or
 * reflection and scale. 1 (nothing explained) if either has no spread. */
double ast_procrustes(const float *truth, const float *pred, int n);
/* Mean over points of |kNN_pred(i) & kNN_true(i)| / k (self excluded,
 * distance ties broken by index); requires n > k. */
double ast_knn_overlap(const float *truth, const float *pred, int n, int k);
/* The undirected k-NN graphs of truth and pred (edge i-j when j is among
 * i's k nearest or i among j's; ties by index), pooled over the set:
 * precision |E_pred & E_true| / |E_pred|, recall ... / |E_true|, F1 their
 * harmonic mean (0 when both are 0); requires n > k > 0. */
void ast_knn_graph_scores(const float *truth, const float *pred, int n, int k, double *precision, double *recall,
                          double *f1);
/* Mean over points of the Spearman rho between the point's distances to
 * the n-1 others in truth and in pred (LUNA's metric); points whose rho is
 * undefined (a constant row) are skipped; NaN if n < 3 or none is left. */
double ast_dist_row_spearman(const float *truth, const float *pred, int n);
/* sqrt(mean_i |R p_i - q_i|^2) of pred p onto truth q, both centred, R the
 * best rotation or reflection (ast_kabsch) — no scaling, so the value is
 * in the input's units. Planar sets (z = 0) are fine: the alignment is
 * free about the empty axis. */
double ast_rmsd_aligned(const float *truth, const float *pred, int n);

#endif
