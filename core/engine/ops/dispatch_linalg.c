/* linear, matmul and batched matmul: shapes, outputs and tape nodes; the
 * backends' kernels run the GEMMs (ops/ops_linalg.c, cuda/ops_linalg.cu). */
#include "engine/kernels.h"
#include "engine/ops/ops_plan.h"

/* y[.., out] = x[.., in] W[out, in]^T + b. */
ast_tensor *ast_linear(ast_ctx *c, ast_tensor *x, ast_tensor *w, ast_tensor *b)
{
    int64_t shape[AST_MAX_DIMS];
    ast_plan_linear(x, w, b, shape);
    return ast_op_run(c, AST_OP_linear, &(ast_node){.out = ast_empty(c, x->ndim, shape), .in = {x, w, b}, .n_in = 3});
}

/* saved: the ast_mm_shape plan. */
ast_tensor *ast_bmm(ast_ctx *c, ast_tensor *a, ast_tensor *b, int trans_a, int trans_b)
{
    int64_t shape[AST_MAX_DIMS];
    ast_mm_shape *s = ast_plan_bmm(c, a, b, trans_a, trans_b, shape);
    return ast_op_run(c, AST_OP_bmm,
                      &(ast_node){.out = ast_empty(c, a->ndim, shape), .in = {a, b}, .n_in = 2, .saved = s});
}

ast_tensor *ast_matmul(ast_ctx *c, ast_tensor *a, ast_tensor *b)
{
    AST_ASSERT(a->ndim == 2 && b->ndim == 2, "matmul takes 2-D tensors (use bmm for batches)");
    return ast_bmm(c, a, b, 0, 0);
}
