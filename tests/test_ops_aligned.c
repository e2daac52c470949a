/* aligned_mse, the op (tests/test_loss.c checks its values: hand-computed
 * sets, rigid motions, the model's use): gradients to pred and target
 * against finite differences, on generic sets with padding and on
 * degenerate ones (collinear, planar, coincident targets); what a set
 * that is not counted gets; NaN inputs. kabsch_align, the sampler's
 * alignment: the bits of the host path it replaced, on random, padded
 * and degenerate sets; a rigid motion undone; NaN; no gradient. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "engine/kabsch.h"
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

/* ---- kabsch_align ------------------------------------------------------------ */

/* The sampler's host path before the op (ast_sample_align_to_state in
 * core/eval/sample.c), kept as the reference the op must match
 * bit for bit: the CPU sampler's numbers, and the golden tests', stay. */
static void align_to_state_before(int nb, int np, const float *z, const float *mask, float *pred)
{
    double *p = malloc((size_t)6 * np * sizeof *p), *q = p + 3 * np, *w = malloc((size_t)np * sizeof *w), r[9];
    for (int b = 0; b < nb; b++) {
        int64_t o = (int64_t)b * np * 3;
        for (int i = 0; i < 3 * np; i++) p[i] = pred[o + i], q[i] = z[o + i];
        for (int i = 0; i < np; i++) w[i] = mask ? mask[(int64_t)b * np + i] : 1.0;
        ast_kabsch(p, q, w, np, 1, r);
        for (int i = 0; i < np; i++)
            for (int k = 0; k < 3; k++)
                pred[o + i * 3 + k] =
                    (float)(r[k * 3] * p[i * 3] + r[k * 3 + 1] * p[i * 3 + 1] + r[k * 3 + 2] * p[i * 3 + 2]);
    }
    free(p), free(w);
}

/* kabsch_align on the CPU of host arrays (nb sets of np cells) into out. */
static void align_op(int nb, int np, const float *pred, const float *target, const float *mask, float *out)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_grad(c, 0);
    int64_t shape[3] = {nb, np, 3};
    ast_tensor *mk = mask ? ast_tensor_from(c, 2, (int64_t[]){nb, np}, mask) : NULL;
    ast_tensor *y = ast_kabsch_align(c, ast_tensor_from(c, 3, shape, pred), ast_tensor_from(c, 3, shape, target), mk);
    cr_assert(y->ndim == 3 && y->shape[0] == nb && y->shape[1] == np && y->shape[2] == 3, "output shape");
    memcpy(out, y->data, (size_t)nb * np * 3 * sizeof *out);
    ast_ctx_free(c);
}

/* Point sets as the sampler has them: N(0, scale^2), centred over the
 * valid cells in float, padding 0 (mask NULL: none). */
static void centred_sets(ast_rng *r, int nb, int np, const float *mask, float scale, float *x)
{
    for (int b = 0; b < nb; b++) {
        float mean[3] = {0}, count = 0.0f, *s = x + (int64_t)b * np * 3;
        for (int i = 0; i < np; i++) {
            float w = mask ? mask[b * np + i] : 1.0f;
            count += w;
            for (int d = 0; d < 3; d++) s[i * 3 + d] = w * scale * ast_rng_gauss(r), mean[d] += s[i * 3 + d];
        }
        for (int i = 0; i < np; i++)
            for (int d = 0; d < 3 && count > 0.0f; d++)
                s[i * 3 + d] = (mask ? mask[b * np + i] : 1.0f) * (s[i * 3 + d] - mean[d] / count);
    }
}

/* The op against the former host path on (nb, np) sets: every bit,
 * including padding (turned as the host path turned it). */
static void assert_as_before(const char *what, int nb, int np, const float *pred, const float *target,
                             const float *mask)
{
    size_t n = (size_t)nb * np * 3;
    float *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    memcpy(want, pred, n * sizeof *want);
    align_to_state_before(nb, np, target, mask, want);
    align_op(nb, np, pred, target, mask, got);
    for (size_t k = 0; k < n; k++)
        cr_assert(memcmp(&got[k], &want[k], sizeof got[k]) == 0, "%s: [%zu] (set %zu) %.9g, the host path %.9g", what,
                  k, k / 3 / (size_t)np, got[k], want[k]);
    free(want), free(got);
}

/* Random sets of the sampler's shapes and some odd ones, without a mask,
 * with 0/1 masks (padding holding random values: the op must ignore them
 * for R as the host path's zero weights did, and turn them alike) and with
 * fractional weights; a set with one valid cell and one with none (R = I). */
Test(ops_aligned, kabsch_align_matches_the_former_host_path)
{
    enum { NB = 9, NP = 40 };
    static float pred[NB * NP * 3], target[NB * NP * 3], mask[NB * NP], weights[NB * NP];
    ast_rng r;
    ast_rng_seed(&r, 41);
    for (int i = 0; i < NB * NP; i++) {
        mask[i] = (ast_rng_next(&r) & 3u) != 0u; /* about a quarter padded */
        weights[i] = (float)(ast_rng_next(&r) % 5u) * 0.25f;
    }
    for (int i = 0; i < NP; i++) mask[6 * NP + i] = i == 7, mask[7 * NP + i] = 0.0f; /* one valid cell; none */
    centred_sets(&r, NB, NP, NULL, 1.0f, pred);
    centred_sets(&r, NB, NP, NULL, 3.0f, target);
    assert_as_before("no mask", NB, NP, pred, target, NULL);
    assert_as_before("0/1 mask", NB, NP, pred, target, mask);
    assert_as_before("weights", NB, NP, pred, target, weights);
    centred_sets(&r, NB, NP, mask, 1.0f, pred);
    centred_sets(&r, NB, NP, mask, 0.01f, target); /* a state near its end: small */
    assert_as_before("sampler's sets", NB, NP, pred, target, mask);
    assert_as_before("one set of every cell", 1, NB * NP, pred, target, NULL);
    assert_as_before("sets of one cell", NB * NP, 1, pred, target, NULL);
}

/* Degenerate sets, B = 5 of N = 8: set 0 both on lines through the
 * origin, set 1 both in planes through it, set 2 the target at the origin
 * (H = 0), set 3 pred at the origin, set 4 pred and target one point each
 * (two cells, opposite: collinear). H's zero singular values leave LAPACK
 * to pick their vectors; the op asks it the same, so the bits still match. */
Test(ops_aligned, kabsch_align_matches_the_former_host_path_on_degenerate_sets)
{
    enum { NB = 5, NP = 8 };
    float pred[NB * NP * 3] = {0}, target[NB * NP * 3] = {0};
    ast_rng r;
    ast_rng_seed(&r, 42);
    for (int i = 0; i < NP; i++) {
        float t = (float)i - 3.5f, u = ast_rng_gauss(&r), v = ast_rng_gauss(&r);
        for (int a = 0; a < 3; a++) {
            pred[i * 3 + a] = t * (float)(a + 1), target[i * 3 + a] = t * (a == 1 ? -0.5f : 0.25f);
            pred[(NP + i) * 3 + a] = u * (a == 0) + v * (a == 2) * 0.5f; /* the plane y = 0 */
            target[(NP + i) * 3 + a] = u * (a == 1) - v * (a == 0);      /* the plane z = 0 */
            pred[(2 * NP + i) * 3 + a] = ast_rng_gauss(&r);
            target[(3 * NP + i) * 3 + a] = ast_rng_gauss(&r);
        }
    }
    for (int a = 0; a < 3; a++) pred[4 * NP * 3 + a] = 1.0f + (float)a, pred[(4 * NP + 1) * 3 + a] = -1.0f - (float)a;
    for (int a = 0; a < 3; a++) target[4 * NP * 3 + a] = 0.5f, target[(4 * NP + 1) * 3 + a] = -0.5f;
    assert_as_before("degenerate sets", NB, NP, pred, target, NULL);
    float out[NB * NP * 3];
    align_op(NB, NP, pred, target, NULL, out);
    for (int k = 2 * NP * 3; k < 3 * NP * 3; k++) cr_assert_eq(out[k], pred[k], "H = 0 turns nothing: [%d]", k);
}

/* target = Q pred for an orthogonal Q (a rotation, then a reflection): the
 * op undoes it, up to float32 rounding of pred and Q p (a few ulp of the
 * set's scale, 1e-6 with margin for |p| ~ 3). */
Test(ops_aligned, kabsch_align_undoes_a_rigid_motion)
{
    enum { NP = 50 };
    float pred[2 * NP * 3], target[2 * NP * 3], out[2 * NP * 3];
    ast_rng r;
    ast_rng_seed(&r, 43);
    centred_sets(&r, 2, NP, NULL, 1.0f, pred);
    double th = 0.7, ca = cos(th), sa = sin(th);
    const double q[2][9] = {{ca, -sa, 0, sa * 0.6, ca * 0.6, -0.8, sa * 0.8, ca * 0.8, 0.6},
                            {1, 0, 0, 0, -1, 0, 0, 0, 1}};
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < NP; i++)
            for (int a = 0; a < 3; a++) {
                const float *p = pred + (b * NP + i) * 3;
                double qp = q[b][a * 3] * p[0] + q[b][a * 3 + 1] * p[1] + q[b][a * 3 + 2] * p[2];
                target[(b * NP + i) * 3 + a] = (float)qp;
            }
    align_op(2, NP, pred, target, NULL, out);
    for (int k = 0; k < 2 * NP * 3; k++)
        cr_assert(fabsf(out[k] - target[k]) < 1e-6f, "[%d] %.9g, the target %.9g", k, out[k], target[k]);
}

/* A non-finite coordinate in a weighted cell: its set comes out NaN (no
 * abort: LAPACK would reject it), the others as before; in a padded cell
 * it is never read for R, and only that cell, turned, is NaN. */
Test(ops_aligned, kabsch_align_nan_input_gives_nan_not_an_abort)
{
    enum { NB = 3, NP = 6 };
    float pred[NB * NP * 3], target[NB * NP * 3], out[NB * NP * 3], clean[NB * NP * 3];
    float mask[NB * NP] = {1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1};
    ast_rng r;
    ast_rng_seed(&r, 44);
    centred_sets(&r, NB, NP, NULL, 1.0f, pred);
    centred_sets(&r, NB, NP, NULL, 1.0f, target);
    align_op(NB, NP, pred, target, mask, clean);
    pred[5 * 3 + 1] = NAN;              /* set 0, padded */
    target[(NP + 2) * 3] = INFINITY;    /* set 1, valid */
    target[(2 * NP + 3) * 3 + 2] = NAN; /* set 2, padded */
    align_op(NB, NP, pred, target, mask, out);
    for (int k = 0; k < NP * 3; k++) {
        if (k / 3 == 5) cr_assert(isnan(out[k]), "set 0's padded cell, turned [%d]: %g", k, out[k]);
        else cr_assert_eq(out[k], clean[k], "set 0 [%d]", k);
        cr_assert(isnan(out[NP * 3 + k]), "set 1 [%d]: %g", k, out[NP * 3 + k]);
        cr_assert_eq(out[2 * NP * 3 + k], clean[2 * NP * 3 + k], "set 2 [%d]", k);
    }
}

/* An input that wants a gradient is refused, not silently cut off. */
Test(ops_aligned, kabsch_align_refuses_an_input_that_wants_a_gradient, .signal = SIGABRT)
{
    ast_params *p = ast_params_new(45);
    ast_tensor *in[2];
    inputs(p, in);
    ast_ctx *c = ast_ctx_new(0);
    ast_kabsch_align(c, in[0], in[1], NULL);
}
