/* alphast/baselines.h: what the model is compared against on the held-out
 * sets. Training-free embeddings of the expression (classical MDS, Isomap)
 * and baselines that look up the training cells (k-NN regression, the mean
 * profile). Floats in and out like the rest of the evaluation, double
 * inside; positions are rows of 3 with the unused dimensions 0. */
#ifndef ALPHAST_BASELINES_H
#define ALPHAST_BASELINES_H

#include <stdint.h>

/* ---- expr_to_pos without training ---------------------------------------- */

/* Classical (Torgerson) MDS of the Euclidean distances between the n rows
 * of x [n, G]: the squared distances double-centred, coordinates the top
 * `dims` (1..3) eigenvectors times sqrt(max(eigenvalue, 0)), largest
 * first. Each axis is oriented so that its largest-magnitude coordinate is
 * positive (the sign is otherwise arbitrary; the metrics ignore it). */
void ast_baseline_mds(const float *x, int n, int G, int dims, float *pos);

/* Isomap: the undirected k-NN graph of x's rows (Euclidean edge lengths,
 * neighbour ties broken by index; k above n - 1 is cut to n - 1), geodesic
 * distances by Dijkstra from every cell, then classical MDS of those. A
 * disconnected graph is joined first as scikit-learn (>= 1.1) does: every
 * pair of components gets an edge between its two closest cells. */
void ast_baseline_isomap(const float *x, int n, int G, int dims, int k, float *pos);

/* Mean over the n cells (rows of 3) of the distance to the nearest other
 * cell; 0 for fewer than 2 cells. */
double ast_mean_nn_distance(const float *pos, int n);

/* Scales pos in place (about the origin) so that its mean nearest-neighbour
 * distance is `spacing`: an embedding of expression has no length unit, so
 * the evaluation gives it the training cells' spacing. No-op when spacing
 * is 0 or all cells coincide. */
void ast_rescale_to_spacing(float *pos, int n, double spacing);

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
