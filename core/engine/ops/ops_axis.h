/* ops_axis.h (core-internal): a tensor seen around one axis as
 * [outer, len, inner], the layout every axis-wise op walks. */
#ifndef ALPHAST_OPS_AXIS_H
#define ALPHAST_OPS_AXIS_H

#include "engine/engine.h"

typedef struct ast_axis_split {
    int axis;      /* normalised to 0..ndim-1 */
    int64_t outer; /* product of the dims before the axis */
    int64_t len;   /* the axis itself */
    int64_t inner; /* product of the dims after it: the stride along it */
} ast_axis_split;

/* axis < 0 counts from the end; out of range aborts naming `op`. */
ast_axis_split ast_split_axis(const ast_tensor *t, int axis, const char *op);

#endif
