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

/* Every group's gradients, then the op's backward kernel. */
static void groups_backward(ast_ctx *c, const ast_node *n, int op)
{
    ast_groups *s = n->saved;
    s->gw = grads_of(c, s->w, s->n);
    s->gb = grads_of(c, s->b, s->n);
    ast_op_backward(c, n, op);
}

static void grouped_backward(ast_ctx *c, const ast_node *n) { groups_backward(c, n, AST_OP_grouped_linear); }
static void moe_grouped_backward(ast_ctx *c, const ast_node *n) { groups_backward(c, n, AST_OP_moe_grouped_linear); }

/* The node of a grouped linear over x: x, one weight and one bias in in[]
 * (plan, when given, as in[3]), every group in saved. */
static ast_tensor *run_groups(ast_ctx *c, int op, ast_tensor *x, ast_tensor *plan, ast_groups *s,
                              ast_backward_fn backward)
{
    int64_t shape[AST_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = s->w[0]->shape[0];
    ast_node node = {.out = ast_empty(c, x->ndim, shape),
                     .in = {x, ast_groups_representative(s->w, s->n), ast_groups_representative(s->b, s->n), plan},
                     .n_in = plan ? 4 : 3,
                     .saved = s};
    return ast_op_run_with(c, op, &node, backward);
}

/* saved: the ast_groups (ops_plan.h). */
ast_tensor *ast_grouped_linear(ast_ctx *c, ast_tensor *x, const int64_t *offsets, int n, ast_tensor *const *w,
                               ast_tensor *const *b)
{
    ast_check_groups(x, offsets, n, w, b);
    ast_groups *s = ast_alloc(c, sizeof *s);
    ast_save_groups(c, s, offsets, n, w, b);
    return run_groups(c, AST_OP_grouped_linear, x, NULL, s, grouped_backward);
}

/* saved: the ast_groups with offsets NULL (the plan's, in backend memory,
 * are the kernels'); in[3] the plan; iarg[0] k. */
ast_tensor *ast_moe_grouped_linear(ast_ctx *c, ast_tensor *x, ast_tensor *plan, int k, int n, ast_tensor *const *w,
                                   ast_tensor *const *b)
{
    char s1[64];
    int64_t rows = ast_rows(x);
    AST_ASSERT(x->ndim == 2 && k >= 1 && rows % k == 0, "moe_grouped_linear: x %s is not [T k, in] for k %d",
               ast_shape_str(x, s1, sizeof s1), k);
    AST_ASSERT(n >= 1 && plan->ndim == 1 && plan->size >= AST_MOE_PLAN_OFFSETS(rows) + n + 1,
               "moe_grouped_linear: plan of %lld values for %lld pairs and %d experts", (long long)plan->size,
               (long long)rows, n);
    /* the shapes' check as offsets that give every row to the last group */
    int64_t *offsets = ast_alloc(c, (size_t)(n + 1) * sizeof *offsets);
    offsets[n] = rows;
    ast_check_groups(x, offsets, n, w, b);
    ast_groups *s = ast_alloc(c, sizeof *s);
    ast_save_groups(c, s, offsets, n, w, b);
    s->offsets = NULL;
    return run_groups(c, AST_OP_moe_grouped_linear, x, plan, s, moe_grouped_backward);
}
