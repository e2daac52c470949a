/* The noise model against the reference values of docs/model.md §3.1 and the
 * formulas of §3.3-3.5. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "model/diffusion.h"

/* The spec prints 6-7 significant digits; a float32 cumulative sum of up to
 * 1000 logs adds ~1e-6 relative. 1e-5 covers both; the tiny tail values
 * are printed with 4-5 digits, so they get 1e-4. */
#define REL 1e-5
#define REL_TAIL 1e-4

static void expect_rel(float got, double want, double rel, const char *what)
{
    cr_expect(fabs(got - want) <= rel * fabs(want), "%s: got %.9g, want %.9g", what, got, want);
}

Test(diffusion, cosine_schedule_reference_values_T1000)
{
    ast_schedule s;
    ast_error e;
    cr_assert(ast_schedule_init(&s, 1000, 1.0, 1.0, &e) == 0);
    for (int m = 0; m < 2; m++) {
        expect_rel(s.alpha_bar[m][0], 0.9999588, REL, "abar0");
        expect_rel(s.sigma_bar[m][0], 0.0090825, REL * 10, "sbar0"); /* sqrt of a difference near 1: 1e-4 */
        expect_rel(s.alpha_bar[m][1], 0.9999127, REL, "abar1");
        expect_rel(s.alpha_bar[m][250], 0.846170, REL, "abar250");
        expect_rel(s.sigma_bar[m][250], 0.532913, REL, "sbar250");
        expect_rel(s.alpha_bar[m][500], 0.493065, REL, "abar500");
        expect_rel(s.sigma_bar[m][500], 0.869993, REL, "sbar500");
        expect_rel(s.alpha_bar[m][750], 0.143999, REL, "abar750");
        expect_rel(s.alpha_bar[m][999], 2.4239e-6, REL_TAIL, "abar999");
        expect_rel(s.alpha_bar[m][1000], 2.424e-10, 1e-3, "abar1000");
    }
    ast_schedule_free(&s);
}

Test(diffusion, cosine_schedule_reference_values_T100_and_nu2)
{
    ast_schedule s;
    ast_error e;
    cr_assert(ast_schedule_init(&s, 100, 1.0, 2.0, &e) == 0);
    expect_rel(s.alpha_bar[AST_MOD_EXPR][0], 0.9993774, REL, "abar0");
    expect_rel(s.sigma_bar[AST_MOD_EXPR][0], 0.0352828, REL * 10, "sbar0");
    expect_rel(s.alpha_bar[AST_MOD_EXPR][50], 0.486130, REL, "abar50");
    expect_rel(s.alpha_bar[AST_MOD_EXPR][99], 2.3807e-4, REL_TAIL, "abar99");
    expect_rel(s.alpha_bar[AST_MOD_EXPR][100], 2.381e-8, 1e-3, "abar100");
    ast_schedule_free(&s);
    cr_assert(ast_schedule_init(&s, 1000, 1.0, 2.0, &e) == 0);
    expect_rel(s.alpha_bar[AST_MOD_POS][500], 0.846451, REL, "nu=2 abar500");
    expect_rel(s.alpha_bar[AST_MOD_EXPR][500], 0.493065, REL, "nu=1 column untouched");
    ast_schedule_free(&s);
}

Test(diffusion, rejects_bad_schedules)
{
    ast_schedule s;
    ast_error e;
    cr_assert(ast_schedule_init(&s, 0, 1.0, 1.0, &e) < 0);
    cr_assert(strstr(e.msg, "diffusion_steps") != NULL, "%s", e.msg);
    cr_assert(ast_schedule_init(&s, 10, -1.0, 1.0, &e) < 0);
    cr_assert(strstr(e.msg, "nu_") != NULL, "%s", e.msg);
}

enum { B = 2, N = 5, G = 3 };

static void fill_batch(float *expr, float *pos, float *mask)
{
    for (int i = 0; i < B * N * G; i++) expr[i] = 0.1f * (float)(i % 7);
    for (int i = 0; i < B * N * 3; i++) pos[i] = (float)(i % 5) - 2.0f;
    for (int i = 0; i < B * N; i++) mask[i] = (i == B * N - 1) ? 0.0f : 1.0f; /* last cell padded */
    for (int g = 0; g < G; g++) expr[(B * N - 1) * G + g] = 0.0f;
    for (int d = 0; d < 3; d++) pos[(B * N - 1) * 3 + d] = 0.0f;
}

Test(diffusion, expr_to_pos_noises_positions_only_with_centred_noise)
{
    ast_schedule s;
    ast_error e;
    cr_assert(ast_schedule_init(&s, 100, 1.0, 1.0, &e) == 0);
    float expr[B * N * G], pos[B * N * 3], mask[B * N], zx[B * N * G], zp[B * N * 3], t[B];
    int ti[B] = {30, 80};
    fill_batch(expr, pos, mask);
    ast_rng rng;
    ast_rng_seed(&rng, 5);
    ast_noised out = {zx, zp, t, ti};
    ast_apply_noise(&s, AST_MODE_EXPR_TO_POS, &rng, B, N, G, expr, pos, mask, &out);
    for (int i = 0; i < B * N * G; i++) cr_assert_eq(zx[i], expr[i], "expression must stay clean");
    cr_assert_float_eq(t[1], 0.8f, 1e-7);
    for (int b = 0; b < B; b++) {
        float a = s.alpha_bar[1][ti[b]], sg = s.sigma_bar[1][ti[b]];
        for (int d = 0; d < 3; d++) {
            double mean = 0;
            for (int n = 0; n < N; n++) mean += mask[b * N + n] * (zp[(b * N + n) * 3 + d] - a * pos[(b * N + n) * 3 + d]) / sg;
            /* the recovered noise sums to 0 over valid cells up to float32 rounding of 5 O(1) terms */
            cr_assert_float_eq(mean, 0.0, 1e-5, "set %d axis %d noise not centred", b, d);
        }
    }
    for (int d = 0; d < 3; d++) cr_assert_eq(zp[(B * N - 1) * 3 + d], 0.0f, "padded cell must stay 0");
    ast_schedule_free(&s);
}

Test(diffusion, reverse_step_mean_matches_posterior_formula)
{
    ast_schedule s;
    ast_error e;
    cr_assert(ast_schedule_init(&s, 100, 1.0, 1.0, &e) == 0);
    float expr[B * N * G], pos[B * N * 3], mask[B * N], zx[B * N * G], zp[B * N * 3], t[B];
    int ti[B] = {60, 60};
    fill_batch(expr, pos, mask);
    for (int i = 0; i < B * N * G; i++) zx[i] = 0.5f - 0.01f * (float)i;
    ast_noised z = {zx, zp, t, ti};
    memcpy(zp, pos, sizeof pos);
    float before = zx[4], pred = expr[4];
    ast_reverse_step(&s, AST_MODE_POS_TO_EXPR, NULL, B, N, G, expr, pos, mask, 40, &z);
    /* Independent float64 evaluation of mu = a_ts r z + abar_s (1 - a_ts^2 r) x. */
    double lt = s.log_alpha_bar[0][60], ls = s.log_alpha_bar[0][40];
    double a_ts = exp(lt - ls), s2t = 1 - exp(2 * lt), s2s = 1 - exp(2 * ls), r = (s2s + 1e-8) / (s2t + 1e-8);
    double mu = a_ts * r * before + exp(ls) * (1 - a_ts * a_ts * r) * pred;
    cr_assert_float_eq(zx[4], mu, 1e-5, "got %g want %g", zx[4], mu); /* float32 vs float64 of O(1) terms */
    cr_assert_eq(ti[0], 40);
    cr_assert_float_eq(t[0], 0.4f, 1e-7);
    ast_schedule_free(&s);
}

Test(diffusion, noise_has_the_schedule_std)
{
    enum { BB = 1, NN = 20000 };
    ast_schedule s;
    ast_error e;
    cr_assert(ast_schedule_init(&s, 1000, 1.0, 1.0, &e) == 0);
    float *x = calloc(NN, sizeof(float)), *z = malloc(NN * sizeof(float)), *p = calloc(NN * 3, sizeof(float));
    float *zp = malloc(NN * 3 * sizeof(float)), t[1];
    int ti[1] = {500};
    ast_rng rng;
    ast_rng_seed(&rng, 11);
    ast_noised out = {z, zp, t, ti};
    ast_apply_noise(&s, AST_MODE_JOINT, &rng, BB, NN, 1, x, p, NULL, &out);
    double var = 0;
    for (int i = 0; i < NN; i++) var += (double)z[i] * z[i];
    var /= NN;
    double want = (double)s.sigma_bar[0][500] * s.sigma_bar[0][500];
    /* sample variance of 20000 normals: relative sd sqrt(2/20000) = 1%; 5 sd */
    cr_assert(fabs(var / want - 1) < 0.05, "variance %g vs %g", var, want);
    free(x), free(z), free(p), free(zp);
    ast_schedule_free(&s);
}
