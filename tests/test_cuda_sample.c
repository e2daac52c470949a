/* The sampler on the GPU (core/eval/sample_device.c): the reverse diffusion
 * replayed as a CUDA graph gives the samples of the same steps op by op,
 * bit for bit, for the dense configs in each mode, and with each x0
 * prediction aligned onto the state (position_loss: aligned, the op
 * kabsch_align on the device); a config whose step may read device data on
 * the host (MoE routing) gives the same numbers either way; and the GPU's
 * samples against the CPU's from the same weights and noise.
 * Skipped, saying why, without CUDA in the build or without a GPU (cf_gpu). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fixture.h"
#include "eval/sample.h"
#include "model_fixture.h"

/* 3 sets of 40 cells, the last with 6 padded; 100 diffusion steps walked
 * with delta 100 / 9 = 11 (99, 88, ..., 0: 10 network evaluations), all
 * but the first two replayed. */
enum { B = 3, N = 40, G = 24, PAD = 6, T = 100, EVALS = 9 };
#define SEED 11

static const char *const configs[] = {"baseline", "gated", "moe", "gated_moe", "prior"};

/* The ablation configs at a small size, as tests/test_cuda_model.c builds them. */
static ast_model *model_on(int which, const ast_backend *b)
{
    ast_model_config cfg;
    ast_model_config_base(&cfg, G);
    if (which == 1 || which == 3) mf_gated(&cfg, "headwise");
    if (which == 2 || which == 3) mf_moe(&cfg, "4", "2", "split");
    if (which == 4) { /* the Isomap prior as input channels, and the geodesic attention */
        cfg.prior = (ast_prior_config){AST_PRIOR_ISOMAP, 2, 5, 0};
        cfg.prior_inputs = 1, cfg.prior_residual = 0;
        cfg.attention = "geodesic";
    }
    cfg.device = b->name;
    ast_model *m = mf_model(&cfg, SEED);
    ast_params *p = ast_model_params(m);
    if (ast_params_backend(p) != b) ast_params_to_backend(p, b);
    return m;
}

typedef struct sampled {
    float expr[B * N * G], pos[B * N * 3];
    int replayed;
} sampled;

/* A sample of config `which` on backend b: the mode's generated
 * modalities from the other, given (malloc'd); with `align` each x0
 * prediction of positions rotated onto the state (position_loss: aligned). */
static sampled *sample_on(int which, const ast_backend *b, ast_train_mode mode, ast_sample_return ret, int op_by_op,
                          int align)
{
    static float expr[B * N * G], pos[B * N * 3], mask[B * N];
    cf_normal(1, expr, B * N * G, 1.0f);
    cf_normal(2, pos, B * N * 3, 1.0f);
    for (int i = 0; i < B * N; i++) mask[i] = i / N == B - 1 && i % N >= N - PAD ? 0.0f : 1.0f;
    ast_model *m = model_on(which, b);
    ast_schedule s;
    ast_error e = {""};
    cr_assert(ast_schedule_init(&s, T, 1.0, 1.0, &e) == 0, "%s", e.msg);
    ast_sampler_config sc = {.mode = mode, .num_steps = EVALS, .ret = ret, .seed = 5, .pos_param = AST_POS_X0,
                             .align = align, .op_by_op = op_by_op};
    sampled *r = ast_xcalloc(1, sizeof *r);
    r->replayed = ast_sample(m, &s, &sc, B, N, expr, pos, mask, r->expr, r->pos);
    ast_schedule_free(&s);
    ast_model_free(m);
    return r;
}

static const struct {
    ast_train_mode mode;
    ast_sample_return ret;
} cases[] = {{AST_MODE_EXPR_TO_POS, AST_RETURN_X0}, {AST_MODE_JOINT, AST_RETURN_Z0}, {AST_MODE_POS_TO_EXPR, AST_RETURN_X0}};

/* Graph and op by op on the GPU: the same kernels on the same numbers.
 * expect_replayed < 0: whichever the step's traffic decides. */
static void check_graph(int which, int expect_replayed, int align)
{
    const ast_backend *gpu = cf_gpu();
    for (int k = 0; k < 3; k++) {
        sampled *g = sample_on(which, gpu, cases[k].mode, cases[k].ret, 0, align);
        sampled *o = sample_on(which, gpu, cases[k].mode, cases[k].ret, 1, align);
        const char *mode = ast_mode_name(cases[k].mode);
        cr_assert(expect_replayed < 0 || g->replayed == expect_replayed, "%s, %s: %d evaluations replayed, expected %d",
                  configs[which], mode, g->replayed, expect_replayed);
        cr_assert_eq(o->replayed, 0, "%s, %s: op_by_op still replayed %d", configs[which], mode, o->replayed);
        cf_assert_close("positions, graph against op by op", g->pos, o->pos, B * N * 3, 0);
        cf_assert_close("expression, graph against op by op", g->expr, o->expr, B * N * G, 0);
        cr_log_info("%s, %s: %d of %d evaluations replayed, the same bits as op by op", configs[which], mode,
                    g->replayed, ast_sample_grid(T, EVALS, NULL));
        free(g), free(o);
    }
}

static int replays(void) { return ast_sample_grid(T, EVALS, NULL) - 2; }

Test(cuda_sample, baseline_replays_the_reverse_step_bit_for_bit) { check_graph(0, replays(), 0); }
Test(cuda_sample, gated_replays_the_reverse_step_bit_for_bit) { check_graph(1, replays(), 0); }
/* The alignment is an op on the device (kabsch_align): an aligned step
 * waits for nothing and is replayed like any other, with the same bits
 * (pos_to_expr generates no positions and aligns nothing). */
Test(cuda_sample, aligned_sampling_replays_the_reverse_step_bit_for_bit) { check_graph(0, replays(), 1); }
Test(cuda_sample, gated_aligned_sampling_replays_the_reverse_step_bit_for_bit) { check_graph(1, replays(), 1); }
/* MoE routed on the host keeps the steps op by op (the second step's
 * waits); routed on the device it is replayed: either way the same numbers. */
Test(cuda_sample, moe_samples_the_same_numbers_either_way) { check_graph(2, -1, 0); }

/* The prior and the geodesic attention's distances of the given
 * expression are computed once on the host before the reverse diffusion
 * and uploaded once: the expr_to_pos step reads nothing back and is
 * replayed, with the numbers op by op and (the tolerance of the test
 * below) the CPU's. In joint and pos_to_expr the expression is generated,
 * so each evaluation computes them from its state: op by op, the same
 * numbers either way. */
Test(cuda_sample, prior_and_geodesics_replay_the_reverse_step)
{
    const ast_backend *gpu = cf_gpu();
    setenv("ALPHAST_TRACE_TRAFFIC", "1", 1); /* where the step waits, if it does: on standard error */
    sampled *g = sample_on(4, gpu, AST_MODE_EXPR_TO_POS, AST_RETURN_X0, 0, 0);
    unsetenv("ALPHAST_TRACE_TRAFFIC");
    sampled *c = sample_on(4, ast_backend_cpu(), AST_MODE_EXPR_TO_POS, AST_RETURN_X0, 0, 0);
    int64_t at;
    double err = cf_rel_err(g->pos, c->pos, B * N * 3, &at);
    cr_log_info("prior, expr_to_pos: %d evaluations replayed; GPU against CPU %.3g (at %lld)", g->replayed, err,
                (long long)at);
    cr_assert_eq(g->replayed, replays(), "prior, expr_to_pos: %d evaluations replayed, expected %d (see the traffic "
                 "traced above)", g->replayed, replays());
    cf_assert_close("positions, GPU against CPU", g->pos, c->pos, B * N * 3, 1e-4);
    free(g), free(c);
    check_graph(4, -1, 0);
}

/* The GPU against the CPU, the same weights and the same noise (drawn on
 * the host in the same order). Each evaluation's forward differs by float32
 * rounding of other summation orders (test_cuda_model bounds a forward
 * within ~1e-5 normwise), and the re-centring adds in float32 where the
 * CPU adds in float64 (~1e-7 relative); over 9 steps of a contraction
 * (cz, cx < 1, the noise the same) these add up, and the network's
 * sensitivity to its input (Lipschitz ~ a few at init) carries them on:
 * 1e-4 of the largest value is 10 times 1e-5 per forward. On an H200 the
 * samples differed by at most 1.3e-6 (logged below). Aligned, the rotation
 * moves by a difference over the gap of the 3x3 covariance's singular
 * values, which could be a few times larger for these unstructured
 * initial predictions; on an H200 the aligned samples differed by at most
 * 2.8e-6 (expr_to_pos), so the same 1e-4 holds them with a margin of 35.
 * The rotation itself (Jacobi on the GPU, LAPACK on the CPU, both within
 * ~4e-15 of the exact R: test_cuda_ops) adds nothing that shows at
 * float32. */
Test(cuda_sample, gpu_samples_match_the_cpu)
{
    const ast_backend *gpu = cf_gpu();
    for (int which = 0; which < 3; which++)
        for (int k = 0; k < 3; k++) {
            int align = which == 2; /* baseline and gated, then baseline aligned */
            sampled *g = sample_on(which % 2, gpu, cases[k].mode, cases[k].ret, 0, align);
            sampled *c = sample_on(which % 2, ast_backend_cpu(), cases[k].mode, cases[k].ret, 0, align);
            int64_t at_p, at_x;
            double ep = cf_rel_err(g->pos, c->pos, B * N * 3, &at_p), ex = cf_rel_err(g->expr, c->expr, B * N * G, &at_x);
            cr_log_info("%s%s, %s: GPU against CPU, positions %.3g (at %lld), expression %.3g (at %lld)",
                        configs[which % 2], align ? " aligned" : "", ast_mode_name(cases[k].mode), ep, (long long)at_p,
                        ex, (long long)at_x);
            cf_assert_close("positions, GPU against CPU", g->pos, c->pos, B * N * 3, 1e-4);
            cf_assert_close("expression, GPU against CPU", g->expr, c->expr, B * N * G, 1e-4);
            free(g), free(c);
        }
}
