/* Training in bf16 (training.precision: bf16-mixed) follows float32: the
 * same run on the bundled STARmap data, same seeds, so the same sets,
 * times and noise at every step, once in each precision.
 *
 * The bound. A step's loss is a smooth function of GEMM outputs, each
 * within ~2^-8 relative of float32's (tests/test_bf16.c), so the first
 * step's losses differ by at most about that (averaged over cells, far
 * less: 4e-5 on the bundled configs). After it the weights differ too, by
 * the learning rate times the difference of AdamW's normalised updates,
 * which stays at the 1e-3 level over a few steps at lr = 1e-3; the loss
 * moves with it by its gradient (O(1) here). Measured: at most 0.16%
 * relative over the 12 steps of this run (0.20% with AMX kernels), the
 * best validation loss 0.25%; 2% allows for other BLAS and oneDNN kernels
 * (other summation orders) and still fails a mode that diverges. The
 * losses also must not equal float32's bit for bit, or the mode did
 * nothing. Validation runs in the same precision: its best loss obeys the
 * same bound. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"
#include "train_fixture.h"

#define LOSS_REL_TOL 0.02

static const char *tiny_yaml =
    "training_mode: joint\n"
    "data: {set_size: 24, preprocessing: {position_key: spatial, cell_type_key: null},\n"
    "       loading: {rotation: true, expression_dropout: 0.1}}\n"
    "diffusion: {diffusion_steps: 100}\n"
    "training: {learning_rate: 1e-3, batch_size: 4, epochs: 4, steps_per_epoch: 3, val_sets: 4,\n"
    "           val_t_points: 2, early_stopping: false}\n"
    "mlp_in_expression_setting: {mlp_in_expression_dims: 32, mlp_out_expression_dims: 32}\n"
    "mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 8, mlp_out_diffusion_time_dims: 8}\n"
    "PositionMLP_setting: {hidden_dims: 16}\n"
    "TransformerLayer_setting: {num_layers: 2, num_heads: 2, dim_ff_expression: 64, dim_ff_diffusion_time: 16}\n"
    "mlp_out_expression_setting: {hidden_dims: 32}\n"
    "mlp_out_position_norm_setting: {hidden_dims: 16}\n"
    "attention: linear\n"
    "ffn: dense\n";

typedef struct run_losses {
    double *step; /* every step's loss */
    int64_t n;
    double best_val;
} run_losses;

static run_losses train_at(const char *precision)
{
    char set[64];
    snprintf(set, sizeof set, "training.precision=%s", precision);
    const char *const overrides[] = {set, NULL};
    train_setup f;
    train_setup_open(&f, tiny_yaml, overrides);
    ast_train_result r;
    run_losses out;
    out.step = train_setup_losses(&f, train_tmp_dir("bf16"), &out.n, &r, NULL);
    out.best_val = r.best_val;
    train_setup_close(&f);
    return out;
}

Test(train_bf16, loss_curve_follows_float32, .timeout = 120)
{
    char why[256];
    if (!ast_bf16_supported(why, sizeof why)) cr_skip_test("no bf16 mode here: %s", why);
    run_losses f32 = train_at("32-true"), b16 = train_at("bf16-mixed");
    cr_assert_eq(b16.n, f32.n);
    cr_assert_eq(f32.n, 12);
    double worst = 0.0;
    for (int64_t i = 0; i < f32.n; i++) {
        double rel = fabs(b16.step[i] - f32.step[i]) / f32.step[i];
        cr_assert_leq(rel, LOSS_REL_TOL, "step %lld: bf16 loss %.6g, float32 %.6g", (long long)i + 1, b16.step[i],
                      f32.step[i]);
        worst = fmax(worst, rel);
    }
    double val_rel = fabs(b16.best_val - f32.best_val) / f32.best_val;
    cr_log_info("largest relative step-loss difference %.3g; best validation loss %.6g (bf16) vs %.6g (%.3g)", worst,
                b16.best_val, f32.best_val, val_rel);
    cr_assert_gt(worst, 0.0, "bf16 losses are float32's bit for bit");
    cr_assert_leq(val_rel, LOSS_REL_TOL, "best validation loss: bf16 %.6g, float32 %.6g", b16.best_val, f32.best_val);
    free(f32.step), free(b16.step);
}
