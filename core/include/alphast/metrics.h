/* alphast/metrics.h: how close generated cells are to the truth (spec §7),
 * plus the spatial statistics issue 4 asks for (distance-matrix
 * correlations, Moran's I). Batches are B sets of N cells with a node mask
 * [B,N] (NULL = all valid); only valid cells count. */
#ifndef ALPHAST_METRICS_H
#define ALPHAST_METRICS_H

#include "alphast/core.h"

/* Expression, pooled over the valid cells of all sets (spec §7). */
typedef struct ast_expr_metrics {
    double mse, mae;
    double pcc_gene; /* per gene over cells; a gene constant in truth or prediction counts 0 */
    double pcc_cell; /* per cell over genes, likewise */
    double cosine;   /* per cell, averaged */
    double spearman; /* per gene; 0 for a gene constant in truth, skipped if constant in prediction */
} ast_expr_metrics;

void ast_expr_metrics_compute(int B, int N, int G, const float *pred, const float *truth, const float *mask,
                              ast_expr_metrics *out);

/* Positions, per set then averaged over the sets where each is defined. */
typedef struct ast_pos_metrics {
    double dist_mse;      /* mean (D_pred - D_true)^2 over n^2 pairs; sets with n > 1 */
    double procrustes;    /* SciPy disparity in [0, 1]; sets with n > 2 */
    double knn;           /* k-NN preservation; sets with n > k; 0 if none */
    double dist_pearson;  /* correlation of the pairwise distances (i < j) */
    double dist_spearman;
} ast_pos_metrics;

void ast_pos_metrics_compute(int B, int N, const float *pred, const float *truth, const float *mask, int k,
                             ast_pos_metrics *out);

/* Moran's I of one value per cell (values[(b*N + n) * stride]) on the
 * coordinates pos [B,N,3], averaged over sets with at least 3 valid cells:
 * Gaussian weights exp(-d^2 / 2h^2) with h the 25th percentile of the
 * set's non-zero distances, zero diagonal — the reference's morans_i. */
double ast_morans_i(int B, int N, const float *pos, const float *values, int stride, const float *mask);

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

#endif
