/* The dispatch's mechanism: every op's front end (ops/dispatch_<family>.c)
 * checks shapes, allocates the output and calls ast_op_run, which runs the
 * backend's forward kernel and records the node; the node's backward
 * allocates the inputs' gradients and runs the backend's backward kernel.
 * Autograd lives here once, for every backend (engine/kernels.h). */
#include "engine/backend.h"
#include "engine/kernels.h"

static const char *const op_names[AST_N_OPS] = {
#define AST_OP(slot, ret, name, params, args) [slot] = #name,
#include "alphast/ops.def"
#undef AST_OP
};

const char *ast_op_name(int op) { return op_names[op]; }

static const ast_op_kernel *kernel_of(const ast_backend *b, int op)
{
    const ast_op_kernel *k = b->kernels ? &b->kernels[op] : NULL;
    AST_ASSERT(k && k->forward, "op %s: the %s backend has no kernel for it", op_names[op], b->name);
    return k;
}

/* Whether input i's gradient may come fresh (unwritten): the kernel writes
 * it in full. */
static int may_assign(const ast_op_kernel *k, const ast_node *n, int i)
{
    unsigned bit = 1u << i;
    return (k->assigns & bit) || ((k->assigns_if_full & bit) && n->in[i] && n->in[i]->size == n->out->size);
}

int ast_op_supported(const ast_ctx *c, int op)
{
    const ast_backend *b = ast_ctx_backend(c);
    return b->kernels && b->kernels[op].forward && b->kernels[op].backward;
}

void ast_op_backward(ast_ctx *c, const ast_node *n, int op)
{
    const ast_backend *b = ast_ctx_backend(c);
    const ast_op_kernel *k = b->kernels ? &b->kernels[op] : NULL;
    AST_ASSERT(k && k->backward, "op %s: the %s backend has no backward kernel for it", op_names[op], b->name);
    ast_op_grads g = {0};
    for (int i = 0; i < n->n_in; i++)
        g.g[i] = may_assign(k, n, i) ? ast_grad_fresh(c, n->in[i], &g.assign[i]) : ast_grad(c, n->in[i]);
    k->backward(c, n, &g);
}

/* One tape backward per op, so the node says which kernel to call. */
#define AST_OP(slot, ret, name, params, args) \
    static void backward_##name(ast_ctx *c, const ast_node *n) { ast_op_backward(c, n, slot); }
#include "alphast/ops.def"
#undef AST_OP

static const ast_backward_fn backwards[AST_N_OPS] = {
#define AST_OP(slot, ret, name, params, args) [slot] = backward_##name,
#include "alphast/ops.def"
#undef AST_OP
};

ast_tensor *ast_op_run_with(ast_ctx *c, int op, ast_node *n, ast_backward_fn backward)
{
    kernel_of(ast_ctx_backend(c), op)->forward(c, n);
    n->op = op_names[op];
    n->backward = backward;
    ast_record(c, n);
    return n->out;
}

ast_tensor *ast_op_run(ast_ctx *c, int op, ast_node *n) { return ast_op_run_with(c, op, n, backwards[op]); }

ast_tensor *ast_op_record_view(ast_ctx *c, int op, ast_node *n)
{
    n->op = op_names[op];
    n->backward = backwards[op];
    ast_record(c, n);
    return n->out;
}
