/* Reductions: sum over one axis (kept with size 1) and the sum / mean of
 * every element: shapes, outputs and tape nodes; the backends' kernels
 * (ops/ops_reduce.c, cuda/ops_reduce.cu) add in double where the whole
 * tensor is summed, so a mean over a batch keeps its small terms. */
#include "engine/kernels.h"
#include "ops_axis.h"

ast_axis_split ast_split_axis(const ast_tensor *t, int axis, const char *op)
{
    char s[64];
    int a = axis < 0 ? axis + t->ndim : axis;
    AST_ASSERT(a >= 0 && a < t->ndim, "%s: axis %d out of range for %s", op, axis, ast_shape_str(t, s, sizeof s));
    ast_axis_split sp = {.axis = a, .outer = 1, .len = t->shape[a], .inner = 1};
    for (int i = 0; i < a; i++) sp.outer *= t->shape[i];
    for (int i = a + 1; i < t->ndim; i++) sp.inner *= t->shape[i];
    return sp;
}

/* iarg: outer, len, inner. */
ast_tensor *ast_sum_axis(ast_ctx *c, ast_tensor *x, int axis)
{
    ast_axis_split sp = ast_split_axis(x, axis, "sum_axis");
    int64_t shape[AST_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[sp.axis] = 1;
    return ast_op_run(c, AST_OP_sum_axis, &(ast_node){.out = ast_empty(c, x->ndim, shape), .in = {x}, .n_in = 1,
                                                      .iarg = {sp.outer, sp.len, sp.inner}});
}

/* farg[0] = scale: 1 for sum, 1/size for mean. */
static ast_tensor *scaled_total(ast_ctx *c, int op, ast_tensor *x, float scale)
{
    return ast_op_run(c, op, &(ast_node){.out = ast_empty(c, 1, (int64_t[]){1}), .in = {x}, .n_in = 1, .farg = {scale}});
}

ast_tensor *ast_sum(ast_ctx *c, ast_tensor *x) { return scaled_total(c, AST_OP_sum, x, 1.0f); }

ast_tensor *ast_mean(ast_ctx *c, ast_tensor *x)
{
    AST_ASSERT(x->size > 0, "mean of an empty tensor");
    return scaled_total(c, AST_OP_mean, x, 1.0f / (float)x->size);
}
