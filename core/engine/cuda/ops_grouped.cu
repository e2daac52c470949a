/* grouped_linear on the GPU: one linear per group of consecutive rows (a
 * mixture of experts' tokens, sorted by expert), as ops/ops_grouped.c. The
 * offsets are host memory, so each non-empty group runs its own cuBLAS
 * GEMMs on its rows (forward: y; backward: dx, dW[g], and db[g] as a column
 * sum); empty groups launch nothing. Like the CPU op, every GEMM is float32
 * whatever the context's precision. */
#include <string.h>

#include "engine/cuda/cuda_gemm.h"

typedef struct grouped_saved {
    int64_t *offsets;    /* [n + 1]: group g owns rows [offsets[g], offsets[g + 1]) */
    ast_tensor **w, **b; /* [n] each; b NULL: no bias */
    int n;
} grouped_saved;

static void grouped_backward(ast_ctx *c, const ast_node *node)
{
    const grouped_saved *s = (const grouped_saved *)node->saved;
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

static void check_groups(const ast_tensor *x, const int64_t *offsets, int n, ast_tensor *const *w,
                         ast_tensor *const *b)
{
    char s1[64], s2[64];
    int64_t rows = ast_rows(x), in = ast_cols(x);
    AST_ASSERT(n >= 1 && w, "grouped_linear: %d groups (at least 1, each with a weight)", n);
    for (int g = 0; g < n; g++) AST_ASSERT(w[g], "grouped_linear: group %d has no weight", g);
    AST_ASSERT(offsets[0] == 0 && offsets[n] == rows, "grouped_linear: offsets run from %lld to %lld for %lld rows",
               (long long)offsets[0], (long long)offsets[n], (long long)rows);
    AST_ASSERT(rows < (1ll << 31), "grouped_linear: %lld rows (at most 2^31 - 1)", (long long)rows);
    for (int g = 0; g < n; g++) {
        AST_ASSERT(offsets[g] <= offsets[g + 1], "grouped_linear: offsets[%d] = %lld > offsets[%d] = %lld", g,
                   (long long)offsets[g], g + 1, (long long)offsets[g + 1]);
        AST_ASSERT(w[g]->ndim == 2 && w[g]->shape[1] == in && w[g]->shape[0] == w[0]->shape[0],
                   "grouped_linear: x %s does not fit weight %d %s (every weight must be [%lld, %lld])",
                   ast_shape_str(x, s1, sizeof s1), g, ast_shape_str(w[g], s2, sizeof s2),
                   (long long)w[0]->shape[0], (long long)in);
        AST_ASSERT(!b || (b[g] && b[g]->ndim == 1 && b[g]->shape[0] == w[0]->shape[0]),
                   "grouped_linear: bias %d %s for %lld outputs", g,
                   b[g] ? ast_shape_str(b[g], s1, sizeof s1) : "NULL", (long long)w[0]->shape[0]);
    }
}

/* The first of n tensors that needs a gradient, else the first: the node
 * holds x and one weight and one bias in in[] (ast_record looks there to
 * decide whether to record), all of them in `saved`. */
static ast_tensor *representative(ast_tensor *const *t, int n)
{
    if (!t) return NULL;
    for (int i = 0; i < n; i++)
        if (t[i]->flags & AST_REQUIRES_GRAD) return t[i];
    return t[0];
}

/* The arrays outlive the call in the (host) arena, so the caller's may not. */
static grouped_saved *save_groups(ast_ctx *c, const int64_t *offsets, int n, ast_tensor *const *w,
                                  ast_tensor *const *b)
{
    grouped_saved *s = (grouped_saved *)ast_alloc(c, sizeof *s);
    s->n = n;
    s->offsets = (int64_t *)memcpy(ast_alloc(c, (size_t)(n + 1) * sizeof *offsets), offsets,
                                   (size_t)(n + 1) * sizeof *offsets);
    s->w = (ast_tensor **)memcpy(ast_alloc(c, (size_t)n * sizeof *w), w, (size_t)n * sizeof *w);
    s->b = b ? (ast_tensor **)memcpy(ast_alloc(c, (size_t)n * sizeof *b), b, (size_t)n * sizeof *b) : NULL;
    return s;
}

extern "C" ast_tensor *ast_cuda_grouped_linear(ast_ctx *c, ast_tensor *x, const int64_t *offsets, int n,
                                               ast_tensor *const *w, ast_tensor *const *b)
{
    check_groups(x, offsets, n, w, b);
    grouped_saved *s = save_groups(c, offsets, n, w, b);
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
                     .in = {x, representative(w, n), representative(b, n)}, .n_in = 3, .saved = s};
    ast_record(c, &node);
    return y;
}
