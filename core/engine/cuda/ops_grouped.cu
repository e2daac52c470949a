/* The CUDA kernels of grouped_linear (ops/dispatch_grouped.c): one linear per group of consecutive rows (a
 * mixture of experts' tokens, sorted by expert), as ops/ops_grouped.c. The
 * offsets are host memory, so each non-empty group runs its own cuBLAS
 * GEMMs on its rows (forward: y; backward: dx, dW[g], and db[g] as a column
 * sum); empty groups launch nothing. Like the CPU op, every GEMM is float32
 * whatever the context's precision. */
#include <string.h>

#include "engine/cuda/cuda_gemm.h"
#include "engine/ops/ops_plan.h"

/* Every group's weight and bias gradients come in the saved groups. */
static void grouped_backward(ast_ctx *c, const ast_node *node, const ast_op_grads *grads)
{
    const ast_groups *s = (const ast_groups *)node->saved;
    ast_tensor *x = node->in[0];
    int in = (int)ast_cols(x), out = (int)ast_cols(node->out), fresh = grads->assign[0];
    const float *dy = node->out->grad;
    float *dx = grads->g[0]; /* the groups cover every row */
    for (int g = 0; g < s->n; g++) {
        int64_t r0 = s->offsets[g];
        int count = (int)(s->offsets[g + 1] - r0);
        float *dw = s->gw ? s->gw[g] : NULL, *db = s->gb ? s->gb[g] : NULL;
        if (!count) continue;
        if (dx) /* dx_g = dy_g W[g] */
            ast_cuda_gemm(AST_PRECISION_FP32, 0, 0, count, in, out, dy + r0 * out, out, s->w[g]->data, in,
                          fresh ? 0.0f : 1.0f, dx + r0 * in, in, NULL);
        if (dw) /* dW[g] += dy_g^T x_g */
            ast_cuda_gemm(AST_PRECISION_FP32, 1, 0, out, in, count, dy + r0 * out, out, x->data + r0 * in, in, 1.0f,
                          dw, in, NULL);
        if (db) ast_cuda_column_sums(c, dy + r0 * out, count, out, db);
    }
}

static void grouped_forward(ast_ctx *c, ast_node *node)
{
    const ast_groups *s = (const ast_groups *)node->saved;
    ast_tensor *x = node->in[0];
    int in = (int)ast_cols(x), out = (int)ast_cols(node->out);
    for (int g = 0; g < s->n; g++) { /* y_g = x_g W[g]^T + b[g] */
        int64_t r0 = s->offsets[g];
        ast_cuda_gemm(AST_PRECISION_FP32, 0, 1, (int)(s->offsets[g + 1] - r0), out, in, x->data + r0 * in, in,
                      s->w[g]->data, in, 0.0f, node->out->data + r0 * out, out, s->b ? s->b[g]->data : NULL);
    }
}

extern "C" void ast_cuda_grouped_kernels(ast_op_kernel *t)
{
    t[AST_OP_grouped_linear] = ast_op_kernel{grouped_forward, grouped_backward, 1, 0};
}
