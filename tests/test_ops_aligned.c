/* aligned_mse, the op (tests/test_loss.c checks its values: hand-computed
 * sets, rigid motions, the model's use): gradients to pred and target
 * against finite differences, on generic sets with padding and on
 * degenerate ones (collinear, planar, coincident targets); what a set
 * that is not counted gets; NaN inputs. */
#include <criterion/criterion.h>
#include <math.h>

#include "gradcheck.h"

enum { B = 4, N = 6 };

/* Set 0 all valid, set 1 padded, set 2 a single valid cell (not counted),
 * set 3 three valid cells. */
static const float set_mask[B * N] = {1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0, 1, 1, 0, 1, 0};

static ast_tensor *fwd_aligned(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_aligned_mse(c, in[0], in[1], ud);
}

/* Inputs pred and target [B, N, 3] of p's seed, both requiring
 * gradients; returns the mask above (requiring none). */
static ast_tensor *inputs(ast_params *p, ast_tensor *in[2])
{
    in[0] = gc_input(p, "pred", 3, (int64_t[]){B, N, 3}, 1.0f);
    in[1] = gc_input(p, "target", 3, (int64_t[]){B, N, 3}, 1.0f);
    ast_tensor *m = gc_input(p, "mask", 2, (int64_t[]){B, N}, 0.0f);
    m->flags &= ~(uint32_t)AST_REQUIRES_GRAD;
    for (int i = 0; i < B * N; i++) m->data[i] = set_mask[i];
    return m;
}

static void assert_small(gc_result r, const char *what)
{
    cr_assert_lt(r.max_err, 1e-2, "%s: input %d[%lld] analytic %g numeric %g (max rel error %g)", what,
                 r.worst_input, (long long)r.worst_index, r.analytic, r.numeric, r.max_err);
}

/* Random sets: distinct non-zero singular values of each H, so L is smooth
 * in pred and target alike. h = 1e-2: truncation ~h^2 |L'''| ~ 1e-4
 * relative, float32 rounding of L (~0.5) / 2h ~ 3e-6 against gradients
 * ~0.05 (floor 1e-2): ~1e-4; 1e-2 bounds both with margin. */
Test(ops_aligned, gradients_to_pred_and_target)
{
    ast_params *p = ast_params_new(31);
    ast_tensor *in[2], *mask = inputs(p, in);
    gc_result r = gc_check(fwd_aligned, in, 2, mask, 1e-2f, 1e-2);
    cr_log_info("aligned_mse: FD max rel error %.3g at input %d [%lld]", r.max_err, r.worst_input,
                (long long)r.worst_index);
    assert_small(r, "masked");
    r = gc_check(fwd_aligned, in, 2, NULL, 1e-2f, 1e-2);
    assert_small(r, "no mask");
    ast_params_free(p);
}

/* Cells of weight 0 and the set with one valid cell get exactly 0. */
Test(ops_aligned, padding_and_uncounted_sets_get_no_gradient)
{
    ast_params *p = ast_params_new(32);
    ast_tensor *in[2], *mask = inputs(p, in);
    ast_ctx *c = ast_ctx_new(0);
    ast_backward(c, ast_aligned_mse(c, in[0], in[1], mask));
    for (int cell = 0; cell < B * N; cell++)
        for (int d = 0; d < 3 && (set_mask[cell] == 0.0f || cell / N == 2); d++) {
            cr_assert_eq(in[0]->grad[cell * 3 + d], 0.0f, "pred cell %d", cell);
            cr_assert_eq(in[1]->grad[cell * 3 + d], 0.0f, "target cell %d", cell);
        }
    ast_ctx_free(c);
    ast_params_free(p);
}

/* Degenerate targets: set 0 on a line, set 1 in a plane, set 3's three
 * cells at one point (H = 0: R is arbitrary). H = sum p q^T then keeps
 * rank <= 1, <= 2 and 0 whatever pred is, so the zero singular values stay
 * zero, the choice of their singular vectors never reaches L, and L is
 * smooth in pred (not in target, where they would become |.|: a kink, so
 * only pred is checked). Same h and bound as above. */
Test(ops_aligned, gradients_with_degenerate_targets)
{
    ast_params *p = ast_params_new(33);
    ast_tensor *in[2], *mask = inputs(p, in);
    in[1]->flags &= ~(uint32_t)AST_REQUIRES_GRAD;
    float *q = in[1]->data;
    for (int i = 0; i < N; i++) {
        for (int d = 0; d < 3; d++) q[i * 3 + d] = (float)(i - 2) * (float)(d + 1); /* set 0: along (1, 2, 3) */
        q[(N + i) * 3 + 2] = 0.5f;                                                     /* set 1: z = 0.5 */
        for (int d = 0; d < 3; d++) q[(3 * N + i) * 3 + d] = 0.25f * (float)d;        /* set 3: one point */
    }
    gc_result r = gc_check(fwd_aligned, in, 1, mask, 1e-2f, 1e-2);
    assert_small(r, "degenerate targets");
    ast_params_free(p);
}

/* A non-finite coordinate in a weighted cell: NaN loss and NaN gradients
 * throughout its set, no abort (LAPACK would reject it); other sets keep
 * finite gradients. In a cell of weight 0 it is never read. */
Test(ops_aligned, nan_input_gives_nan_not_an_abort)
{
    ast_params *p = ast_params_new(34);
    ast_tensor *in[2], *mask = inputs(p, in);
    ast_ctx *c = ast_ctx_new(0);
    float clean = ast_aligned_mse(c, in[0], in[1], mask)->data[0];
    in[0]->data[(N + 1) * 3] = NAN; /* set 1, a padded cell */
    cr_assert_eq(ast_aligned_mse(c, in[0], in[1], mask)->data[0], clean, "padding is never read");
    in[1]->data[(N + 2) * 3 + 1] = INFINITY; /* set 1, a valid cell */
    ast_tensor *y = ast_aligned_mse(c, in[0], in[1], mask);
    cr_assert(isnan(y->data[0]), "loss %g", y->data[0]);
    ast_backward(c, y);
    for (int k = 0; k < N * 3; k++) {
        cr_assert(isnan(in[0]->grad[N * 3 + k]) && isnan(in[1]->grad[N * 3 + k]), "set 1 [%d]", k);
        cr_assert(isfinite(in[0]->grad[k]) && isfinite(in[1]->grad[k]), "set 0 [%d]", k);
    }
    ast_ctx_free(c);
    ast_params_free(p);
}
