/* Straightforward double-precision versions of the two attention blocks,
 * written from the spec (docs/model.md §2.5 and §2.6) independently of the plugins, for
 * value checks. Parameters are looked up in p by "<prefix>.<name>". */
#ifndef ALPHAST_TEST_ATTN_REFERENCE_H
#define ALPHAST_TEST_ATTN_REFERENCE_H

#include "engine/engine.h"

/* The parameter "<prefix>.<name>" of p; aborts naming it when it is missing. */
const float *ref_param(const ast_params *p, const char *prefix, const char *name);
/* y[r, o] = sum_i x[r, i] w[o, i] + b[o] for r < rows; b may be NULL. */
void ref_dense(const double *x, int rows, int in, const float *w, const float *b, int out, double *y);

typedef struct ref_dims {
    int B, N, E, H;
} ref_dims;

/* x [B, N, E], mask [B, N] or NULL (padded keys are left out of the
 * softmaxes; a set without valid cells keeps all), out [B, N, E]. */
void ref_linear_block(const ast_params *p, const char *prefix, ref_dims d, const float *x, const float *mask,
                      double *out);

/* gate_type 0 headwise, 1 elementwise, 2 none; no dropout. */
void ref_gated_block(const ast_params *p, const char *prefix, ref_dims d, int gate_type, int qk_norm,
                     const float *x, const float *mask, double *out);

#endif
