/* softmax / layernorm / rmsnorm / vecnorm: values against naive
 * double-precision formulas, gradients against finite differences. */
#include <criterion/criterion.h>
#include <math.h>

#include "gradcheck.h"

/* float32 outputs of O(1) values against double formulas over <= 8 terms:
 * a few ulps, well under 1e-5 absolute. */
#define VAL_TOL 1e-5
/* Central differences with h = 1e-2 on smooth functions of O(1) inputs:
 * truncation h^2/6 f''' plus float32 rounding of L/h, relative to gradients
 * floored at 1e-2, measured at <= 7e-4 here; a wrong term (a missing
 * factor, a dropped mean) gives errors of order 1. */
#define GRAD_H 1e-2f
#define GRAD_FLOOR 1e-2
#define GRAD_TOL 1e-2

#define ASSERT_GRADS(r, what)                                                                              \
    cr_assert_lt((r).max_err, GRAD_TOL, "%s: input %d[%lld] analytic %g numeric %g", what, (r).worst_input, \
                 (long long)(r).worst_index, (r).analytic, (r).numeric)

static const int64_t SHAPE4[4] = {2, 3, 4, 5};

/* ---- softmax ---------------------------------------------------------------- */

/* Softmax of element i along `axis`, by walking its fiber with the stride. */
static double naive_softmax(const ast_tensor *x, int axis, int64_t i)
{
    int64_t stride = 1, len = x->shape[axis];
    for (int d = axis + 1; d < x->ndim; d++) stride *= x->shape[d];
    int64_t base = i - ((i / stride) % len) * stride;
    double m = -INFINITY, s = 0.0;
    for (int64_t k = 0; k < len; k++) m = fmax(m, x->data[base + k * stride]);
    for (int64_t k = 0; k < len; k++) s += exp(x->data[base + k * stride] - m);
    return exp(x->data[i] - m) / s;
}

Test(ops_norm, softmax_every_axis_matches_naive)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 4, SHAPE4, 2.0f);
    ast_ctx *c = ast_ctx_new(0);
    for (int axis = -4; axis < 4; axis++) {
        int a = axis < 0 ? axis + 4 : axis;
        ast_tensor *y = ast_softmax(c, x, axis);
        for (int64_t i = 0; i < x->size; i++)
            cr_assert_float_eq(y->data[i], naive_softmax(x, a, i), VAL_TOL, "axis %d, element %lld", axis,
                               (long long)i);
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

/* Linear attention's key softmax: axis 2 of [B, H, N, dh], over the sequence. */
Test(ops_norm, softmax_middle_axis_columns_sum_to_one)
{
    ast_params *p = ast_params_new(2);
    ast_tensor *x = gc_input(p, "x", 4, SHAPE4, 3.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ast_softmax(c, x, 2);
    for (int64_t bh = 0; bh < 6; bh++)
        for (int64_t j = 0; j < 5; j++) {
            double s = 0.0;
            for (int64_t n = 0; n < 4; n++) {
                float v = y->data[(bh * 4 + n) * 5 + j];
                cr_assert(v > 0.0f && v < 1.0f, "probability %g", v);
                s += v;
            }
            cr_assert_float_eq(s, 1.0, VAL_TOL, "column (%lld, %lld) sums to %g", (long long)bh, (long long)j, s);
        }
    ast_ctx_free(c);
    ast_params_free(p);
}

/* exp(1000) overflows float32: only a max-shifted softmax stays finite.
 * The same logits as rows (last axis) and as columns (slab path). */
Test(ops_norm, softmax_is_stable_for_large_logits)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *rows = ast_tensor_from(c, 2, (int64_t[]){2, 3}, (float[]){1000, 1001, 1002, -1002, -1001, -1000});
    ast_tensor *cols = ast_tensor_from(c, 2, (int64_t[]){3, 2}, (float[]){1000, -1002, 1001, -1001, 1002, -1000});
    ast_tensor *yr = ast_softmax(c, rows, -1), *yc = ast_softmax(c, cols, 0);
    double e = exp(1.0), z = 1.0 + e + e * e, want[3] = {1.0 / z, e / z, e * e / z};
    for (int i = 0; i < 3; i++)
        for (int set = 0; set < 2; set++) {
            cr_assert_float_eq(yr->data[set * 3 + i], want[i], VAL_TOL, "rows: set %d [%d]", set, i);
            cr_assert_float_eq(yc->data[i * 2 + set], want[i], VAL_TOL, "cols: set %d [%d]", set, i);
        }
    ast_ctx_free(c);
}

static ast_tensor *fwd_softmax(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_softmax(c, in[0], *(const int *)ud);
}

Test(ops_norm, softmax_gradients_last_middle_and_first_axis)
{
    const int axes[] = {-1, 2, 1, 0};
    for (int t = 0; t < 4; t++) {
        ast_params *p = ast_params_new(3 + t);
        ast_tensor *x = gc_input(p, "x", 4, SHAPE4, 1.0f);
        gc_result r = gc_check(fwd_softmax, &x, 1, (void *)&axes[t], GRAD_H, GRAD_FLOOR);
        ASSERT_GRADS(r, axes[t] == 2 ? "softmax axis 2" : "softmax");
        ast_params_free(p);
    }
}

/* ---- layernorm / rmsnorm ------------------------------------------------------- */

typedef struct {
    int with_w, with_b;
} affine_flags;

static double naive_layernorm(const float *x, int64_t d, int64_t k, double eps, const float *w, const float *b)
{
    double mu = 0.0, var = 0.0;
    for (int64_t j = 0; j < d; j++) mu += x[j];
    mu /= (double)d;
    for (int64_t j = 0; j < d; j++) var += (x[j] - mu) * (x[j] - mu);
    var /= (double)d; /* biased, as torch.nn.LayerNorm */
    return (x[k] - mu) / sqrt(var + eps) * (w ? w[k] : 1.0) + (b ? b[k] : 0.0);
}

Test(ops_norm, layernorm_matches_double_formula)
{
    ast_params *p = ast_params_new(10);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 8}, 2.0f);
    ast_tensor *w = gc_input(p, "w", 1, (int64_t[]){8}, 1.0f);
    ast_tensor *b = gc_input(p, "b", 1, (int64_t[]){8}, 1.0f);
    for (int i = 0; i < 8; i++) x->data[i] += 50.0f; /* a row far from zero mean */
    ast_ctx *c = ast_ctx_new(0);
    for (int affine = 0; affine < 2; affine++) {
        /* eps = 0.5 is large enough that putting it outside the sqrt shows. */
        ast_tensor *y = ast_layernorm(c, x, affine ? w : NULL, affine ? b : NULL, 0.5f);
        for (int64_t i = 0; i < x->size; i++) {
            double want = naive_layernorm(x->data + i / 8 * 8, 8, i % 8, 0.5, affine ? w->data : NULL,
                                          affine ? b->data : NULL);
            cr_assert_float_eq(y->data[i], want, VAL_TOL, "affine=%d element %lld", affine, (long long)i);
        }
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

static ast_tensor *fwd_layernorm(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const affine_flags *f = ud;
    return ast_layernorm(c, in[0], f->with_w ? in[1] : NULL, f->with_b ? in[2] : NULL, 1e-5f);
}

Test(ops_norm, layernorm_gradients_with_and_without_affine)
{
    const affine_flags cases[] = {{1, 1}, {0, 0}, {1, 0}, {0, 1}};
    for (int t = 0; t < 4; t++) {
        ast_params *p = ast_params_new(11 + t);
        ast_tensor *in[3] = {gc_input(p, "x", 3, (int64_t[]){2, 3, 6}, 1.0f),
                             gc_input(p, "w", 1, (int64_t[]){6}, 1.0f),
                             gc_input(p, "b", 1, (int64_t[]){6}, 1.0f)};
        gc_result r = gc_check(fwd_layernorm, in, 3, (void *)&cases[t], GRAD_H, GRAD_FLOOR);
        ASSERT_GRADS(r, "layernorm");
        /* Unused parameters must receive nothing. */
        for (int k = 0; k < 6; k++) {
            if (!cases[t].with_w) cr_assert_eq(in[1]->grad[k], 0.0f, "w unused but got a gradient");
            if (!cases[t].with_b) cr_assert_eq(in[2]->grad[k], 0.0f, "b unused but got a gradient");
        }
        ast_params_free(p);
    }
}

/* ---- add_layernorm: layernorm(a + b) fused -------------------------------- */

/* The fused op is the two ops it replaces, bit for bit, grad on and off. */
Test(ops_norm, add_layernorm_is_add_then_layernorm)
{
    ast_params *p = ast_params_new(21);
    ast_tensor *a = gc_input(p, "a", 3, (int64_t[]){2, 5, 24}, 2.0f), *b = gc_input(p, "b", 3, (int64_t[]){2, 5, 24}, 1.0f);
    ast_tensor *w = gc_input(p, "w", 1, (int64_t[]){24}, 1.0f), *bias = gc_input(p, "bias", 1, (int64_t[]){24}, 1.0f);
    for (int grad = 0; grad < 2; grad++) {
        ast_ctx *c = ast_ctx_new(0);
        ast_ctx_set_grad(c, grad);
        ast_tensor *fused = ast_add_layernorm(c, a, b, w, bias, 1e-6f);
        ast_tensor *two = ast_layernorm(c, ast_add(c, a, b), w, bias, 1e-6f);
        cr_assert_arr_eq(fused->data, two->data, (size_t)a->size * sizeof(float), "grad %d: fused differs", grad);
        ast_ctx_free(c);
    }
    ast_params_free(p);
}

/* in: a, b, w, bias; same_ab: b is a (the one tensor's gradient is twice
 * the sum's). */
typedef struct add_norm_case {
    int with_w, with_b, same_ab;
} add_norm_case;

static ast_tensor *fwd_add_layernorm(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const add_norm_case *f = ud;
    return ast_add_layernorm(c, in[0], f->same_ab ? in[0] : in[1], f->with_w ? in[2] : NULL, f->with_b ? in[3] : NULL,
                             1e-5f);
}

Test(ops_norm, add_layernorm_gradients)
{
    const add_norm_case cases[] = {{1, 1, 0}, {0, 0, 0}, {1, 0, 0}, {1, 1, 1}};
    for (int t = 0; t < 4; t++) {
        ast_params *p = ast_params_new(31 + t);
        ast_tensor *in[4] = {gc_input(p, "a", 3, (int64_t[]){2, 3, 6}, 1.0f), gc_input(p, "b", 3, (int64_t[]){2, 3, 6}, 1.0f),
                             gc_input(p, "w", 1, (int64_t[]){6}, 1.0f), gc_input(p, "bias", 1, (int64_t[]){6}, 1.0f)};
        gc_result r = gc_check(fwd_add_layernorm, in, 4, (void *)&cases[t], GRAD_H, GRAD_FLOOR);
        ASSERT_GRADS(r, "add_layernorm");
        for (int k = 0; k < 6; k++) {
            if (!cases[t].with_w) cr_assert_eq(in[2]->grad[k], 0.0f, "w unused but got a gradient");
            if (!cases[t].with_b) cr_assert_eq(in[3]->grad[k], 0.0f, "bias unused but got a gradient");
        }
        ast_params_free(p);
    }
}

Test(ops_norm, rmsnorm_matches_double_formula)
{
    ast_params *p = ast_params_new(20);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){4, 8}, 1.5f);
    ast_tensor *w = gc_input(p, "w", 1, (int64_t[]){8}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    for (int affine = 0; affine < 2; affine++) {
        ast_tensor *y = ast_rmsnorm(c, x, affine ? w : NULL, 0.25f);
        for (int64_t r = 0; r < 4; r++) {
            double ms = 0.0;
            for (int k = 0; k < 8; k++) ms += (double)x->data[r * 8 + k] * x->data[r * 8 + k] / 8.0;
            for (int k = 0; k < 8; k++) {
                double want = x->data[r * 8 + k] / sqrt(ms + 0.25) * (affine ? w->data[k] : 1.0);
                cr_assert_float_eq(y->data[r * 8 + k], want, VAL_TOL, "affine=%d [%lld,%d]", affine, (long long)r, k);
            }
        }
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

static ast_tensor *fwd_rmsnorm(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_rmsnorm(c, in[0], ud ? in[1] : NULL, 1e-6f);
}

Test(ops_norm, rmsnorm_gradients_with_and_without_weight)
{
    for (int with_w = 0; with_w < 2; with_w++) {
        ast_params *p = ast_params_new(21 + with_w);
        ast_tensor *in[2] = {gc_input(p, "x", 4, (int64_t[]){2, 2, 3, 6}, 1.0f),
                             gc_input(p, "w", 1, (int64_t[]){6}, 1.0f)};
        gc_result r = gc_check(fwd_rmsnorm, in, with_w ? 2 : 1, with_w ? (void *)1 : NULL, GRAD_H, GRAD_FLOOR);
        ASSERT_GRADS(r, "rmsnorm");
        ast_params_free(p);
    }
}

/* ---- vecnorm ------------------------------------------------------------------- */

Test(ops_norm, vecnorm_values_and_shape)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *x = ast_tensor_from(c, 3, (int64_t[]){1, 3, 2}, (float[]){3, 4, 0, 0, -1, 1});
    ast_tensor *y = ast_vecnorm(c, x);
    cr_assert_eq(y->ndim, 3);
    cr_assert_eq(y->shape[1], 3);
    cr_assert_eq(y->shape[2], 1);
    cr_assert_float_eq(y->data[0], 5.0, VAL_TOL);
    cr_assert_eq(y->data[1], 0.0f);
    cr_assert_float_eq(y->data[2], sqrt(2.0), VAL_TOL);
    ast_ctx_free(c);
}

static ast_tensor *fwd_vecnorm(ast_ctx *c, ast_tensor *const *in, void *ud) { return ast_vecnorm(c, in[0]); }

/* N(0, 1) vectors of 4 components have norms ~2, far from the kink at 0. */
Test(ops_norm, vecnorm_gradients)
{
    ast_params *p = ast_params_new(30);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 4}, 1.0f);
    gc_result r = gc_check(fwd_vecnorm, &x, 1, NULL, GRAD_H, GRAD_FLOOR);
    ASSERT_GRADS(r, "vecnorm");
    ast_params_free(p);
}

Test(ops_norm, vecnorm_gradient_is_exactly_zero_at_zero)
{
    ast_params *p = ast_params_new(31);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){2, 3}, 1.0f);
    for (int k = 0; k < 3; k++) x->data[k] = 0.0f;
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ast_vecnorm(c, x);
    ast_backward_seed(c, y, (float[]){1.0f, 1.0f});
    for (int k = 0; k < 3; k++) cr_assert_eq(x->grad[k], 0.0f, "zero row: grad[%d] = %g", k, x->grad[k]);
    /* The other row still gets x / |x|. */
    double norm = sqrt(x->data[3] * x->data[3] + x->data[4] * x->data[4] + x->data[5] * x->data[5]);
    for (int k = 3; k < 6; k++) cr_assert_float_eq(x->grad[k], x->data[k] / norm, VAL_TOL);
    ast_ctx_free(c);
    ast_params_free(p);
}
