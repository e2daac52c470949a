/* model/expr_embed.h: training-free embeddings of a set's expression
 * (classical MDS, Isomap) and the distance blocks they are built of. The
 * evaluation scores them as baselines (eval/baselines.h); the model uses
 * them as its structural prior (model/prior.h). Floats in and out, double
 * inside; positions are rows of 3 with the unused dimensions 0. */
#ifndef ALPHAST_EXPR_EMBED_H
#define ALPHAST_EXPR_EMBED_H

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

/* Isomap's two halves: the geodesic distances [n, n] (not squared) of
 * x's rows along the joined k-NN graph, and the embedding from them
 * (dist is destroyed), for a caller that wants the distances too. */
void ast_expr_geodesics(const float *x, int n, int G, int k, double *dist);
void ast_isomap_from_geodesics(double *dist, int n, int dims, float *pos);

/* Mean over the n cells (rows of 3) of the distance to the nearest other
 * cell; 0 for fewer than 2 cells. */
double ast_mean_nn_distance(const float *pos, int n);

/* Scales pos in place (about the origin) so that its mean nearest-neighbour
 * distance is `spacing`: an embedding of expression has no length unit, so
 * the evaluation gives it the training cells' spacing. No-op when spacing
 * is 0 or all cells coincide. */
void ast_rescale_to_spacing(float *pos, int n, double spacing);

/* ---- building blocks ------------------------------------------------------ */

/* d2 [n, m] = squared Euclidean distances between the rows of a [n, D] and
 * b [m, D], as |a|^2 + |b|^2 - 2 a.b (one BLAS product) clamped at 0.
 * b == a (with m == n) gives an exactly symmetric matrix with a 0 diagonal. */
void ast_sq_distances(const float *a, int n, const float *b, int m, int D, double *d2);

/* The indices of the k smallest of d[0..m) in ascending order, ties by
 * index, leaving out index `skip` (-1: none); needs k <= the candidates. */
void ast_k_nearest(const double *d, int m, int k, int skip, int *out);

#endif
