/* The local-structure losses (ast_structure_loss): a hand-computed NCA
 * value, finite-difference gradients with padded sets, padding that does
 * not matter, invariance to moving and scaling the prediction, how they
 * join the diffusion loss, and the loss.structure keys. */
#include <criterion/criterion.h>
#include <math.h>

#include "model/loss.h"
#include "train/train.h"
#include "gradcheck.h"

static const ast_structure kinds[] = {AST_STRUCTURE_NCA, AST_STRUCTURE_EDGE_LOG_RATIO};

static float structure(ast_structure kind, const float *pred, const float *target, const float *mask, int b, int n,
                       int k)
{
    ast_ctx *c = ast_ctx_new(0);
    int64_t shape[] = {b, n, 3};
    ast_tensor *m = mask ? ast_tensor_from(c, 2, shape, mask) : NULL;
    float v = ast_structure_loss(c, kind, ast_tensor_from(c, 3, shape, pred), ast_tensor_from(c, 3, shape, target), m,
                                 k, 1.0)->data[0];
    ast_ctx_free(c);
    return v;
}

/* Inputs exact in float32, the value computed in double and rounded once
 * to float32 (6e-8 relative): 1e-6 relative. */
#define EXACT_TOL 1e-6

/* Cells at x = 0, 1, 3, k = 1: the true neighbours are 0->1, 1->0, 2->1, the
 * mean squared kNN edge (1 + 1 + 4) / 3 = 2 and, pred = target, t = 2. Cell
 * i's loss is log(1 + exp(a_other - a_near)): 0: log(1 + e^-4), 1:
 * log(1 + e^-1.5), 2: log(1 + e^-2.5). A padded fourth cell far off does
 * not matter. */
Test(structure_loss, nca_hand_computed)
{
    const float pos[] = {0, 0, 0, 1, 0, 0, 3, 0, 0, -50, 7, 2};
    double want = (log1p(exp(-4.0)) + log1p(exp(-1.5)) + log1p(exp(-2.5))) / 3.0;
    cr_assert_float_eq(structure(AST_STRUCTURE_NCA, pos, pos, NULL, 1, 3, 1), want, EXACT_TOL * want);
    cr_assert_float_eq(structure(AST_STRUCTURE_NCA, pos, pos, (float[]){1, 1, 1, 0}, 1, 4, 1), want, EXACT_TOL * want);
}

/* A similar copy (turned, mirrored, shifted, scaled) has every edge in the
 * same ratio: r_e - c = 0 up to float32 rounding of the copy (~1e-7
 * relative per length, so (r - c)^2 ~ 1e-14): 1e-10. */
Test(structure_loss, edge_log_ratio_is_zero_for_a_similar_copy)
{
    const float pos[] = {0.3f, -1.2f, 0.5f, 1.1f, 0.4f, -0.7f, -0.9f, 0.8f, 1.3f, 0.2f, 0.1f, -1.5f, 2.0f, 0.3f, 0.9f};
    float copy[15];
    for (int i = 0; i < 5; i++) copy[i * 3] = -2.5f * pos[i * 3 + 1] + 4, copy[i * 3 + 1] = 2.5f * pos[i * 3],
                                copy[i * 3 + 2] = -2.5f * pos[i * 3 + 2] - 1;
    cr_assert_lt(structure(AST_STRUCTURE_EDGE_LOG_RATIO, copy, pos, NULL, 1, 5, 2), 1e-10);
}

/* B = 3 sets of N = 6: set 0 all valid, set 1 two padded cells, set 2 a
 * single valid cell (no neighbours: not a set). */
static const float mask6[] = {1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1, 0, 0, 1, 0, 0, 0};

typedef struct structure_case {
    ast_structure kind;
    ast_tensor *target, *mask;
} structure_case;

static ast_tensor *fwd_structure(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const structure_case *s = ud;
    return ast_structure_loss(c, s->kind, in[0], s->target, s->mask, 2, 1.0);
}

static structure_case random_case(ast_params *p, ast_structure kind)
{
    structure_case s = {kind, gc_input(p, "target", 3, (int64_t[]){3, 6, 3}, 1.0f),
                        gc_input(p, "mask", 2, (int64_t[]){3, 6}, 0.0f)};
    s.target->flags &= ~(uint32_t)AST_REQUIRES_GRAD;
    s.mask->flags &= ~(uint32_t)AST_REQUIRES_GRAD;
    for (int i = 0; i < 18; i++) s.mask->data[i] = mask6[i];
    return s;
}

/* The true kNN depend on target only, so both losses are smooth in pred
 * away from coincident predicted cells (random points are ~0.5 apart):
 * h = 1e-2 gives truncation ~h^2 |L'''| / 6 ~ 1e-4 relative for lengths
 * ~0.5 (edge_log_ratio's third derivative ~ 1/d^3), float32 rounding of
 * L (~1) / 2h ~ 3e-6 against gradients ~0.05 (floor 1e-2), ~1e-4: 1e-2 is
 * a safe bound that a wrong term (O(1) relative) cannot pass. Padded cells
 * and the single-cell set get exactly no gradient. */
Test(structure_loss, gradients_match_finite_differences)
{
    for (int k = 0; k < 2; k++) {
        ast_params *p = ast_params_new(41 + k);
        ast_tensor *pred = gc_input(p, "pred", 3, (int64_t[]){3, 6, 3}, 1.0f);
        structure_case s = random_case(p, kinds[k]);
        gc_result r = gc_check(fwd_structure, &pred, 1, &s, 1e-2f, 1e-2);
        cr_log_info("structure %d: FD max rel error %.3g at [%lld] (analytic %g numeric %g)", (int)kinds[k], r.max_err,
                    (long long)r.worst_index, r.analytic, r.numeric);
        cr_assert_lt(r.max_err, 1e-2, "kind %d, [%lld]: analytic %g numeric %g", (int)kinds[k],
                     (long long)r.worst_index, r.analytic, r.numeric);
        for (int cell = 0; cell < 18; cell++)
            if (mask6[cell] == 0.0f || cell == 14)
                for (int d = 0; d < 3; d++) cr_assert_eq(pred->grad[cell * 3 + d], 0.0f, "kind %d cell %d", k, cell);
        ast_params_free(p);
    }
}

/* Padded cells may hold anything, NaN included: set 1 of the random case
 * scores what its four valid cells score alone (the same double sums in
 * the same order: equal). */
Test(structure_loss, padded_cells_do_not_matter)
{
    for (int k = 0; k < 2; k++) {
        ast_params *p = ast_params_new(43);
        ast_tensor *pred = gc_input(p, "pred", 3, (int64_t[]){3, 6, 3}, 1.0f);
        structure_case s = random_case(p, kinds[k]);
        float *pp = pred->data + 18, *pq = s.target->data + 18, alone_p[12], alone_q[12];
        for (int i = 0, n = 0; i < 6; i++)
            if (mask6[6 + i] != 0.0f)
                for (int a = 0; a < 3; a++, n++) alone_p[n] = pp[i * 3 + a], alone_q[n] = pq[i * 3 + a];
        pp[1 * 3] = NAN, pq[4 * 3 + 1] = 1e30f;
        float padded = structure(kinds[k], pp, pq, mask6 + 6, 1, 6, 2);
        cr_assert_eq(padded, structure(kinds[k], alone_p, alone_q, NULL, 1, 4, 2), "kind %d", k);
        ast_params_free(p);
    }
}

/* The loss reads pred through distance ratios: turning, mirroring,
 * shifting and scaling it (by 1e-3 and 1e3: units; the shift scaled too, so
 * it does not eat the coordinates' digits) changes nothing but float32
 * rounding of the moved coordinates (~1e-7 relative, moving L ~1 by about
 * as much): 1e-5 relative. */
Test(structure_loss, invariant_to_rotation_shift_and_scale)
{
    const double c = cos(0.8), s = sin(0.8);
    for (int k = 0; k < 2; k++) {
        ast_params *p = ast_params_new(47);
        ast_tensor *pred = gc_input(p, "pred", 3, (int64_t[]){3, 6, 3}, 1.0f);
        structure_case sc = random_case(p, kinds[k]);
        float before = structure(kinds[k], pred->data, sc.target->data, mask6, 3, 6, 2), moved[54];
        for (int scale = -3; scale <= 3; scale += 6) {
            double a = pow(10.0, scale);
            for (int i = 0; i < 18; i++) {
                const float *x = pred->data + i * 3;
                moved[i * 3] = (float)(a * (c * x[0] - s * x[1] + 5.0));
                moved[i * 3 + 1] = (float)(a * (s * x[0] + c * x[1] - 2.0));
                moved[i * 3 + 2] = (float)(a * (0.5 - x[2]));
            }
            float after = structure(kinds[k], moved, sc.target->data, mask6, 3, 6, 2);
            cr_assert_float_eq(after, before, 1e-5 * before, "kind %d scale 1e%d: %g vs %g", k, scale, after, before);
        }
        ast_params_free(p);
    }
}

/* A diverging model must surface as a non-finite loss, not a crash. */
Test(structure_loss, non_finite_input_gives_a_non_finite_loss)
{
    const float pred[] = {0, 0, 0, 1, 0, 0, 0, NAN, 0}, target[] = {0, 0, 0, 0, 2, 0, 1, 1, 1};
    for (int k = 0; k < 2; k++) cr_assert(!isfinite(structure(kinds[k], pred, target, NULL, 1, 3, 1)));
}

/* The total adds lambda_structure times each chosen loss; the parts report
 * their unweighted sum (values exact in float32 up to one rounding of each
 * sum: 1e-6 relative). */
Test(structure_loss, joins_the_diffusion_loss)
{
    ast_params *p = ast_params_new(53);
    ast_tensor *pred_p = gc_input(p, "pred", 3, (int64_t[]){3, 6, 3}, 1.0f);
    ast_tensor *pred_x = gc_input(p, "pred_x", 3, (int64_t[]){3, 6, 2}, 1.0f);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){3, 6, 2}, 1.0f);
    structure_case s = random_case(p, AST_STRUCTURE_NCA);
    ast_ctx *c = ast_ctx_new(0);
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    ast_model_out out = {pred_x, pred_p};
    ast_loss_parts none = ast_diffusion_loss(c, &lc, &out, x, s.target, s.mask);
    cr_assert_null(none.structure, "loss.structure: none by default");
    lc.structure = AST_STRUCTURE_BOTH;
    lc.structure_k = 2;
    lc.lambda_structure = 0.25f;
    ast_loss_parts both = ast_diffusion_loss(c, &lc, &out, x, s.target, s.mask);
    double want = ast_structure_loss(c, AST_STRUCTURE_NCA, pred_p, s.target, s.mask, 2, 1.0)->data[0] +
                  ast_structure_loss(c, AST_STRUCTURE_EDGE_LOG_RATIO, pred_p, s.target, s.mask, 2, 1.0)->data[0];
    cr_assert_float_eq(both.structure->data[0], want, EXACT_TOL * want);
    double total = none.total->data[0] + 0.25 * want;
    cr_assert_float_eq(both.total->data[0], total, EXACT_TOL * total);
    ast_ctx_free(c);
    ast_params_free(p);
}

static ast_loss_config loss_of(const char *yaml)
{
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string(yaml, "t.yaml", &e);
    cr_assert(cfg, "%s", e.msg);
    ast_train_config tc;
    cr_assert_eq(ast_train_config_from_cfg(cfg, &tc, &e), 0, "%s", e.msg);
    ast_cfg_free(cfg);
    return tc.loss;
}

Test(structure_loss, config_keys)
{
    ast_loss_config lc = loss_of("seed: {value: 1}\n");
    cr_assert_eq(lc.structure, AST_STRUCTURE_NONE);
    cr_assert_eq(lc.structure_k, 10);
    lc = loss_of("loss: {structure: both, lambda_structure: 0.5, structure_k: 7, nca_temperature: 2}\n");
    cr_assert_eq(lc.structure, AST_STRUCTURE_BOTH);
    cr_assert_eq(lc.lambda_structure, 0.5f);
    cr_assert_eq(lc.structure_k, 7);
    cr_assert_eq(lc.nca_temperature, 2.0f);
    cr_assert_eq(loss_of("loss: {structure: edge_log_ratio}\n").structure, AST_STRUCTURE_EDGE_LOG_RATIO);
    cr_assert_eq(loss_of("loss: {structure: nca}\n").structure, AST_STRUCTURE_NCA);
    ast_error e = {""};
    cr_assert_null(ast_cfg_load_string("loss: {structure: knn}\n", "t.yaml", &e));
    cr_assert_str_eq(e.msg, "t.yaml:1:19: loss.structure: expected one of none, nca, edge_log_ratio, both, got 'knn'; "
                            "use one of the listed values");
}
