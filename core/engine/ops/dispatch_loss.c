/* Geometry and losses: pairwise distances within each point set, the
 * row-masked mean squared error and the Kabsch-aligned one. Shapes,
 * outputs and tape nodes; the kernels are the backends' (ops/ops_loss.c,
 * ops/ops_aligned.c, cuda/ops_loss.cu, cuda/ops_aligned.cu). */
#include "engine/kernels.h"

ast_tensor *ast_pdist(ast_ctx *c, ast_tensor *p)
{
    char s[64];
    AST_ASSERT(p->ndim == 3, "pdist takes point sets [B, N, D], got %s", ast_shape_str(p, s, sizeof s));
    int64_t nb = p->shape[0], np = p->shape[1];
    return ast_op_run(c, AST_OP_pdist, &(ast_node){.out = ast_empty(c, 3, (int64_t[]){nb, np, np}), .in = {p}, .n_in = 1});
}

/* The forward kernel keeps the count for its backward (in farg or saved). */
ast_tensor *ast_mse(ast_ctx *c, ast_tensor *a, ast_tensor *b, ast_tensor *mask)
{
    char s1[64], s2[64];
    AST_ASSERT(ast_same_shape(a, b), "mse: %s against %s", ast_shape_str(a, s1, sizeof s1),
               ast_shape_str(b, s2, sizeof s2));
    AST_ASSERT(!mask || mask->size == ast_rows(a), "mse: mask %s for %lld rows",
               mask ? ast_shape_str(mask, s1, sizeof s1) : "", (long long)ast_rows(a));
    return ast_op_run(c, AST_OP_mse,
                      &(ast_node){.out = ast_empty(c, 1, (int64_t[]){1}), .in = {a, b, mask}, .n_in = 3});
}

/* The kernels keep what the backward needs in saved (the CPU: the
 * gradients for dL/dy = 1; CUDA: each set's R, means and scale). */
ast_tensor *ast_aligned_mse(ast_ctx *c, ast_tensor *pred, ast_tensor *target, ast_tensor *mask)
{
    char s1[64], s2[64];
    AST_ASSERT(pred->ndim == 3 && pred->shape[2] == 3 && ast_same_shape(pred, target),
               "aligned_mse: %s against %s; both must be [B, N, 3]", ast_shape_str(pred, s1, sizeof s1),
               ast_shape_str(target, s2, sizeof s2));
    AST_ASSERT(!mask || mask->size == pred->shape[0] * pred->shape[1], "aligned_mse: mask %s for %s",
               mask ? ast_shape_str(mask, s1, sizeof s1) : "", ast_shape_str(pred, s2, sizeof s2));
    AST_ASSERT(!mask || !ast_needs_grad(c, &mask, 1),
               "aligned_mse: the mask gets no gradient here; pass one that requires none");
    return ast_op_run(c, AST_OP_aligned_mse,
                      &(ast_node){.out = ast_empty(c, 1, (int64_t[]){1}), .in = {pred, target, mask}, .n_in = 3});
}
