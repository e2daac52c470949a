/* The combine from ops: each row's routing weight gathered from the
 * weights (gather_rows), then the weighted rows added into their tokens
 * (scatter_add_rows with per-row weights). Both ops carry their own
 * backward (dy, the gathered weights' gradient, and its scatter back into
 * the weights), so this runs on every backend: it is the "cuda" kernel of
 * "moe_combine", with no CUDA code in the plugin. On the CPU it gives the
 * fused kernel's numbers (each token's rows are added in row order in
 * both); the fused one saves the [rows, 1] gathered weights and runs the
 * tokens on the host's threads. */
#include "moe.h"

ast_tensor *moe_combine_ops(ast_ctx *c, int64_t tokens, ast_tensor *y, ast_tensor *weights, const int32_t *token,
                            const int32_t *weight)
{
    ast_tensor *row_weight = ast_gather_rows(c, weights, weight, y->shape[0]);
    return ast_scatter_add_rows(c, y, token, row_weight, tokens);
}
