/* TEMPORARY while the op set lands: ops not implemented yet abort loudly.
 * Each block is deleted by the change that implements it; this file goes
 * away with the last block. */
#include "alphast/core.h"

/* ---- block A: shape and elementwise ops (ops_shape.c, ops_elementwise.c) ---- */
ast_tensor * ast_reshape(ast_ctx *c, ast_tensor *x, int ndim, const int64_t *shape) { AST_ASSERT(0, "op reshape is not implemented yet"); }
ast_tensor * ast_permute(ast_ctx *c, ast_tensor *x, const int *perm) { AST_ASSERT(0, "op permute is not implemented yet"); }
ast_tensor * ast_split_heads(ast_ctx *c, ast_tensor *x, int heads) { AST_ASSERT(0, "op split_heads is not implemented yet"); }
ast_tensor * ast_merge_heads(ast_ctx *c, ast_tensor *x) { AST_ASSERT(0, "op merge_heads is not implemented yet"); }
ast_tensor * ast_concat(ast_ctx *c, ast_tensor *const *xs, int n) { AST_ASSERT(0, "op concat is not implemented yet"); }
ast_tensor * ast_slice(ast_ctx *c, ast_tensor *x, int64_t start, int64_t len) { AST_ASSERT(0, "op slice is not implemented yet"); }
ast_tensor * ast_add(ast_ctx *c, ast_tensor *a, ast_tensor *b) { AST_ASSERT(0, "op add is not implemented yet"); }
ast_tensor * ast_sub(ast_ctx *c, ast_tensor *a, ast_tensor *b) { AST_ASSERT(0, "op sub is not implemented yet"); }
ast_tensor * ast_mul(ast_ctx *c, ast_tensor *a, ast_tensor *b) { AST_ASSERT(0, "op mul is not implemented yet"); }
ast_tensor * ast_div(ast_ctx *c, ast_tensor *a, ast_tensor *b) { AST_ASSERT(0, "op div is not implemented yet"); }
ast_tensor * ast_affine(ast_ctx *c, ast_tensor *x, float scale, float shift) { AST_ASSERT(0, "op affine is not implemented yet"); }
ast_tensor * ast_relu(ast_ctx *c, ast_tensor *x) { AST_ASSERT(0, "op relu is not implemented yet"); }
ast_tensor * ast_gelu(ast_ctx *c, ast_tensor *x) { AST_ASSERT(0, "op gelu is not implemented yet"); }
ast_tensor * ast_sigmoid(ast_ctx *c, ast_tensor *x) { AST_ASSERT(0, "op sigmoid is not implemented yet"); }
ast_tensor * ast_softplus(ast_ctx *c, ast_tensor *x) { AST_ASSERT(0, "op softplus is not implemented yet"); }
ast_tensor * ast_dropout(ast_ctx *c, ast_tensor *x, float p) { AST_ASSERT(0, "op dropout is not implemented yet"); }
/* ---- end of block A ---- */

/* keep this line between the blocks so their deletions merge cleanly */
