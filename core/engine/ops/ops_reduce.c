/* Reductions: sum over one axis (kept with size 1) and the sum / mean of
 * every element. Totals accumulate in double so a mean over a whole batch
 * does not lose the small terms. */
#include "engine/engine.h"
#include "ops_axis.h"

ast_axis_split ast_split_axis(const ast_tensor *t, int axis, const char *op)
{
    char s[64];
    int a = axis < 0 ? axis + t->ndim : axis;
    AST_ASSERT(a >= 0 && a < t->ndim, "%s: axis %d out of range for %s", op, axis, ast_shape_str(t, s, sizeof s));
    ast_axis_split sp = {.axis = a, .outer = 1, .len = t->shape[a], .inner = 1};
    for (int i = 0; i < a; i++) sp.outer *= t->shape[i];
    for (int i = a + 1; i < t->ndim; i++) sp.inner *= t->shape[i];
    return sp;
}

/* iarg: outer, len, inner. Every x element along the axis gets dy. */
static void sum_axis_backward(ast_ctx *c, const ast_node *n)
{
    float *gx = ast_grad(c, n->in[0]);
    const float *dy = n->out->grad;
    int64_t outer = n->iarg[0], len = n->iarg[1], inner = n->iarg[2];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t k = 0; k < len; k++)
            for (int64_t j = 0; j < inner; j++) gx[(o * len + k) * inner + j] += dy[o * inner + j];
}

ast_tensor *ast_cpu_sum_axis(ast_ctx *c, ast_tensor *x, int axis)
{
    ast_axis_split sp = ast_split_axis(x, axis, "sum_axis");
    int64_t shape[AST_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[sp.axis] = 1;
    ast_tensor *y = ast_zeros(c, x->ndim, shape);
    /* Inner index last: both tensors are read and written contiguously. */
    for (int64_t o = 0; o < sp.outer; o++)
        for (int64_t k = 0; k < sp.len; k++)
            for (int64_t j = 0; j < sp.inner; j++)
                y->data[o * sp.inner + j] += x->data[(o * sp.len + k) * sp.inner + j];
    ast_record(c, &(ast_node){.op = "sum_axis", .backward = sum_axis_backward, .out = y, .in = {x}, .n_in = 1,
                              .iarg = {sp.outer, sp.len, sp.inner}});
    return y;
}

/* farg[0] = scale: 1 for sum, 1/size for mean. */
static void total_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *x = n->in[0];
    float *gx = ast_grad(c, x);
    float g = n->out->grad[0] * n->farg[0];
    for (int64_t i = 0; i < x->size; i++) gx[i] += g;
}

static ast_tensor *scaled_total(ast_ctx *c, ast_tensor *x, float scale, const char *op)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < x->size; i++) s += x->data[i];
    ast_tensor *y = ast_zeros(c, 1, (int64_t[]){1});
    y->data[0] = (float)(s * scale);
    ast_record(c, &(ast_node){.op = op, .backward = total_backward, .out = y, .in = {x}, .n_in = 1, .farg = {scale}});
    return y;
}

ast_tensor *ast_cpu_sum(ast_ctx *c, ast_tensor *x) { return scaled_total(c, x, 1.0f, "sum"); }

ast_tensor *ast_cpu_mean(ast_ctx *c, ast_tensor *x)
{
    AST_ASSERT(x->size > 0, "mean of an empty tensor");
    return scaled_total(c, x, 1.0f / (float)x->size, "mean");
}
