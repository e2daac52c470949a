/* grouped_linear on the GPU: one linear per group of consecutive rows (a
 * mixture of experts' tokens, sorted by expert), as ops/ops_grouped.c. The
 * offsets are host memory, so each non-empty group runs its own cuBLAS
 * GEMMs on its rows (forward: y; backward: dx, dW[g], and db[g] as a column
 * sum); empty groups launch nothing. Like the CPU op, every GEMM is float32
 * whatever the context's precision. */
#include <string.h>

#include "engine/cuda/cuda_gemm.h"
#include "engine/ops/ops_plan.h"

static void grouped_backward(ast_ctx *c, const ast_node *node)
{
    const ast_groups *s = (const ast_groups *)node->saved;
    ast_tensor *x = node->in[0];
    int in = (int)ast_cols(x), out = (int)ast_cols(node->out), fresh;
    const float *dy = node->out->grad;
    float *dx = ast_grad_fresh(c, x, &fresh); /* the groups cover every row */
    for (int g = 0; g < s->n; g++) {
        int64_t r0 = s->offsets[g];
        int count = (int)(s->offsets[g + 1] - r0);
        float *dw = ast_grad(c, s->w[g]), *db = s->b ? ast_grad(c, s->b[g]) : NULL;
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

extern "C" ast_tensor *ast_cuda_grouped_linear(ast_ctx *c, ast_tensor *x, const int64_t *offsets, int n,
                                               ast_tensor *const *w, ast_tensor *const *b)
{
    ast_check_groups(x, offsets, n, w, b);
    ast_groups *s = (ast_groups *)ast_alloc(c, sizeof *s);
    ast_save_groups(c, s, offsets, n, w, b);
    int in = (int)ast_cols(x), out = (int)w[0]->shape[0];
    int64_t shape[AST_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = out;
    ast_tensor *y = ast_empty(c, x->ndim, shape);
    for (int g = 0; g < n; g++) { /* y_g = x_g W[g]^T + b[g] */
        int64_t r0 = offsets[g];
        ast_cuda_gemm(AST_PRECISION_FP32, 0, 1, (int)(offsets[g + 1] - r0), out, in, x->data + r0 * in, in,
                      w[g]->data, in, 0.0f, y->data + r0 * out, out, b ? b[g]->data : NULL);
    }
    ast_node node = {.op = "grouped_linear", .backward = grouped_backward, .out = y,
                     .in = {x, ast_groups_representative(w, n), ast_groups_representative(b, n)}, .n_in = 3, .saved = s};
    ast_record(c, &node);
    return y;
}
