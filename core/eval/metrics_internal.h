/* Helpers shared by metrics.c, metrics_spatial.c and metrics_graph.c; not a
 * public interface. */
#ifndef ALPHAST_METRICS_INTERNAL_H
#define ALPHAST_METRICS_INTERNAL_H

#include <math.h>

#include "eval/metrics.h"

/* Mean that skips NaNs (numpy nanmean); 0 when nothing is left. */
typedef struct ast_nanmean {
    double sum;
    int n;
} ast_nanmean;

static inline void ast_nanmean_add(ast_nanmean *a, double v)
{
    if (!isnan(v)) a->sum += v, a->n++;
}

static inline double ast_nanmean_value(const ast_nanmean *a) { return a->n ? a->sum / a->n : 0.0; }

/* The same mean, but NaN when nothing is left: a metric no set could
 * measure must not read as a score of 0. */
static inline double ast_nanmean_or_nan(const ast_nanmean *a) { return a->n ? a->sum / a->n : NAN; }

/* Euclidean distance of two rows of 3, in double. */
static inline double ast_dist3(const float *a, const float *b)
{
    double dx = (double)a[0] - b[0], dy = (double)a[1] - b[1], dz = (double)a[2] - b[2];
    return sqrt(dx * dx + dy * dy + dz * dz);
}

/* A value with its index, ordered by value then index (stable ties). */
typedef struct ast_indexed {
    double v;
    int i;
} ast_indexed;

int ast_cmp_indexed(const void *a, const void *b);

/* The k-NN scores of one set of n >= 2 points (rows of 3), sharing one
 * neighbour search: knn[i] at ast_knn_ks[i] and graph = {precision,
 * recall, F1} at k > 0; NaN where n is not above the k in question. */
void ast_neighbour_scores(const float *truth, const float *pred, int n, int k, double knn[AST_N_KNN_KS],
                          double graph[3]);

#endif
