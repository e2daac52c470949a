/* The sampler: the reference's step grid, one step and several reproduced
 * by hand from the noise model and the network, the posterior's
 * coefficients, the device path (sample_device.c) on a CPU backend that
 * calls its memory a device's, determinism, the conditioning modality
 * passed through, padded cells left empty, and 2-D output's principal axes. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "eval/sample.h"

Test(sample, grid_follows_the_reference)
{
    static int s[1000];
    cr_assert_eq(ast_sample_grid(1000, 100, s), 100); /* delta 10: 990, 980, ..., 0 */
    cr_assert_eq(s[0], 990);
    cr_assert_eq(s[1], 980);
    cr_assert_eq(s[99], 0);
    cr_assert_eq(ast_sample_grid(1000, 300, s), 334); /* delta 3: 999, 996, ..., 0 */
    cr_assert_eq(s[0], 999);
    cr_assert_eq(s[333], 0);
    cr_assert_eq(ast_sample_grid(100, 0, s), 100, "no num_steps: every step");
    cr_assert_eq(s[0], 99);
    cr_assert_eq(ast_sample_grid(100, 500, s), 100, "more steps than T: delta 1");
    cr_assert_eq(ast_sample_grid(100, 1, s), 1, "one jump from T to 0");
    cr_assert_eq(s[0], 0);
}

enum { B = 2, N = 6, G = 5, T = 50 };

typedef struct fixture {
    ast_model *m;
    ast_schedule s;
    float expr[B * N * G], pos[B * N * 3], mask[B * N];
} fixture;

/* The tests' small model on backend `device` (NULL: the CPU); with
 * `prior`, the Isomap prior as input channels and the geodesic attention. */
static ast_model *small_model(const char *device, int prior)
{
    ast_error e = {""};
    ast_model_config mc;
    ast_model_config_base(&mc, G);
    mc.d_model = 16, mc.expr_hidden = 8, mc.num_heads = 2, mc.d_ff = 16, mc.num_layers = 1;
    mc.time_hidden = mc.d_time = mc.pos_hidden = 4, mc.d_ff_time = 8, mc.out_expr_hidden = mc.out_pos_hidden = 8;
    mc.device = device;
    if (prior) {
        mc.prior = (ast_prior_config){AST_PRIOR_ISOMAP, 2, 2, 0};
        mc.prior_inputs = 1, mc.prior_residual = 0;
        mc.attention = "geodesic";
    }
    ast_model *m = ast_model_new(&mc, 3, &e);
    cr_assert(m, "%s", e.msg);
    cr_assert(ast_model_place(m, &e) == 0, "%s", e.msg);
    return m;
}

static void fixture_open(fixture *f)
{
    ast_error e = {""};
    f->m = small_model(NULL, 0);
    cr_assert(ast_schedule_init(&f->s, T, 1.0, 1.0, &e) == 0, "%s", e.msg);
    ast_rng r;
    ast_rng_seed(&r, 11);
    for (int i = 0; i < B * N * G; i++) f->expr[i] = ast_rng_gauss(&r);
    for (int i = 0; i < B * N * 3; i++) f->pos[i] = ast_rng_gauss(&r);
    for (int i = 0; i < B * N; i++) f->mask[i] = i == N - 1 || i == N - 2 ? 0.0f : 1.0f; /* set 0 has 4 cells */
}

static void fixture_close(fixture *f)
{
    ast_schedule_free(&f->s);
    ast_model_free(f->m);
}

/* Independently: the limit sample, one eval forward pass at t = 1 and
 * the reverse step T -> 0 drawn from the same seeded stream. */
static void one_step_by_hand(fixture *f, ast_train_mode mode, float *x0_expr, float *x0_pos, float *z_expr, float *z_pos)
{
    float t[B];
    int t_int[B];
    ast_noised z = {z_expr, z_pos, t, t_int};
    ast_rng rng;
    ast_rng_seed(&rng, 5);
    ast_limit_sample(&f->s, mode, &rng, B, N, G, f->expr, f->pos, f->mask, &z);
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_training(c, 0);
    ast_ctx_set_grad(c, 0);
    ast_model_out out = ast_model_forward(f->m, c, ast_tensor_from(c, 3, (int64_t[]){B, N, G}, z_expr),
                                          ast_tensor_from(c, 2, (int64_t[]){B, 1}, t),
                                          ast_tensor_from(c, 3, (int64_t[]){B, N, 3}, z_pos),
                                          ast_tensor_from(c, 2, (int64_t[]){B, N}, f->mask), NULL, NULL);
    memcpy(x0_expr, out.expression->data, sizeof(float) * B * N * G);
    memcpy(x0_pos, out.positions->data, sizeof(float) * B * N * 3);
    ast_reverse_step(&f->s, mode, &rng, B, N, G, x0_expr, x0_pos, f->mask, 0, &z);
    ast_ctx_free(c);
}

static void assert_same(const float *a, const float *b, int n, const char *what)
{
    for (int i = 0; i < n; i++) cr_assert_eq(a[i], b[i], "%s[%d]: %g vs %g", what, i, a[i], b[i]);
}

/* max |a - b| <= tol max |b|. */
static void assert_near(const float *a, const float *b, int n, double tol, const char *what)
{
    double worst = 0.0, top = 0.0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i])), top = fmax(top, fabs((double)b[i]));
    cr_assert(worst <= tol * top, "%s: differs by %g of the largest value %g", what, worst / top, top);
}

Test(sample, one_step_returns_the_prediction_or_the_state)
{
    fixture f;
    fixture_open(&f);
    float hx[B * N * G], hp[B * N * 3], zx[B * N * G], zp[B * N * 3], ox[B * N * G], op[B * N * 3];
    one_step_by_hand(&f, AST_MODE_JOINT, hx, hp, zx, zp);
    ast_sampler_config sc = {AST_MODE_JOINT, 1, AST_RETURN_X0, 5};
    ast_sample(f.m, &f.s, &sc, B, N, f.expr, f.pos, f.mask, ox, op);
    /* Same operations in the same order on the same numbers: bitwise equal. */
    assert_same(ox, hx, B * N * G, "x0 expression");
    assert_same(op, hp, B * N * 3, "x0 positions");
    sc.ret = AST_RETURN_Z0;
    ast_sample(f.m, &f.s, &sc, B, N, f.expr, f.pos, f.mask, ox, op);
    assert_same(ox, zx, B * N * G, "z0 expression");
    assert_same(op, zp, B * N * 3, "z0 positions");
    fixture_close(&f);
}

/* The sampler's loop rebuilt from the public pieces: the limit sample,
 * then per step of the grid one eval forward over every set and the
 * reverse step on the host, all drawing from one stream seeded `seed`. */
static void steps_by_hand(fixture *f, ast_train_mode mode, ast_sample_return ret, int num_steps, uint64_t seed,
                          float *out_expr, float *out_pos)
{
    float t[B], x0_expr[B * N * G], x0_pos[B * N * 3];
    int t_int[B], grid[T];
    ast_noised z = {out_expr, out_pos, t, t_int};
    ast_rng rng;
    ast_rng_seed(&rng, seed);
    ast_limit_sample(&f->s, mode, &rng, B, N, G, f->expr, f->pos, f->mask, &z);
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_training(c, 0);
    ast_ctx_set_grad(c, 0);
    int n = ast_sample_grid(T, num_steps, grid);
    for (int i = 0; i < n; i++) {
        ast_ctx_reset(c);
        ast_model_out out = ast_model_forward(f->m, c, ast_tensor_from(c, 3, (int64_t[]){B, N, G}, out_expr),
                                              ast_tensor_from(c, 2, (int64_t[]){B, 1}, t),
                                              ast_tensor_from(c, 3, (int64_t[]){B, N, 3}, out_pos),
                                              ast_tensor_from(c, 2, (int64_t[]){B, N}, f->mask), NULL, NULL);
        memcpy(x0_expr, out.expression->data, sizeof x0_expr);
        memcpy(x0_pos, out.positions->data, sizeof x0_pos);
        ast_reverse_step(&f->s, mode, &rng, B, N, G, x0_expr, x0_pos, f->mask, grid[i], &z);
    }
    if (ret == AST_RETURN_X0) {
        if (ast_mode_noises(mode, AST_MOD_EXPR)) memcpy(out_expr, x0_expr, sizeof x0_expr);
        if (ast_mode_noises(mode, AST_MOD_POS)) memcpy(out_pos, x0_pos, sizeof x0_pos);
    }
    ast_ctx_free(c);
}

/* The CPU's numbers over several steps, whatever a device does
 * (sample_device.c): the same operations in the same order, bit for bit. */
Test(sample, several_steps_are_the_host_loop_bit_for_bit)
{
    fixture f;
    fixture_open(&f);
    static const ast_train_mode modes[] = {AST_MODE_JOINT, AST_MODE_EXPR_TO_POS, AST_MODE_POS_TO_EXPR};
    float hx[B * N * G], hp[B * N * 3], ox[B * N * G], op[B * N * 3];
    for (int k = 0; k < 3; k++)
        for (int r = 0; r < 2; r++) {
            ast_sample_return ret = r ? AST_RETURN_Z0 : AST_RETURN_X0;
            steps_by_hand(&f, modes[k], ret, 4, 17, hx, hp);
            ast_sampler_config sc = {.mode = modes[k], .num_steps = 4, .ret = ret, .seed = 17};
            cr_assert_eq(ast_sample(f.m, &f.s, &sc, B, N, f.expr, f.pos, f.mask, ox, op), 0, "the CPU replays nothing");
            assert_same(ox, hx, B * N * G, ast_mode_name(modes[k]));
            assert_same(op, hp, B * N * 3, ast_mode_name(modes[k]));
        }
    fixture_close(&f);
}

/* The step's coefficients against the posterior of docs/model.md §3.4 in
 * float64: z_s = a_ts sig_s^2 / sig_t^2 z_t + a_s sig_ts^2 / sig_t^2 x0
 * + sqrt(sig_ts^2 sig_s^2 / sig_t^2) eps, sig_ts^2 = sig_t^2 - a_ts^2 sig_s^2.
 * The float32 form goes through logs and expm1 of values O(1): a few ulp
 * each, far under 1e-5 relative, away from t = 0 where the 1e-8 guard of
 * the ratio would show. */
Test(sample, reverse_coefficients_are_the_posterior)
{
    fixture f;
    fixture_open(&f);
    const int pairs[][2] = {{T, 45}, {30, 29}, {12, 2}, {T, 1}};
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < 4; i++) {
            int t = pairs[i][0], s = pairs[i][1];
            double a_t = f.s.alpha_bar[m][t], a_s = f.s.alpha_bar[m][s], a_ts = a_t / a_s;
            double sig2_t = 1.0 - a_t * a_t, sig2_s = 1.0 - a_s * a_s, sig2_ts = sig2_t - a_ts * a_ts * sig2_s;
            ast_reverse_coeffs c;
            ast_reverse_coeffs_at(&f.s, m, t, s, &c);
            cr_assert_float_eq(c.cz, a_ts * sig2_s / sig2_t, 1e-5, "cz, modality %d, %d -> %d", m, t, s);
            cr_assert_float_eq(c.cx, a_s * sig2_ts / sig2_t, 1e-5, "cx, modality %d, %d -> %d", m, t, s);
            cr_assert_float_eq(c.std, sqrt(sig2_ts * sig2_s / sig2_t), 1e-5, "std, modality %d, %d -> %d", m, t, s);
        }
    fixture_close(&f);
}

/* A backend that says its memory is a device's and runs the CPU's kernels
 * on host memory: the sampler takes its device path (sample_device.c) on
 * it, which a machine without a GPU can then check. */
static const ast_backend *staged_backend(void)
{
    static ast_backend b;
    if (!b.name) {
        b = *ast_backend_cpu();
        b.name = "staged";
        b.memory = AST_MEM_DEVICE;
        cr_assert_eq(ast_backend_register(&b), 0);
    }
    return &b;
}

/* The device path against the host loop, the same weights and noise, in
 * each mode, aligned or not. The network runs the same kernels; what
 * differs is the update's arithmetic: the posterior step as separate ops
 * (the host loop's one expression may be contracted to FMAs: 1 ulp) and
 * the re-centring's sum in float32 where ast_center_sets adds in float64
 * (N u of the positions' size, ~4e-7 for N = 6). Four steps carry these
 * through a network whose sensitivity at initialisation is O(1): 1e-4 of
 * the largest value is 100 times the few 1e-7 a step adds. */
Test(sample, the_device_path_is_the_host_loop_to_rounding)
{
    fixture f;
    fixture_open(&f);
    ast_model *dm = small_model(staged_backend()->name, 0);
    static const ast_train_mode modes[] = {AST_MODE_JOINT, AST_MODE_EXPR_TO_POS, AST_MODE_POS_TO_EXPR};
    float hx[B * N * G], hp[B * N * 3], dx[B * N * G], dp[B * N * 3];
    for (int k = 0; k < 3; k++)
        for (int a = 0; a < 2; a++) {
            ast_sampler_config sc = {.mode = modes[k], .num_steps = 4, .ret = a ? AST_RETURN_X0 : AST_RETURN_Z0,
                                     .seed = 23, .align = a};
            ast_sample(f.m, &f.s, &sc, B, N, f.expr, f.pos, f.mask, hx, hp);
            cr_assert_eq(ast_sample(dm, &f.s, &sc, B, N, f.expr, f.pos, f.mask, dx, dp), 0, "nothing to replay here");
            assert_near(dx, hx, B * N * G, 1e-4, ast_mode_name(modes[k]));
            assert_near(dp, hp, B * N * 3, 1e-4, ast_mode_name(modes[k]));
        }
    ast_model_free(dm);
    fixture_close(&f);
}

/* With the prior and the geodesic attention the sampler computes each
 * set's constants once from its given expression (expr_to_pos), or lets
 * the network compute them from the state at every evaluation (where the
 * expression is generated): the numbers of the network computing them
 * itself (steps_by_hand), bit for bit; the device path, which uploads
 * them once, the host loop's to the rounding argued above. */
Test(sample, prior_and_geodesics_sample_as_the_network_computes_them)
{
    fixture f;
    fixture_open(&f);
    ast_model_free(f.m);
    f.m = small_model(NULL, 1);
    ast_model *dm = small_model(staged_backend()->name, 1);
    static const ast_train_mode modes[] = {AST_MODE_EXPR_TO_POS, AST_MODE_JOINT, AST_MODE_POS_TO_EXPR};
    float hx[B * N * G], hp[B * N * 3], ox[B * N * G], op[B * N * 3], dx[B * N * G], dp[B * N * 3];
    for (int k = 0; k < 3; k++) {
        steps_by_hand(&f, modes[k], AST_RETURN_X0, 4, 19, hx, hp);
        ast_sampler_config sc = {.mode = modes[k], .num_steps = 4, .ret = AST_RETURN_X0, .seed = 19};
        ast_sample(f.m, &f.s, &sc, B, N, f.expr, f.pos, f.mask, ox, op);
        ast_sample(dm, &f.s, &sc, B, N, f.expr, f.pos, f.mask, dx, dp);
        assert_same(ox, hx, B * N * G, ast_mode_name(modes[k]));
        assert_same(op, hp, B * N * 3, ast_mode_name(modes[k]));
        assert_near(dx, hx, B * N * G, 1e-4, ast_mode_name(modes[k]));
        assert_near(dp, hp, B * N * 3, 1e-4, ast_mode_name(modes[k]));
    }
    ast_model_free(dm);
    fixture_close(&f);
}

Test(sample, conditioning_is_kept_and_padding_stays_empty)
{
    fixture f;
    fixture_open(&f);
    float ox[B * N * G], op[B * N * 3];
    ast_sampler_config sc = {AST_MODE_EXPR_TO_POS, 5, AST_RETURN_X0, 9};
    ast_sample(f.m, &f.s, &sc, B, N, f.expr, NULL, f.mask, ox, op);
    assert_same(ox, f.expr, B * N * G, "given expression");
    for (int b = 0; b < B; b++)
        for (int d = 0; d < 3; d++) {
            double mean = 0.0;
            for (int n = 0; n < N; n++) mean += op[(b * N + n) * 3 + d] * f.mask[b * N + n];
            cr_assert_float_eq(mean, 0.0, 1e-5, "positions are centred over valid cells (float sums of O(1))");
        }
    for (int d = 0; d < 3; d++) cr_assert_eq(op[(N - 1) * 3 + d], 0.0f, "a padded cell has no position");
    sc.mode = AST_MODE_POS_TO_EXPR;
    ast_sample(f.m, &f.s, &sc, B, N, NULL, f.pos, f.mask, ox, op);
    assert_same(op, f.pos, B * N * 3, "given positions");
    for (int g = 0; g < G; g++) cr_assert_eq(ox[(N - 1) * G + g], 0.0f, "a padded cell has no expression");
    fixture_close(&f);
}

Test(sample, deterministic_given_the_seed)
{
    fixture f;
    fixture_open(&f);
    float a[B * N * 3], b[B * N * 3], x[B * N * G];
    ast_sampler_config sc = {AST_MODE_EXPR_TO_POS, 10, AST_RETURN_Z0, 21};
    ast_sample(f.m, &f.s, &sc, B, N, f.expr, NULL, f.mask, x, a);
    ast_sample(f.m, &f.s, &sc, B, N, f.expr, NULL, f.mask, x, b);
    assert_same(a, b, B * N * 3, "same seed");
    sc.seed = 22;
    ast_sample(f.m, &f.s, &sc, B, N, f.expr, NULL, f.mask, x, b);
    int differ = 0;
    for (int i = 0; i < B * N * 3; i++) differ |= a[i] != b[i];
    cr_assert(differ, "another seed draws another sample");
    fixture_close(&f);
}

/* Without out_expr the given expression is the state itself: the same
 * positions, bit for bit, as with a copy of it. */
Test(sample, given_expression_needs_no_output_buffer)
{
    fixture f;
    fixture_open(&f);
    float a[B * N * 3], b[B * N * 3], x[B * N * G];
    for (int r = 0; r < 2; r++) {
        ast_sampler_config sc = {AST_MODE_EXPR_TO_POS, 5, r ? AST_RETURN_Z0 : AST_RETURN_X0, 13};
        ast_sample(f.m, &f.s, &sc, B, N, f.expr, NULL, f.mask, x, a);
        ast_sample(f.m, &f.s, &sc, B, N, f.expr, NULL, f.mask, NULL, b);
        assert_same(a, b, B * N * 3, "positions");
    }
    fixture_close(&f);
}

Test(sample, return_names_round_trip)
{
    ast_sample_return r;
    cr_assert_eq(ast_sample_return_parse("z0", &r), 0);
    cr_assert_eq(r, AST_RETURN_Z0);
    cr_assert_str_eq(ast_sample_return_name(AST_RETURN_X0), "x0");
    cr_assert_eq(ast_sample_return_parse("x1", &r), -1);
}

/* 2-D data: a planar set the model placed tilted comes back flat in x-y
 * with its distances kept; a padded cell does not pull the plane. */
Test(sample, principal_axes_lay_a_tilted_plane_flat)
{
    enum { M = 7 };
    const float flat[M][2] = {{0, 0}, {3, 1}, {-2, 4}, {1, -3}, {-4, -1}, {2, 2}, {0, 0}};
    const float mask[M] = {1, 1, 1, 1, 1, 1, 0};
    /* rotated 40 degrees about x, then 25 about z, and moved off the origin */
    const double a = 40 * M_PI / 180, b = 25 * M_PI / 180;
    float pos[M * 3], before[M * 3];
    for (int i = 0; i < M; i++) {
        double x = flat[i][0], y = flat[i][1] * cos(a), z = flat[i][1] * sin(a);
        pos[i * 3] = (float)(x * cos(b) - y * sin(b) + 0.5), pos[i * 3 + 1] = (float)(x * sin(b) + y * cos(b) - 1.0);
        pos[i * 3 + 2] = (float)(z + 2.0);
    }
    pos[(M - 1) * 3 + 2] = 50.0f; /* the padded cell, far off the plane */
    memcpy(before, pos, sizeof pos);
    ast_positions_to_principal_axes(M, pos, mask);
    double mean[3] = {0};
    for (int i = 0; i < M - 1; i++)
        for (int k = 0; k < 3; k++) mean[k] += pos[i * 3 + k] / (M - 1);
    for (int i = 0; i < M - 1; i++) cr_assert_float_eq(pos[i * 3 + 2], mean[2], 1e-5, "cell %d is off the plane", i);
    for (int i = 0; i < M - 1; i++)
        for (int j = 0; j < M - 1; j++) {
            double d0 = 0.0, d1 = 0.0;
            for (int k = 0; k < 3; k++) {
                d0 += pow(before[i * 3 + k] - before[j * 3 + k], 2);
                d1 += pow(pos[i * 3 + k] - pos[j * 3 + k], 2);
            }
            cr_assert_float_eq(sqrt(d1), sqrt(d0), 1e-5, "distance %d-%d", i, j);
        }
    double var_x = 0.0, var_y = 0.0;
    for (int i = 0; i < M - 1; i++) var_x += pow(pos[i * 3] - mean[0], 2), var_y += pow(pos[i * 3 + 1] - mean[1], 2);
    cr_assert_geq(var_x, var_y, "x is the widest axis");
}
