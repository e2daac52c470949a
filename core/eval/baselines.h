/* alphast/baselines.h: what the model is compared against on the held-out
 * sets. Training-free embeddings of the expression (classical MDS, Isomap:
 * model/expr_embed.h, shared with the model's structural prior) and
 * baselines that look up the training cells (k-NN regression, the mean
 * profile). Floats in and out like the rest of the evaluation, double
 * inside; positions are rows of 3 with the unused dimensions 0. */
#ifndef ALPHAST_BASELINES_H
#define ALPHAST_BASELINES_H

#include <stdint.h>

#include "model/expr_embed.h" /* MDS, Isomap and their distance blocks */

/* ---- baselines that use the training cells -------------------------------- */

/* Writes reference row i's G expression values to out. */
typedef void (*ast_reference_row_fn)(const void *ctx, int64_t i, float *out);

/* Cells with known positions [n, 3] and expression [n, G] in one frame.
 * The expression is read a row at a time through expr_row(ctx, ...): a
 * dense copy of a large reference would dwarf the rest of a run. */
typedef struct ast_reference_cells {
    int64_t n;
    int G;
    const float *pos;
    ast_reference_row_fn expr_row;
    const void *ctx;
} ast_reference_cells;

/* expr_to_pos: each query row of x [n, ref->G] gets the mean position of
 * its k nearest reference cells in expression space (k cut to ref->n). */
void ast_baseline_knn_positions(const ast_reference_cells *ref, const float *x, int n, int k, float *pos);

/* pos_to_expr: every one of the n cells gets the mean reference profile. */
void ast_baseline_mean_profile(const ast_reference_cells *ref, int n, float *expr);

/* pos_to_expr: each query position (rows of 3) gets the mean expression of
 * its k spatially nearest reference cells (k cut to ref->n). */
void ast_baseline_spatial_knn_expr(const ast_reference_cells *ref, const float *pos, int n, int k, float *expr);

/* expr_to_pos: a per-cell MLP regressor (CeLEry-like) fitted on the
 * reference cells, expression -> their first `dims` coordinates, by MSE
 * with AdamW (baselines_mlp.c): two ReLU hidden layers, inputs and targets
 * standardised on the fitting cells, early stopping on a held-back part. */
typedef struct ast_mlp_regressor_config {
    int hidden;          /* width of both hidden layers */
    int max_epochs;      /* evaluation.mlp_epochs */
    int patience;        /* epochs without a lower validation loss before stopping */
    int batch;           /* cells per AdamW step */
    float lr, weight_decay;
    double val_fraction; /* of the fitting cells held back for early stopping */
    int64_t max_cells;   /* fitting cells drawn at most (the cost of a large reference) */
    uint64_t seed;       /* initialisation, the held-back cells and the batch order */
} ast_mlp_regressor_config;

/* The evaluation's settings: 128 wide, batches of 128, lr 1e-3. */
ast_mlp_regressor_config ast_mlp_regressor_defaults(int max_epochs, uint64_t seed);

typedef struct ast_mlp_regressor ast_mlp_regressor;
ast_mlp_regressor *ast_mlp_regressor_fit(const ast_reference_cells *ref, int dims, const ast_mlp_regressor_config *cfg);
/* pos [n, 3] of the n rows of x [n, G] (the axes from dims on are 0). */
void ast_mlp_regressor_predict(ast_mlp_regressor *m, const float *x, int n, float *pos);
void ast_mlp_regressor_free(ast_mlp_regressor *m);

/* ---- building blocks ------------------------------------------------------ */

/* d2 [n, m] = squared Euclidean distances between the rows of a [n, D] and
 * b [m, D], as |a|^2 + |b|^2 - 2 a.b (one BLAS product) clamped at 0.
 * b == a (with m == n) gives an exactly symmetric matrix with a 0 diagonal. */
void ast_sq_distances(const float *a, int n, const float *b, int m, int D, double *d2);

/* The indices of the k smallest of d[0..m) in ascending order, ties by
 * index, leaving out index `skip` (-1: none); needs k <= the candidates. */
void ast_k_nearest(const double *d, int m, int k, int skip, int *out);

#endif
