/* Building blocks the model's parts share: PyTorch-initialised Linear and
 * LayerNorm parameters, the small MLPs, length rescaling, mask counts and
 * activation taps. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "model_internal.h"

model_lin model_linear_new(ast_scope *s, const char *name, int in, int out, int bias)
{
    char buf[256];
    float bound = 1.0f / sqrtf((float)in); /* PyTorch's default Linear init */
    model_lin l = {0};
    snprintf(buf, sizeof buf, "%s.weight", name);
    l.w = ast_param(s, buf, 2, (int64_t[]){out, in}, AST_INIT_UNIFORM, bound);
    if (bias) {
        snprintf(buf, sizeof buf, "%s.bias", name);
        l.b = ast_param(s, buf, 1, (int64_t[]){out}, AST_INIT_UNIFORM, bound);
    }
    return l;
}

model_lin model_norm_new(ast_scope *s, const char *name, int d)
{
    char buf[256];
    model_lin l;
    snprintf(buf, sizeof buf, "%s.weight", name);
    l.w = ast_param(s, buf, 1, (int64_t[]){d}, AST_INIT_ONE, 0.0f);
    snprintf(buf, sizeof buf, "%s.bias", name);
    l.b = ast_param(s, buf, 1, (int64_t[]){d}, AST_INIT_ZERO, 0.0f);
    return l;
}

ast_tensor *model_apply(ast_ctx *c, ast_tensor *x, const model_lin *l) { return ast_linear(c, x, l->w, l->b); }

ast_tensor *model_mlp2(ast_ctx *c, ast_tensor *x, const model_lin *a, const model_lin *b, int relu_out)
{
    ast_tensor *y = model_apply(c, ast_relu(c, model_apply(c, x, a)), b);
    return relu_out ? ast_relu(c, y) : y;
}

ast_tensor *model_rescale(ast_ctx *c, ast_tensor *x, ast_tensor *new_len, ast_tensor *len)
{
    return ast_div(c, ast_mul(c, x, new_len), ast_affine(c, len, 1.0f, MODEL_PM_EPS));
}

/* Made on the backend, not copied from the host (see model_valid_counts). */
ast_tensor *model_all_valid(ast_ctx *c, int64_t b, int64_t n)
{
    return ast_affine(c, ast_zeros(c, 2, (int64_t[]){b, n}), 0.0f, 1.0f);
}

ast_tensor *model_at_least_one(ast_ctx *c, ast_tensor *x)
{
    return ast_affine(c, ast_relu(c, ast_affine(c, x, 1.0f, -1.0f)), 1.0f, 1.0f);
}

/* Computed where the mask is (a device keeps it there: a step that reads
 * nothing back can be captured). */
ast_tensor *model_valid_counts(ast_ctx *c, ast_tensor *mask)
{
    ast_tensor *counts = model_at_least_one(c, ast_sum_axis(c, mask, 1));
    return ast_reshape(c, counts, 3, (int64_t[]){mask->shape[0], 1, 1});
}

const float *model_host_data(ast_ctx *c, const ast_tensor *t)
{
    if (t->memory == AST_MEM_HOST) return t->data;
    float *copy = ast_alloc_uninit(c, (size_t)t->size * sizeof *copy);
    ast_tensor_read(c, t, 0, t->size, copy);
    return copy;
}

void model_tap(const model_run *r, ast_tensor *t, const char *fmt, ...)
{
    if (!r->tap) return;
    char name[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    r->tap(r->tap_ud, name, t);
}
