/* engine/kernels.h: what a backend supplies for each op of ops.def, and
 * what the dispatch (ops/dispatch*.c) hands it, in the style of ggml: the
 * dispatch checks the shapes, allocates the output, records the tape node,
 * allocates the inputs' gradients (fresh or accumulated) and calls these
 * kernels; a backend writes kernels only, never autograd. A backend may
 * decline an op (a NULL forward): the op then stops with an error naming
 * it and the backend. Plain C that nvcc's C++ also compiles. */
#ifndef ALPHAST_KERNELS_H
#define ALPHAST_KERNELS_H

#include "engine/engine.h"

#ifdef __cplusplus
extern "C" {
#endif

/* AST_OP_<name>: the op's slot in ops.def, which indexes a kernel table. */
enum ast_op_id {
#define AST_OP(slot, ret, name, params, args) AST_OP_##name = slot,
#include "alphast/ops.def"
#undef AST_OP
    AST_N_OPS
};

/* A backward kernel's gradients: g[i] is input i's gradient buffer (NULL
 * when input i needs none). assign[i] = 1: the buffer is unwritten and the
 * kernel writes every element (=), which saves zeroing and reading it;
 * 0: the kernel adds into it (+=). Where one tensor is two inputs, the
 * second gets assign 0 and the same buffer: the kernel writes the first
 * input's gradient before it adds the second's. */
typedef struct ast_op_grads {
    float *g[AST_NODE_MAX_IN];
    int assign[AST_NODE_MAX_IN];
} ast_op_grads;

typedef struct ast_op_kernel {
    /* Writes n->out's data from n->in and the op's arguments (n->iarg,
     * n->farg, n->saved, as the op's dispatch documents); the dispatch has
     * allocated n->out (unwritten) and records n afterwards. */
    void (*forward)(ast_ctx *c, ast_node *n);
    /* Gradients of the inputs from n->out->grad, into g (see ast_op_grads). */
    void (*backward)(ast_ctx *c, const ast_node *n, const ast_op_grads *g);
    /* Inputs (bit i: in[i]) whose gradient the backward writes in full, so
     * the dispatch may hand it over fresh; and those it writes in full only
     * when the input has as many elements as the output (a broadcast
     * input's gradient is a sum over the repeats: it gets a zeroed one). */
    unsigned assigns, assigns_if_full;
} ast_op_kernel;

/* A backend's table: ast_op_kernel[AST_N_OPS], filled by one function per op
 * family (ast_<backend>_<family>_kernels(table)); a slot left zero
 * declines its op. */
typedef void (*ast_op_family)(ast_op_kernel *table);

/* Whether the context's backend has the op's forward and backward kernels:
 * a fused op's front end runs the unfused ops where it has not. */
int ast_op_supported(const ast_ctx *c, int op);

/* The op's name as ops.def spells it ("linear"). */
const char *ast_op_name(int op);

/* The dispatch's one path for every op: runs the context's backend's
 * forward kernel of `op` on n (out and in filled by the caller) and records
 * n on the tape with the backward that calls the backend's backward kernel.
 * Returns n->out. */
ast_tensor *ast_op_run(ast_ctx *c, int op, ast_node *n);
/* The same with a backward of the op's own, which allocates what the
 * generic one cannot see (grouped_linear: every group's gradients) and
 * then calls ast_op_backward. */
ast_tensor *ast_op_run_with(ast_ctx *c, int op, ast_node *n, ast_backward_fn backward);
/* The generic backward of `op`: allocates the gradients of n's inputs,
 * fresh where the backend's kernel writes them whole, and runs its
 * backward kernel. */
void ast_op_backward(ast_ctx *c, const ast_node *n, int op);
/* The same for a view (reshape), whose output shares its input's data:
 * there is no forward kernel to run, only the backward. */
ast_tensor *ast_op_record_view(ast_ctx *c, int op, ast_node *n);

#ifdef __cplusplus
}
#endif
#endif
