/* pdist / mse: values against direct loops, gradients against finite
 * differences, and the exact zero gradient at zero distance. */
#include <criterion/criterion.h>
#include <math.h>

#include "gradcheck.h"

/* float32 results over <= 24 O(1) terms against double: under 1e-5. */
#define VAL_TOL 1e-5
/* h = 1e-2: pdist's third derivative is ~1/d^2, and the points are kept at
 * least 0.3 apart (asserted), so truncation h^2/6 * 11 ~ 2e-4 relative;
 * mse is quadratic in a and b (no truncation) and smooth in the mask.
 * Measured: <= 1.4e-4 for both. */
#define GRAD_TOL 1e-2

#define ASSERT_GRADS(r, what)                                                                              \
    cr_assert_lt((r).max_err, GRAD_TOL, "%s: input %d[%lld] analytic %g numeric %g", what, (r).worst_input, \
                 (long long)(r).worst_index, (r).analytic, (r).numeric)

enum { B = 2, NP = 5, D = 3 };

static double direct_distance(const float *p, int b, int i, int j)
{
    double s = 0.0;
    for (int k = 0; k < D; k++) {
        double u = (double)p[(b * NP + i) * D + k] - p[(b * NP + j) * D + k];
        s += u * u;
    }
    return sqrt(s);
}

Test(ops_loss, pdist_matches_direct_loops)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "p", 3, (int64_t[]){B, NP, D}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ast_pdist(c, x);
    cr_assert_eq(y->ndim, 3);
    cr_assert_eq(y->shape[1], NP);
    cr_assert_eq(y->shape[2], NP);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < NP; i++)
            for (int j = 0; j < NP; j++)
                cr_assert_float_eq(y->data[(b * NP + i) * NP + j], direct_distance(x->data, b, i, j), VAL_TOL,
                                   "D[%d,%d,%d]", b, i, j);
    ast_ctx_free(c);
    ast_params_free(p);
}

static ast_tensor *fwd_pdist(ast_ctx *c, ast_tensor *const *in, void *ud) { return ast_pdist(c, in[0]); }

Test(ops_loss, pdist_gradients)
{
    ast_params *p = ast_params_new(2);
    ast_tensor *x = gc_input(p, "p", 3, (int64_t[]){B, NP, D}, 1.0f);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < NP; i++)
            for (int j = i + 1; j < NP; j++)
                cr_assert_gt(direct_distance(x->data, b, i, j), 0.3, "test points too close for h = 1e-2");
    gc_result r = gc_check(fwd_pdist, &x, 1, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "pdist");
    ast_params_free(p);
}

/* Two coincident points: every distance is 0 (the pair and the diagonal),
 * so the gradient must be exactly 0, not NaN from 0/0. */
Test(ops_loss, pdist_gradient_is_exactly_zero_at_zero_distance)
{
    ast_params *p = ast_params_new(3);
    ast_tensor *x = gc_input(p, "p", 3, (int64_t[]){1, 2, D}, 1.0f);
    for (int k = 0; k < D; k++) x->data[D + k] = x->data[k];
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ast_pdist(c, x);
    for (int i = 0; i < 4; i++) cr_assert_eq(y->data[i], 0.0f, "D[%d] = %g", i, y->data[i]);
    ast_backward_seed(c, y, (float[]){1.0f, -2.0f, 3.0f, 0.5f});
    for (int i = 0; i < 2 * D; i++) cr_assert_eq(x->grad[i], 0.0f, "grad[%d] = %g", i, x->grad[i]);
    ast_ctx_free(c);
    ast_params_free(p);
}

/* ---- mse ----------------------------------------------------------------------- */

enum { ROWS = 6, COLS = 4 };

static double direct_mse(const float *a, const float *b, const float *m)
{
    double num = 0.0, cnt = 0.0;
    for (int r = 0; r < ROWS; r++)
        for (int k = 0; k < COLS; k++) {
            double w = m ? m[r] : 1.0, e = (double)a[r * COLS + k] - b[r * COLS + k];
            num += w * e * e;
            cnt += w;
        }
    return num / fmax(1.0, cnt);
}

Test(ops_loss, mse_with_and_without_mask)
{
    ast_params *p = ast_params_new(4);
    ast_tensor *a = gc_input(p, "a", 3, (int64_t[]){2, 3, COLS}, 1.0f);
    ast_tensor *b = gc_input(p, "b", 3, (int64_t[]){2, 3, COLS}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *m = ast_tensor_from(c, 2, (int64_t[]){2, 3}, (float[]){1, 0, 1, 1, 0, 0});
    ast_tensor *plain = ast_mse(c, a, b, NULL), *masked = ast_mse(c, a, b, m);
    cr_assert_eq(masked->size, 1);
    cr_assert_float_eq(plain->data[0], direct_mse(a->data, b->data, NULL), VAL_TOL);
    cr_assert_float_eq(masked->data[0], direct_mse(a->data, b->data, m->data), VAL_TOL);
    cr_assert(fabs(plain->data[0] - masked->data[0]) > 1e-3, "the mask must change the loss");
    ast_ctx_free(c);
    ast_params_free(p);
}

/* No valid row: the count clamps to 1 and the loss is 0, not 0/0. */
Test(ops_loss, mse_all_masked_is_zero)
{
    ast_params *p = ast_params_new(5);
    ast_tensor *a = gc_input(p, "a", 2, (int64_t[]){ROWS, COLS}, 1.0f);
    ast_tensor *b = gc_input(p, "b", 2, (int64_t[]){ROWS, COLS}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ast_mse(c, a, b, ast_zeros(c, 1, (int64_t[]){ROWS}));
    cr_assert_eq(y->data[0], 0.0f);
    ast_backward(c, y);
    for (int i = 0; i < ROWS * COLS; i++) cr_assert_eq(a->grad[i], 0.0f, "masked rows get no gradient");
    ast_ctx_free(c);
    ast_params_free(p);
}

static ast_tensor *fwd_mse(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_mse(c, in[0], in[1], ud ? in[2] : NULL);
}

Test(ops_loss, mse_gradients_to_both_sides_and_the_mask)
{
    ast_params *p = ast_params_new(6);
    ast_tensor *in[3] = {gc_input(p, "a", 2, (int64_t[]){ROWS, COLS}, 1.0f),
                         gc_input(p, "b", 2, (int64_t[]){ROWS, COLS}, 1.0f),
                         gc_input(p, "m", 1, (int64_t[]){ROWS}, 1.0f)};
    /* Soft weights in [0.5, 1.5]: count ~ 24, away from the clamp at 1. */
    for (int r = 0; r < ROWS; r++) in[2]->data[r] = 0.5f + (float)r / (ROWS - 1);
    gc_result r = gc_check(fwd_mse, in, 3, (void *)1, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "mse masked");
    r = gc_check(fwd_mse, in, 2, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "mse");
    ast_params_free(p);
}
