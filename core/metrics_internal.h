/* Helpers shared by metrics.c and metrics_spatial.c; not a public interface. */
#ifndef ALPHAST_METRICS_INTERNAL_H
#define ALPHAST_METRICS_INTERNAL_H

#include <math.h>

#include "alphast/metrics.h"

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

/* A value with its index, ordered by value then index (stable ties). */
typedef struct ast_indexed {
    double v;
    int i;
} ast_indexed;

int ast_cmp_indexed(const void *a, const void *b);

#endif
