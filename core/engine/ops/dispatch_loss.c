/* Geometry and losses: pairwise distances within each point set, the
 * row-masked mean squared error and the Kabsch-aligned one, and the
 * Kabsch alignment itself (the sampler's, no gradient). Shapes,
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

/* Point sets pred and target [B, N, 3] and their mask [B, N] (or NULL), as
 * op (aligned_mse, kabsch_align) takes them. */
static void check_sets(const char *op, const ast_tensor *pred, const ast_tensor *target, const ast_tensor *mask)
{
    char s1[64], s2[64];
    AST_ASSERT(pred->ndim == 3 && pred->shape[2] == 3 && ast_same_shape(pred, target),
               "%s: %s against %s; both must be [B, N, 3]", op, ast_shape_str(pred, s1, sizeof s1),
               ast_shape_str(target, s2, sizeof s2));
    AST_ASSERT(!mask || mask->size == pred->shape[0] * pred->shape[1], "%s: mask %s for %s", op,
               mask ? ast_shape_str(mask, s1, sizeof s1) : "", ast_shape_str(pred, s2, sizeof s2));
}

/* The kernels keep what the backward needs in saved (the CPU: the
 * gradients for dL/dy = 1; CUDA: each set's R, means and scale). */
ast_tensor *ast_aligned_mse(ast_ctx *c, ast_tensor *pred, ast_tensor *target, ast_tensor *mask)
{
    check_sets("aligned_mse", pred, target, mask);
    AST_ASSERT(!mask || !ast_needs_grad(c, &mask, 1),
               "aligned_mse: the mask gets no gradient here; pass one that requires none");
    return ast_op_run(c, AST_OP_aligned_mse,
                      &(ast_node){.out = ast_empty(c, 1, (int64_t[]){1}), .in = {pred, target, mask}, .n_in = 3});
}

/* No backward kernel on any backend: a gradient through R (which the loss
 * escapes by R's optimality) would be a 3x3 SVD's derivative, and nothing
 * differentiates this op, so an input that wants one is refused rather
 * than silently cut off. */
ast_tensor *ast_kabsch_align(ast_ctx *c, ast_tensor *pred, ast_tensor *target, ast_tensor *mask)
{
    check_sets("kabsch_align", pred, target, mask);
    ast_tensor *in[3] = {pred, target, mask};
    AST_ASSERT(!ast_needs_grad(c, in, 3), "kabsch_align: no gradient flows through it (an inference op); run it "
               "with gradients off (ast_ctx_set_grad) or on inputs that require none");
    return ast_op_run(c, AST_OP_kabsch_align,
                      &(ast_node){.out = ast_empty(c, 3, pred->shape), .in = {pred, target, mask}, .n_in = 3});
}
