/* The CPU kernels of the reductions (ops/dispatch_reduce.c). Totals
 * accumulate in double so a mean over a whole batch does not lose the
 * small terms. */
#include <string.h>

#include "engine/backend.h"

/* iarg: outer, len, inner. Inner index last: both tensors are read and
 * written contiguously. */
static void sum_axis_forward(ast_ctx *c, ast_node *n)
{
    const float *x = n->in[0]->data;
    float *y = n->out->data;
    int64_t outer = n->iarg[0], len = n->iarg[1], inner = n->iarg[2];
    memset(y, 0, (size_t)n->out->size * sizeof *y);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < len; k++)
            for (int64_t j = 0; j < inner; j++) y[o * inner + j] += x[(o * len + k) * inner + j];
}

/* Every x element along the axis gets dy. */
static void sum_axis_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    const float *dy = n->out->grad;
    int64_t outer = n->iarg[0], len = n->iarg[1], inner = n->iarg[2];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < len; k++)
            for (int64_t j = 0; j < inner; j++) gx[(o * len + k) * inner + j] += dy[o * inner + j];
}

/* farg[0] = scale: 1 for sum, 1/size for mean. */
static void total_forward(ast_ctx *c, ast_node *n)
{
    const ast_tensor *x = n->in[0];
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < x->size; i++) s += x->data[i];
    n->out->data[0] = (float)(s * n->farg[0]);
}

static void total_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    float d = n->out->grad[0] * n->farg[0];
    for (int64_t i = 0; i < n->in[0]->size; i++) gx[i] += d;
}

void ast_cpu_reduce_kernels(ast_op_kernel *t)
{
    t[AST_OP_sum_axis] = (ast_op_kernel){.forward = sum_axis_forward, .backward = sum_axis_backward};
    t[AST_OP_sum] = t[AST_OP_mean] = (ast_op_kernel){.forward = total_forward, .backward = total_backward};
}
