/* The MoE plugin's combine, its fused op "moe_combine", in two kernels of
 * one type: the fused CPU kernel (moe_combine.c) and the same from ops
 * (moe_combine_ops.c), which runs on any backend and is the "cuda" entry
 * of the descriptor's kernels table. Apart from the plugin kit so that
 * tests/test_moe_combine.c, which links both next to the core, can include
 * it (the kit and the core define the same names). */
#ifndef ALPHAST_PLUGIN_MOE_COMBINE_H
#define ALPHAST_PLUGIN_MOE_COMBINE_H

#include "alphast/plugin.h"

/* A new [tokens, E] tensor whose row t is the sum over the rows i of
 * y [rows, E] with token[i] == t of weights[weight[i]] * y[i] (zeros for a
 * token no row names), recorded on the tape. weights holds one routing
 * weight per row ([M, 1]); token and weight are host memory that lives for
 * the step. */
typedef ast_tensor *(*moe_combine_fn)(ast_ctx *c, int64_t tokens, ast_tensor *y, ast_tensor *weights,
                                      const int32_t *token, const int32_t *weight);
ast_tensor *moe_combine(ast_ctx *c, int64_t tokens, ast_tensor *y, ast_tensor *weights, const int32_t *token,
                        const int32_t *weight);
ast_tensor *moe_combine_ops(ast_ctx *c, int64_t tokens, ast_tensor *y, ast_tensor *weights, const int32_t *token,
                            const int32_t *weight);

#endif
