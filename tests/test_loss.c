/* The diffusion loss against loops written out from docs/model.md §4.2 step 5, and
 * its gradients against finite differences; the aligned position loss
 * against hand-computed cases; the loss.position_loss key. */
#include <criterion/criterion.h>
#include <math.h>

#include "model/loss.h"
#include "train/train.h"
#include "gradcheck.h"

enum { B = 3, N = 4, G = 2 };

/* Set 0: all valid; set 1: 3 valid; set 2: one valid cell (no distance term). */
static const float mask_data[B * N] = {1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0};

typedef struct loss_fixture {
    ast_params *p;
    ast_tensor *pred_x, *pred_p, *x, *pos, *mask;
    ast_pos_loss position_loss; /* for fwd_loss */
} loss_fixture;

static loss_fixture fixture(void)
{
    loss_fixture f;
    f.p = ast_params_new(17);
    f.pred_x = gc_input(f.p, "pred_x", 3, (int64_t[]){B, N, G}, 1.0f);
    f.pred_p = gc_input(f.p, "pred_p", 3, (int64_t[]){B, N, 3}, 1.0f);
    f.x = gc_input(f.p, "x", 3, (int64_t[]){B, N, G}, 1.0f);
    f.pos = gc_input(f.p, "pos", 3, (int64_t[]){B, N, 3}, 1.0f);
    f.mask = gc_input(f.p, "mask", 2, (int64_t[]){B, N}, 0.0f);
    f.mask->flags &= ~(uint32_t)AST_REQUIRES_GRAD;
    for (int i = 0; i < B * N; i++) f.mask->data[i] = mask_data[i];
    f.position_loss = AST_POS_LOSS_DISTANCE;
    return f;
}

static double dist(const float *a, const float *b)
{
    double s = 0;
    for (int k = 0; k < 3; k++) s += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
    return sqrt(s);
}

static double expected_expression(const loss_fixture *f)
{
    double s = 0, m = 0;
    for (int c = 0; c < B * N; c++) {
        m += mask_data[c];
        for (int g = 0; g < G; g++) {
            double d = (double)f->pred_x->data[c * G + g] - f->x->data[c * G + g];
            s += mask_data[c] * d * d;
        }
    }
    return s / (G * m);
}

/* Mean over sets with >= 2 valid cells of (1/n^2) sum over valid pairs. */
static double expected_distances(const loss_fixture *f)
{
    double total = 0;
    int sets = 0;
    for (int b = 0; b < B; b++) {
        int idx[N], n = 0;
        for (int i = 0; i < N; i++)
            if (mask_data[b * N + i] != 0.0f) idx[n++] = b * N + i;
        if (n < 2) continue;
        double s = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double d = dist(f->pred_p->data + 3 * idx[i], f->pred_p->data + 3 * idx[j]) -
                           dist(f->pos->data + 3 * idx[i], f->pos->data + 3 * idx[j]);
                s += d * d;
            }
        total += s / ((double)n * n);
        sets++;
    }
    return total / sets;
}

static double expected_direct(const loss_fixture *f)
{
    double s = 0, m = 0;
    for (int c = 0; c < B * N; c++) {
        m += mask_data[c];
        for (int k = 0; k < 3; k++) {
            double d = (double)f->pred_p->data[c * 3 + k] - f->pos->data[c * 3 + k];
            s += mask_data[c] * d * d;
        }
    }
    return s / (3 * m);
}

/* float32 sums of <= 50 squared O(1) terms: 1e-5 relative. */
#define VAL_TOL 1e-5

Test(loss, parts_match_the_spec_formulas)
{
    loss_fixture f = fixture();
    ast_ctx *c = ast_ctx_new(0);
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    lc.lambda_expression = 0.5f;
    lc.lambda_position = 2.0f;
    lc.position_loss = AST_POS_LOSS_DISTANCE;
    ast_model_out pred = {f.pred_x, f.pred_p};
    ast_loss_parts l = ast_diffusion_loss(c, &lc, &pred, f.x, f.pos, f.mask);
    double e = expected_expression(&f), d = expected_distances(&f);
    cr_assert_float_eq(l.expression->data[0], e, VAL_TOL * e);
    cr_assert_float_eq(l.position->data[0], d, VAL_TOL * d);
    cr_assert_float_eq(l.total->data[0], 0.5 * e + 2.0 * d, VAL_TOL * (e + d));
    cr_assert_null(l.moe_aux, "no plugin published a loss");

    lc.position_loss = AST_POS_LOSS_MSE;
    lc.expression_noised = 0; /* expr_to_pos: only positions count */
    l = ast_diffusion_loss(c, &lc, &pred, f.x, f.pos, f.mask);
    double p = expected_direct(&f);
    cr_assert_float_eq(l.position->data[0], p, VAL_TOL * p);
    cr_assert_float_eq(l.total->data[0], 2.0 * p, VAL_TOL * p);
    ast_ctx_free(c);
    ast_params_free(f.p);
}

Test(loss, published_losses_join_the_total)
{
    loss_fixture f = fixture();
    ast_ctx *c = ast_ctx_new(0);
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    lc.position_loss = AST_POS_LOSS_DISTANCE;
    ast_tensor *aux = ast_tensor_from(c, 1, (int64_t[]){1}, (float[]){0.25f});
    ast_add_loss(c, "moe_aux", aux);
    ast_model_out pred = {f.pred_x, f.pred_p};
    ast_loss_parts l = ast_diffusion_loss(c, &lc, &pred, f.x, f.pos, f.mask);
    cr_assert_eq(l.moe_aux->data[0], 0.25f);
    double want = expected_expression(&f) + expected_distances(&f) + 0.25;
    cr_assert_float_eq(l.total->data[0], want, VAL_TOL * want);
    ast_ctx_free(c);
    ast_params_free(f.p);
}

static ast_tensor *fwd_loss(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const loss_fixture *f = ud;
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    lc.position_loss = f->position_loss;
    ast_model_out pred = {in[0], in[1]};
    return ast_diffusion_loss(c, &lc, &pred, f->x, f->pos, f->mask).total;
}

/* The loss is quadratic in pred_x and smooth in pred_p away from zero
 * distances and, for the aligned loss, away from equal or zero singular
 * values of the cross-covariance (random points): h = 1e-2 gives truncation
 * ~1e-4 relative and float32 rounding of L (~1) / 2h ~ 1e-5; 1e-2 is a
 * loose safe bound. */
Test(loss, gradients_match_finite_differences)
{
    const ast_pos_loss kinds[] = {AST_POS_LOSS_DISTANCE, AST_POS_LOSS_ALIGNED, AST_POS_LOSS_MSE};
    for (int k = 0; k < 3; k++) {
        loss_fixture f = fixture();
        f.position_loss = kinds[k];
        ast_tensor *in[] = {f.pred_x, f.pred_p};
        gc_result r = gc_check(fwd_loss, in, 2, &f, 1e-2f, 1e-2);
        cr_assert_lt(r.max_err, 1e-2, "position loss %d, input %d[%lld]: analytic %g numeric %g", (int)kinds[k],
                     r.worst_input, (long long)r.worst_index, r.analytic, r.numeric);
        /* padded cells get no gradient; nor does the single-cell set but from the direct MSE */
        for (int cell = 0; cell < B * N; cell++)
            if (mask_data[cell] == 0.0f || (cell == 2 * N && kinds[k] != AST_POS_LOSS_MSE))
                for (int d = 0; d < 3; d++) cr_assert_eq(f.pred_p->grad[cell * 3 + d], 0.0f, "cell %d", cell);
        ast_params_free(f.p);
    }
}

/* ---- aligned position loss ------------------------------------------------ */

/* An improper orthogonal matrix (det -1): a rotation by 0.7 rad about
 * (1, 2, 2) / 3 (Rodrigues) followed by the mirror z -> -z. With proper
 * set, the rotation alone. */
static void orthogonal(double q[9], int proper)
{
    const double u[3] = {1.0 / 3, 2.0 / 3, 2.0 / 3}, a = 0.7, cs = cos(a), sn = sin(a);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            double cross = i == j ? 0.0 : (((j - i + 3) % 3 == 1) ? -1.0 : 1.0) * u[3 - i - j];
            q[i * 3 + j] = (i == j ? cs : 0.0) + (1.0 - cs) * u[i] * u[j] + sn * cross;
        }
    if (!proper)
        for (int j = 0; j < 3; j++) q[6 + j] = -q[6 + j];
}

/* dst = scale * Q src + shift, rows of 3 (dst may be src). */
static void transform(float *dst, const float *src, int rows, const double q[9], double scale, const double shift[3])
{
    for (int r = 0; r < rows; r++) {
        double v[3];
        for (int i = 0; i < 3; i++)
            v[i] = scale * (q[i * 3] * src[r * 3] + q[i * 3 + 1] * src[r * 3 + 1] + q[i * 3 + 2] * src[r * 3 + 2]) +
                   shift[i];
        for (int i = 0; i < 3; i++) dst[r * 3 + i] = (float)v[i];
    }
}

static float aligned(const float *pred, const float *target, const float *mask, int b, int n)
{
    ast_ctx *c = ast_ctx_new(0);
    int64_t shape[] = {b, n, 3};
    ast_tensor *m = mask ? ast_tensor_from(c, 2, shape, mask) : NULL;
    float v = ast_aligned_mse(c, ast_tensor_from(c, 3, shape, pred), ast_tensor_from(c, 3, shape, target), m)->data[0];
    ast_ctx_free(c);
    return v;
}

/* Four non-coplanar (so chiral) points; a rotated and mirrored, shifted
 * copy is matched exactly because reflections are allowed. The residuals
 * are float32 rounding of O(1) coordinates, ~1e-7, so L ~ 1e-14: 1e-10 is
 * far below any misalignment (O(1)). */
Test(aligned_mse, is_zero_for_a_rotated_mirrored_copy)
{
    const float pred[] = {0.3f, -1.2f, 0.5f, 1.1f, 0.4f, -0.7f, -0.9f, 0.8f, 1.3f, 0.2f, 0.1f, -1.5f};
    float target[12];
    double q[9];
    orthogonal(q, 0);
    transform(target, pred, 4, q, 1.0, (double[]){2.0, -1.0, 0.5});
    cr_assert_lt(aligned(pred, target, NULL, 1, 4), 1e-10);
}

/* Inputs exact in float32 and the value rounded once to float32 (6e-8
 * relative, the double SVD adds ~1e-15): 1e-6 relative. */
#define EXACT_TOL 1e-6

/* Set 0: two points 2 apart against two 4 apart: aligned, each centred
 * point is 1 off, L = (1 + 1) / (3 * 2) = 1/3. Set 1: a triangle against
 * twice its turned (90 degrees about z), shifted copy: the optimal R undoes
 * the turn, each residual is -p~, L = sum |p~|^2 / (3 * 3) = 2/9 for the
 * unit vectors (|p~|^2 = 2/3 each). Set 2: one valid cell, not counted.
 * Padded cells hold far-off points that must not matter. */
Test(aligned_mse, hand_computed_sets_and_padding)
{
    const float pred[] = {0, 0, 0, 2, 0, 0, 1e3f, 1e3f, 1e3f, -7, 5, 1e3f, /* set 0 */
                          1, 0, 0, 0, 1, 0, 0, 0, 1, 1e3f, 0, 0,             /* set 1 */
                          3, 1, 4, 1e3f, 5, 9, 2, 6, 5, -3, 5, 8};           /* set 2 */
    const float target[] = {0, 0, 0, 0, 4, 0, 1, 2, 3, 4, 5, 6,
                            1, 4, 3, -1, 2, 3, 1, 2, 5, 1e3f, 1e3f, 0,
                            1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4};
    const float mask[] = {1, 1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 0};
    double want = (1.0 / 3 + 2.0 / 9) / 2;
    cr_assert_float_eq(aligned(pred, target, mask, 3, 4), want, EXACT_TOL * want);
    cr_assert_float_eq(aligned(pred, target, mask, 1, 4), 1.0 / 3, EXACT_TOL / 3, "set 0 alone");
    cr_assert_eq(aligned(pred + 24, target + 24, mask + 8, 1, 4), 0.0f, "a single valid cell is no set");
}

/* Random sets (B = 2, N = 5) with padding; pred moved rigidly, mirrored
 * or not, gives the same loss. Moving pred rounds it to float32 (~1e-7
 * relative), which moves L (~1) by about as much: 1e-5 relative. */
Test(aligned_mse, moving_pred_rigidly_changes_nothing)
{
    ast_params *p = ast_params_new(5);
    ast_tensor *pred = gc_input(p, "pred", 3, (int64_t[]){2, 5, 3}, 1.0f);
    ast_tensor *target = gc_input(p, "target", 3, (int64_t[]){2, 5, 3}, 1.0f);
    const float mask[] = {1, 1, 1, 1, 1, 1, 0, 1, 1, 0};
    float before = aligned(pred->data, target->data, mask, 2, 5), moved[30];
    for (int proper = 0; proper < 2; proper++) {
        double q[9];
        orthogonal(q, proper);
        transform(moved, pred->data, 10, q, 1.0, (double[]){-3.0, 0.25, 7.0});
        float after = aligned(moved, target->data, mask, 2, 5);
        cr_assert_float_eq(after, before, 1e-5 * before, "proper %d: %g vs %g", proper, after, before);
    }
    ast_params_free(p);
}

typedef struct aligned_case {
    ast_tensor *target, *mask;
} aligned_case;

static ast_tensor *fwd_aligned(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const aligned_case *a = ud;
    return ast_aligned_mse(c, in[0], a->target, a->mask);
}

/* Set 0 all valid, set 1 padded, set 2 a single valid cell. */
static const float aligned_mask[] = {1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 1, 0, 0};

/* FD check of ast_aligned_mse on B = 3 random sets of N = 5, z zeroed in
 * pred and target when planar; returns the max relative error. Padded
 * cells and the single-cell set must get exactly no gradient. */
static double aligned_gradcheck(int planar)
{
    ast_params *p = ast_params_new(planar ? 23 : 29);
    ast_tensor *pred = gc_input(p, "pred", 3, (int64_t[]){3, 5, 3}, 1.0f);
    aligned_case a = {gc_input(p, "target", 3, (int64_t[]){3, 5, 3}, 1.0f),
                      gc_input(p, "mask", 2, (int64_t[]){3, 5}, 0.0f)};
    a.target->flags &= ~(uint32_t)AST_REQUIRES_GRAD;
    a.mask->flags &= ~(uint32_t)AST_REQUIRES_GRAD;
    for (int i = 0; i < 15; i++) {
        a.mask->data[i] = aligned_mask[i];
        if (planar) pred->data[i * 3 + 2] = a.target->data[i * 3 + 2] = 0.0f;
    }
    gc_result r = gc_check(fwd_aligned, &pred, 1, &a, 1e-2f, 1e-2);
    cr_log_info("aligned_mse%s: FD max rel error %.3g at [%lld] (analytic %g numeric %g)", planar ? " (planar)" : "",
                r.max_err, (long long)r.worst_index, r.analytic, r.numeric);
    for (int cell = 0; cell < 15; cell++)
        if (aligned_mask[cell] == 0.0f || cell == 10)
            for (int d = 0; d < 3; d++) cr_assert_eq(pred->grad[cell * 3 + d], 0.0f, "cell %d", cell);
    if (planar) /* mirroring z maps the set to itself, so L is even in any z */
        for (int cell = 0; cell < 15; cell++) cr_assert_eq(pred->grad[cell * 3 + 2], 0.0f, "cell %d z", cell);
    ast_params_free(p);
    return r.max_err;
}

/* Smooth for random points (distinct, non-zero singular values of the
 * cross-covariance; planar sets keep one singular value at exactly 0, which
 * mirroring makes harmless): h = 1e-2 gives truncation ~1e-4 relative and
 * float32 rounding of L (~0.5) / 2h ~ 3e-6 against gradients ~0.05 (floor
 * 1e-2), ~1e-4; 1e-2 is a loose safe bound. */
Test(aligned_mse, gradient_matches_finite_differences)
{
    double err = aligned_gradcheck(0);
    cr_assert_lt(err, 1e-2, "max relative error %g", err);
}

Test(aligned_mse, planar_sets_have_gradients_in_the_plane)
{
    double err = aligned_gradcheck(1);
    cr_assert_lt(err, 1e-2, "max relative error %g", err);
}

/* 2-D data: z = 0 everywhere, so the cross-covariance has rank 2; a copy
 * turned in the plane and mirrored in x is still matched (1e-10: see
 * is_zero_for_a_rotated_mirrored_copy). */
Test(aligned_mse, planar_copy_is_matched)
{
    const float pred[] = {0.3f, -1.2f, 0, 1.1f, 0.4f, 0, -0.9f, 0.8f, 0, 0.2f, 0.1f, 0};
    const double c = cos(1.1), s = sin(1.1), q[9] = {-c, s, 0, s, c, 0, 0, 0, 1};
    float target[12];
    transform(target, pred, 4, q, 1.0, (double[]){4.0, -2.0, 0.0});
    cr_assert_lt(aligned(pred, target, NULL, 1, 4), 1e-10);
}

/* A diverging model must surface as a non-finite loss the trainer reports,
 * not as LAPACK rejecting its input; what padded cells hold never matters. */
Test(aligned_mse, non_finite_input_gives_a_non_finite_loss)
{
    float pred[] = {0, 0, 0, 1, 0, 0, 0, NAN, 0}, target[] = {0, 0, 0, 0, 2, 0, 1, 1, 1};
    cr_assert(!isfinite(aligned(pred, target, NULL, 1, 3)));
    /* two points 1 apart against 2 apart: each centred point is 1/2 off, L = 2 (1/2)^2 / (3 * 2) */
    cr_assert_float_eq(aligned(pred, target, (float[]){1, 1, 0}, 1, 3), 1.0 / 12, EXACT_TOL / 12);
}

/* ---- config ---------------------------------------------------------------- */

static ast_pos_loss position_loss_of(const char *yaml)
{
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string(yaml, "t.yaml", &e);
    cr_assert(cfg, "%s", e.msg);
    ast_train_config tc;
    cr_assert_eq(ast_train_config_from_cfg(cfg, &tc, &e), 0, "%s", e.msg);
    ast_cfg_free(cfg);
    return tc.loss.position_loss;
}

Test(loss, position_loss_key)
{
    cr_assert_eq(position_loss_of("seed: {value: 1}\n"), AST_POS_LOSS_ALIGNED);
    /* the reference's switch decides only under reference_parity */
    cr_assert_eq(position_loss_of("loss: {use_distance_matrix: true}\n"), AST_POS_LOSS_ALIGNED);
    cr_assert_eq(position_loss_of("reference_parity: true\n"), AST_POS_LOSS_DISTANCE);
    cr_assert_eq(position_loss_of("reference_parity: true\n"
                                  "loss: {position_loss: aligned, use_distance_matrix: false}\n"),
                 AST_POS_LOSS_MSE);
    cr_assert_eq(position_loss_of("loss: {position_loss: distance}\n"), AST_POS_LOSS_DISTANCE);
    cr_assert_eq(position_loss_of("loss: {position_loss: mse, use_distance_matrix: true}\n"), AST_POS_LOSS_MSE);
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    cr_assert_eq(lc.position_loss, AST_POS_LOSS_ALIGNED);

    ast_error e = {""};
    cr_assert_null(ast_cfg_load_string("loss: {position_loss: bogus}\n", "t.yaml", &e));
    cr_assert_str_eq(e.msg, "t.yaml:1:23: loss.position_loss: expected one of aligned, distance, mse, got 'bogus'; "
                            "use one of the listed values");
}
