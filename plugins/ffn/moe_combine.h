/* The MoE plugin's fused combine (moe_combine.c): the CPU kernel of its op
 * "moe_combine", in the descriptor's kernels table. Apart from the plugin
 * kit so that tests/test_moe_combine.c, which links moe_combine.c next to
 * the core, can include it (the kit and the core define the same names). */
#ifndef ALPHAST_PLUGIN_MOE_COMBINE_H
#define ALPHAST_PLUGIN_MOE_COMBINE_H

#include "alphast/plugin.h"

/* out[token[i]] += weights[weight[i]] * y[i] for every row i of y [rows, E],
 * recorded on the tape with out as its output; several calls may add into
 * one out. token and weight live for the step. */
typedef void (*moe_combine_fn)(ast_ctx *c, ast_tensor *out, ast_tensor *y, ast_tensor *weights,
                               const int32_t *token, const int32_t *weight);
void moe_combine(ast_ctx *c, ast_tensor *out, ast_tensor *y, ast_tensor *weights, const int32_t *token,
                 const int32_t *weight);

#endif
