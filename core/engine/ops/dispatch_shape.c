/* Shape ops: reshape (a view), the permutations (permute, split_heads and
 * merge_heads share one strided copy), concat and slice on the last axis.
 * Shapes, plans, outputs and tape nodes; the kernels are the backends'
 * (ops/ops_shape.c, cuda/ops_shape.cu). */
#include <string.h>

#include "engine/kernels.h"
#include "engine/ops/ops_plan.h"

/* The output shares x->data, so a reshape costs no copy and has no forward
 * kernel; it gets its own grad buffer because the tape accumulates per
 * tensor. */
ast_tensor *ast_reshape(ast_ctx *c, ast_tensor *x, int ndim, const int64_t *shape)
{
    ast_check_reshape(x, ndim, shape);
    ast_tensor *y = ast_alloc(c, sizeof *y);
    y->ndim = ndim;
    memcpy(y->shape, shape, (size_t)ndim * sizeof *shape);
    y->size = x->size;
    y->data = x->data;
    y->memory = x->memory;
    y->device = x->device;
    return ast_op_record_view(c, AST_OP_reshape, &(ast_node){.out = y, .in = {x}, .n_in = 1});
}

/* saved: the ast_perm_plan. */
static ast_tensor *permuted_copy(ast_ctx *c, int op, ast_tensor *x, int view_ndim, const int64_t *view,
                                 const int *perm, int out_ndim, const int64_t *out_shape)
{
    ast_perm_plan *p = ast_plan_permute(c, view_ndim, view, perm);
    return ast_op_run(c, op, &(ast_node){.out = ast_empty(c, out_ndim, out_shape), .in = {x}, .n_in = 1, .saved = p});
}

ast_tensor *ast_permute(ast_ctx *c, ast_tensor *x, const int *perm)
{
    int64_t shape[AST_MAX_DIMS];
    ast_permuted_shape(x, perm, shape);
    return permuted_copy(c, AST_OP_permute, x, x->ndim, x->shape, perm, x->ndim, shape);
}

static const int SWAP_HEADS_AND_TOKENS[4] = {0, 2, 1, 3};

/* x [B,N,H*dh] seen as [B,N,H,dh], then tokens and heads swapped. */
ast_tensor *ast_split_heads(ast_ctx *c, ast_tensor *x, int heads)
{
    char s1[64];
    AST_ASSERT(x->ndim == 3 && heads > 0 && x->shape[2] % heads == 0, "split_heads: %s into %d heads",
               ast_shape_str(x, s1, sizeof s1), heads);
    int64_t b = x->shape[0], n = x->shape[1], dh = x->shape[2] / heads;
    return permuted_copy(c, AST_OP_split_heads, x, 4, (int64_t[]){b, n, heads, dh}, SWAP_HEADS_AND_TOKENS, 4,
                         (int64_t[]){b, heads, n, dh});
}

/* x [B,H,N,dh] to [B,N,H,dh], stored as [B,N,H*dh] (head-major features). */
ast_tensor *ast_merge_heads(ast_ctx *c, ast_tensor *x)
{
    char s1[64];
    AST_ASSERT(x->ndim == 4, "merge_heads: %s is not [B,H,N,dh]", ast_shape_str(x, s1, sizeof s1));
    const int64_t *s = x->shape;
    return permuted_copy(c, AST_OP_merge_heads, x, 4, s, SWAP_HEADS_AND_TOKENS, 3,
                         (int64_t[]){s[0], s[2], s[1] * s[3]});
}

ast_tensor *ast_concat(ast_ctx *c, ast_tensor *const *xs, int n)
{
    int64_t shape[AST_MAX_DIMS];
    ast_concat_shape(xs, n, shape);
    ast_node node = {.out = ast_empty(c, xs[0]->ndim, shape), .n_in = n};
    memcpy(node.in, xs, (size_t)n * sizeof *xs);
    return ast_op_run(c, AST_OP_concat, &node);
}

/* iarg[0] = start. */
ast_tensor *ast_slice(ast_ctx *c, ast_tensor *x, int64_t start, int64_t len)
{
    int64_t shape[AST_MAX_DIMS];
    ast_slice_shape(x, start, len, shape);
    return ast_op_run(c, AST_OP_slice,
                      &(ast_node){.out = ast_empty(c, x->ndim, shape), .in = {x}, .n_in = 1, .iarg = {start}});
}
