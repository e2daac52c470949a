/* A straightforward double-precision version of the example attention
 * (examples/attn_distbias), written from its formula independently of the
 * plugin and of the host ops, for value checks. */
#ifndef ALPHAST_TEST_DISTBIAS_REFERENCE_H
#define ALPHAST_TEST_DISTBIAS_REFERENCE_H

#include "engine/engine.h"

typedef struct db_dims {
    int B, N, E, H, K;
    double max_distance;
    int gate; /* use_gate */
} db_dims;

/* x [B, N, E], positions [B, N, 3], mask [B, N] or NULL (padded keys get
 * no weight), out [B, N, E]; parameters are "<prefix>.<name>" in p. */
void ref_distbias(const ast_params *p, const char *prefix, db_dims d, const float *x, const float *pos,
                  const float *mask, double *out);

/* Euclidean distance between cells i and j of set b of positions [B, N, 3]. */
double ref_distance(const float *pos, int N, int b, int i, int j);

#endif
