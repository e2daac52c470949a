/* grouped_linear: a linear per group of consecutive rows (a mixture of
 * experts' tokens, sorted by expert). Checks, the saved groups, the output
 * and the tape node; the kernels are the backends' (ops/ops_grouped.c,
 * cuda/ops_grouped.cu). The node's in[] holds x and one weight and one
 * bias (ast_record looks there to decide whether to record); every group's
 * tensors are in the saved ast_groups, whose gradients the backward here
 * allocates before the backend's kernel runs. */
#include <string.h>

#include "engine/kernels.h"
#include "engine/ops/ops_plan.h"

/* The gradients of n tensors (ast_grad: zeroed, as the kernels add into
 * them), or NULL when none of them needs one. */
static float **grads_of(ast_ctx *c, ast_tensor *const *t, int n)
{
    int any = 0;
    for (int i = 0; t && i < n; i++) any |= (t[i]->flags & AST_REQUIRES_GRAD) != 0;
    if (!any) return NULL;
    float **g = ast_alloc(c, (size_t)n * sizeof *g);
    for (int i = 0; i < n; i++) g[i] = ast_grad(c, t[i]);
    return g;
}

static void grouped_backward(ast_ctx *c, const ast_node *n)
{
    ast_groups *s = n->saved;
    s->gw = grads_of(c, s->w, s->n);
    s->gb = grads_of(c, s->b, s->n);
    ast_op_backward(c, n, AST_OP_grouped_linear);
}

/* saved: the ast_groups (ops_plan.h). */
ast_tensor *ast_grouped_linear(ast_ctx *c, ast_tensor *x, const int64_t *offsets, int n, ast_tensor *const *w,
                               ast_tensor *const *b)
{
    ast_check_groups(x, offsets, n, w, b);
    ast_groups *s = ast_alloc(c, sizeof *s);
    ast_save_groups(c, s, offsets, n, w, b);
    int64_t shape[AST_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = w[0]->shape[0];
    ast_node node = {.out = ast_empty(c, x->ndim, shape),
                     .in = {x, ast_groups_representative(w, n), ast_groups_representative(b, n)},
                     .n_in = 3,
                     .saved = s};
    return ast_op_run_with(c, AST_OP_grouped_linear, &node, grouped_backward);
}
