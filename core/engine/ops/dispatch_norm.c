/* Normalisations: softmax over any axis, layernorm (alone and fused with
 * the residual add before it), rmsnorm and the Euclidean norm of the last
 * axis. Shapes, outputs and tape nodes; the
 * kernels are the backends' (ops/ops_norm.c, cuda/ops_norm.cu), which keep
 * the per-row statistics their backward needs in n->saved. */
#include <string.h>

#include "engine/kernels.h"
#include "ops_axis.h"

/* Outputs of the normalisations, which write every element. */
static ast_tensor *empty_like(ast_ctx *c, const ast_tensor *x) { return ast_empty(c, x->ndim, x->shape); }

static void check_affine(const ast_tensor *x, const ast_tensor *p, const char *op, const char *what)
{
    char s1[64], s2[64];
    AST_ASSERT(!p || (p->ndim == 1 && p->shape[0] == ast_cols(x)), "%s: %s %s does not fit x %s", op, what,
               p ? ast_shape_str(p, s1, sizeof s1) : "", ast_shape_str(x, s2, sizeof s2));
}

/* iarg: outer, len, inner. */
ast_tensor *ast_softmax(ast_ctx *c, ast_tensor *x, int axis)
{
    ast_axis_split sp = ast_split_axis(x, axis, "softmax");
    AST_ASSERT(sp.len > 0, "softmax over an empty axis %d", axis);
    return ast_op_run(c, AST_OP_softmax, &(ast_node){.out = empty_like(c, x), .in = {x}, .n_in = 1,
                                                     .iarg = {sp.outer, sp.len, sp.inner}});
}

/* farg[0] = eps. */
ast_tensor *ast_layernorm(ast_ctx *c, ast_tensor *x, ast_tensor *w, ast_tensor *b, float eps)
{
    check_affine(x, w, "layernorm", "weight");
    check_affine(x, b, "layernorm", "bias");
    return ast_op_run(c, AST_OP_layernorm,
                      &(ast_node){.out = empty_like(c, x), .in = {x, w, b}, .n_in = 3, .farg = {eps}});
}

/* layernorm(a + b): the fused kernel where the backend has one, else the
 * two ops. farg[0] = eps. */
ast_tensor *ast_add_layernorm(ast_ctx *c, ast_tensor *a, ast_tensor *b, ast_tensor *w, ast_tensor *bias, float eps)
{
    char s1[64], s2[64];
    AST_ASSERT(a->ndim == b->ndim && a->size == b->size && !memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape),
               "add_layernorm: a %s and b %s differ in shape", ast_shape_str(a, s1, sizeof s1),
               ast_shape_str(b, s2, sizeof s2));
    if (!ast_op_supported(c, AST_OP_add_layernorm)) return ast_layernorm(c, ast_add(c, a, b), w, bias, eps);
    check_affine(a, w, "add_layernorm", "weight");
    check_affine(a, bias, "add_layernorm", "bias");
    return ast_op_run(c, AST_OP_add_layernorm,
                      &(ast_node){.out = empty_like(c, a), .in = {a, b, w, bias}, .n_in = 4, .farg = {eps}});
}

/* farg[0] = eps. */
ast_tensor *ast_rmsnorm(ast_ctx *c, ast_tensor *x, ast_tensor *w, float eps)
{
    check_affine(x, w, "rmsnorm", "weight");
    return ast_op_run(c, AST_OP_rmsnorm, &(ast_node){.out = empty_like(c, x), .in = {x, w}, .n_in = 2, .farg = {eps}});
}

ast_tensor *ast_vecnorm(ast_ctx *c, ast_tensor *x)
{
    int64_t shape[AST_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = 1;
    return ast_op_run(c, AST_OP_vecnorm, &(ast_node){.out = ast_empty(c, x->ndim, shape), .in = {x}, .n_in = 1});
}
