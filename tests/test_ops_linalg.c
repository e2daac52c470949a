/* linear / matmul / bmm: values against a naive triple loop and gradients
 * against finite differences. */
#include <criterion/criterion.h>
#include <math.h>

#include "gradcheck.h"

/* float32 sums of <= 64 products of O(1) numbers: 1e-5 relative covers the
 * reordering between OpenBLAS and the naive loop. Gradient checks use
 * h = 1e-2 on functions linear in each input, so truncation is zero and
 * the error is float32 rounding of L / h: well under 1e-2. */
#define VAL_TOL 1e-5
#define GRAD_TOL 1e-2

static ast_tensor *fwd_linear(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    (void)ud;
    return ast_linear(c, in[0], in[1], in[2]);
}

Test(ops_linalg, linear_matches_naive_loop)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 5}, 1.0f);
    ast_tensor *w = gc_input(p, "w", 2, (int64_t[]){4, 5}, 1.0f);
    ast_tensor *b = gc_input(p, "b", 1, (int64_t[]){4}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ast_linear(c, x, w, b);
    cr_assert_eq(y->ndim, 3);
    cr_assert_eq(y->shape[2], 4);
    for (int r = 0; r < 6; r++)
        for (int o = 0; o < 4; o++) {
            double s = b->data[o];
            for (int i = 0; i < 5; i++) s += x->data[r * 5 + i] * w->data[o * 5 + i];
            cr_assert_float_eq(y->data[r * 4 + o], s, VAL_TOL * (1 + fabs(s)), "y[%d,%d]", r, o);
        }
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_linalg, linear_gradients)
{
    ast_params *p = ast_params_new(2);
    ast_tensor *in[3] = {gc_input(p, "x", 3, (int64_t[]){2, 3, 5}, 1.0f),
                         gc_input(p, "w", 2, (int64_t[]){4, 5}, 1.0f),
                         gc_input(p, "b", 1, (int64_t[]){4}, 1.0f)};
    gc_result r = gc_check(fwd_linear, in, 3, NULL, 1e-2f, 1e-2);
    cr_assert_lt(r.max_err, GRAD_TOL, "input %d[%lld]: analytic %g numeric %g", r.worst_input,
                 (long long)r.worst_index, r.analytic, r.numeric);
    ast_params_free(p);
}

typedef struct { int ta, tb; } bmm_flags;

static ast_tensor *fwd_bmm(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const bmm_flags *f = ud;
    return ast_bmm(c, in[0], in[1], f->ta, f->tb);
}

/* Every transpose combination: values against the naive loop, then grads. */
Test(ops_linalg, bmm_all_transposes)
{
    const int B = 2, M = 3, K = 4, N = 5;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            ast_params *p = ast_params_new(3 + 2 * ta + tb);
            ast_tensor *in[2] = {
                gc_input(p, "a", 3, ta ? (int64_t[]){B, K, M} : (int64_t[]){B, M, K}, 1.0f),
                gc_input(p, "b", 3, tb ? (int64_t[]){B, N, K} : (int64_t[]){B, K, N}, 1.0f)};
            bmm_flags fl = {ta, tb};
            ast_ctx *c = ast_ctx_new(0);
            ast_tensor *y = fwd_bmm(c, in, &fl);
            for (int b = 0; b < B; b++)
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double s = 0;
                        for (int k = 0; k < K; k++) {
                            float av = ta ? in[0]->data[b * K * M + k * M + i] : in[0]->data[b * M * K + i * K + k];
                            float bv = tb ? in[1]->data[b * N * K + j * K + k] : in[1]->data[b * K * N + k * N + j];
                            s += av * bv;
                        }
                        cr_assert_float_eq(y->data[b * M * N + i * N + j], s, VAL_TOL * (1 + fabs(s)));
                    }
            ast_ctx_free(c);
            gc_result r = gc_check(fwd_bmm, in, 2, &fl, 1e-2f, 1e-2);
            cr_assert_lt(r.max_err, GRAD_TOL, "ta=%d tb=%d input %d: analytic %g numeric %g", ta, tb,
                         r.worst_input, r.analytic, r.numeric);
            ast_params_free(p);
        }
}

Test(ops_linalg, no_tape_when_grad_is_off)
{
    ast_params *p = ast_params_new(4);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){2, 3}, 1.0f);
    ast_tensor *w = gc_input(p, "w", 2, (int64_t[]){2, 3}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_grad(c, 0);
    ast_tensor *y = ast_linear(c, x, w, NULL);
    cr_assert_eq(y->flags & AST_REQUIRES_GRAD, 0u, "eval outputs must not require grad");
    ast_ctx_free(c);
    ast_params_free(p);
}

/* Empty shapes: a forward of B = 0 sets or N = 0 cells reaches the GEMM
 * with m or n = 0 (the split's grain divided by zero: SIGFPE), and k = 0
 * must still give C = beta C (OpenBLAS refuses lda = 0). */
Test(ops_linalg, gemm_of_empty_shapes_is_safe)
{
    float a[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, b[12] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    float c[12], bias[3] = {0.5f, -1.0f, 2.0f};
    for (int i = 0; i < 12; i++) c[i] = 7.0f;
    ast_sgemm(0, 0, 0, 3, 4, 1.0f, a, 4, b, 3, 0.0f, c, 3); /* m = 0 */
    ast_sgemm(0, 0, 4, 0, 3, 1.0f, a, 3, b, 1, 0.0f, c, 1); /* n = 0 */
    ast_sgemm(1, 1, 0, 0, 0, 1.0f, a, 1, b, 1, 0.0f, c, 1);
    for (int i = 0; i < 12; i++) cr_assert_eq(c[i], 7.0f, "C has no element: c[%d] untouched", i);
    ast_sgemm(0, 0, 4, 3, 0, 1.0f, a, 0, b, 3, 2.0f, c, 3); /* k = 0: C = beta C */
    for (int i = 0; i < 12; i++) cr_assert_eq(c[i], 14.0f, "c[%d] = %g", i, c[i]);
    c[5] = NAN;
    ast_sgemm(0, 1, 4, 3, 0, 1.0f, a, 0, b, 0, 0.0f, c, 3); /* beta = 0 clears, NaN too */
    for (int i = 0; i < 12; i++) cr_assert_eq(c[i], 0.0f, "c[%d] = %g", i, c[i]);
    ast_sgemm_bias(0, 1, 4, 3, 0, 1.0f, a, 0, b, 0, 0.0f, c, 3, bias);
    for (int i = 0; i < 12; i++) cr_assert_eq(c[i], bias[i % 3], "c[%d] = %g", i, c[i]);

    ast_ctx *ctx = ast_ctx_new(0); /* a linear layer over 0 rows: output [0, 4] */
    ast_tensor *x = ast_zeros(ctx, 2, (int64_t[]){0, 5}), *w = ast_zeros(ctx, 2, (int64_t[]){4, 5});
    ast_tensor *y = ast_linear(ctx, x, w, ast_zeros(ctx, 1, (int64_t[]){4}));
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], 0);
    cr_assert_eq(y->shape[1], 4);
    ast_ctx_free(ctx);
}
