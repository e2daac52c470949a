/* sum_axis / sum / mean: values against direct loops, gradients against
 * finite differences. */
#include <criterion/criterion.h>
#include <math.h>

#include "gradcheck.h"

/* float32 sums of <= 24 O(1) terms against double: well under 1e-5. */
#define VAL_TOL 1e-5
/* These ops are linear, so central differences have no truncation error;
 * what is left is float32 rounding of L / h (~1e-5 at h = 1e-2). */
#define GRAD_TOL 1e-3

#define ASSERT_GRADS(r, what)                                                                              \
    cr_assert_lt((r).max_err, GRAD_TOL, "%s: input %d[%lld] analytic %g numeric %g", what, (r).worst_input, \
                 (long long)(r).worst_index, (r).analytic, (r).numeric)

Test(ops_reduce, sum_axis_every_axis_keeps_dim)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 4}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    for (int axis = -3; axis < 3; axis++) {
        int a = axis < 0 ? axis + 3 : axis;
        ast_tensor *y = ast_sum_axis(c, x, axis);
        cr_assert_eq(y->ndim, 3);
        for (int d = 0; d < 3; d++) cr_assert_eq(y->shape[d], d == a ? 1 : x->shape[d], "axis %d dim %d", axis, d);
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 4; k++) {
                    int at[3] = {i, j, k};
                    if (at[a] != 0) continue;
                    double s = 0.0;
                    for (int t = 0; t < x->shape[a]; t++) {
                        at[a] = t;
                        s += x->data[(at[0] * 3 + at[1]) * 4 + at[2]];
                    }
                    int64_t o = a == 0 ? j * 4 + k : a == 1 ? i * 4 + k : i * 3 + j;
                    cr_assert_float_eq(y->data[o], s, VAL_TOL, "axis %d at (%d,%d,%d)", axis, i, j, k);
                }
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

static ast_tensor *fwd_sum_axis(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_sum_axis(c, in[0], *(const int *)ud);
}

Test(ops_reduce, sum_axis_gradients)
{
    for (int axis = -1; axis < 3; axis++) {
        ast_params *p = ast_params_new(2);
        ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 4}, 1.0f);
        gc_result r = gc_check(fwd_sum_axis, &x, 1, &axis, 1e-2f, 1e-2);
        ASSERT_GRADS(r, "sum_axis");
        ast_params_free(p);
    }
}

Test(ops_reduce, sum_and_mean_values)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *x = ast_tensor_from(c, 2, (int64_t[]){2, 3}, (float[]){1, 2, 3, 4, 5, -1});
    ast_tensor *s = ast_sum(c, x), *m = ast_mean(c, x);
    cr_assert_eq(s->ndim, 1);
    cr_assert_eq(s->shape[0], 1);
    cr_assert_eq(m->size, 1);
    cr_assert_float_eq(s->data[0], 14.0, VAL_TOL);
    cr_assert_float_eq(m->data[0], 14.0 / 6.0, VAL_TOL);
    ast_ctx_free(c);
}

/* Summing 1e6 ones onto 1e8 loses every one of them in float32 (the ulp at
 * 1e8 is 8); a double accumulator keeps them. */
Test(ops_reduce, sum_keeps_small_terms)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *x = ast_zeros(c, 1, (int64_t[]){1000001});
    x->data[0] = 1e8f;
    for (int64_t i = 1; i < x->size; i++) x->data[i] = 1.0f;
    cr_assert_float_eq(ast_sum(c, x)->data[0], 1.01e8, 8.0, "one float32 ulp at 1e8");
    ast_ctx_free(c);
}

static ast_tensor *fwd_sum(ast_ctx *c, ast_tensor *const *in, void *ud) { return ast_sum(c, in[0]); }
static ast_tensor *fwd_mean(ast_ctx *c, ast_tensor *const *in, void *ud) { return ast_mean(c, in[0]); }

Test(ops_reduce, sum_and_mean_gradients)
{
    ast_params *p = ast_params_new(3);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){3, 5}, 1.0f);
    /* mean's gradient is 1/15 per element: the floor must sit below it. */
    gc_result r = gc_check(fwd_sum, &x, 1, NULL, 1e-2f, 1e-3);
    ASSERT_GRADS(r, "sum");
    r = gc_check(fwd_mean, &x, 1, NULL, 1e-2f, 1e-3);
    ASSERT_GRADS(r, "mean");
    ast_params_free(p);
}
