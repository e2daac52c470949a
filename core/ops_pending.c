/* TEMPORARY while the op set lands: ops not implemented yet abort loudly.
 * Each block is deleted by the change that implements it; this file goes
 * away with the last block. */
#include "alphast/core.h"


/* keep this line between the blocks so their deletions merge cleanly */

/* ---- block B: normalisation, reductions, routing, losses ---- */
ast_tensor * ast_softmax(ast_ctx *c, ast_tensor *x, int axis) { AST_ASSERT(0, "op softmax is not implemented yet"); }
ast_tensor * ast_layernorm(ast_ctx *c, ast_tensor *x, ast_tensor *w, ast_tensor *b, float eps) { AST_ASSERT(0, "op layernorm is not implemented yet"); }
ast_tensor * ast_rmsnorm(ast_ctx *c, ast_tensor *x, ast_tensor *w, float eps) { AST_ASSERT(0, "op rmsnorm is not implemented yet"); }
ast_tensor * ast_vecnorm(ast_ctx *c, ast_tensor *x) { AST_ASSERT(0, "op vecnorm is not implemented yet"); }
ast_tensor * ast_sum_axis(ast_ctx *c, ast_tensor *x, int axis) { AST_ASSERT(0, "op sum_axis is not implemented yet"); }
ast_tensor * ast_sum(ast_ctx *c, ast_tensor *x) { AST_ASSERT(0, "op sum is not implemented yet"); }
ast_tensor * ast_mean(ast_ctx *c, ast_tensor *x) { AST_ASSERT(0, "op mean is not implemented yet"); }
ast_tensor * ast_gather_rows(ast_ctx *c, ast_tensor *x, const int32_t *idx, int64_t n) { AST_ASSERT(0, "op gather_rows is not implemented yet"); }
ast_tensor * ast_scatter_add_rows(ast_ctx *c, ast_tensor *src, const int32_t *idx, ast_tensor *w, int64_t rows) { AST_ASSERT(0, "op scatter_add_rows is not implemented yet"); }
ast_tensor * ast_pdist(ast_ctx *c, ast_tensor *p) { AST_ASSERT(0, "op pdist is not implemented yet"); }
ast_tensor * ast_mse(ast_ctx *c, ast_tensor *a, ast_tensor *b, ast_tensor *mask) { AST_ASSERT(0, "op mse is not implemented yet"); }
/* ---- end of block B ---- */
