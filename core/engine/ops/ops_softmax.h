/* ops_softmax.h (core-internal): the CPU softmax's row and slab loops
 * (ops_norm.c), shared with the fused linear attention (ops_attention.c)
 * so that both normalise with the same float operations. */
#ifndef ALPHAST_OPS_SOFTMAX_H
#define ALPHAST_OPS_SOFTMAX_H

#include <stdint.h>

/* y = softmax(x) over one contiguous row of len > 0 (x and y apart). */
void ast_softmax_row(const float *restrict x, float *restrict y, int64_t len);
/* Columns [j0, j1) of a [len, inner] slab (row stride inner) normalised
 * down each column, len > 0; m and s: scratch indexed by the column. y
 * may be x (each element is read before it is written). */
void ast_softmax_slab(const float *x, float *y, int64_t len, int64_t inner, int64_t j0, int64_t j1, float *m, float *s);
/* The slab's backward: dx = y (dy - sum over the column of dy y), added
 * into dx, or written when assign (dx may then be dy); dot: scratch
 * indexed by the column. */
void ast_softmax_slab_backward(const float *y, const float *dy, float *dx, int64_t len, int64_t inner, int64_t j0,
                               int64_t j1, float *dot, int assign);

#endif
