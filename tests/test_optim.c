/* AdamW, clipping and learning-rate schedules against float64 evaluations
 * of the torch formulas. */
#include <criterion/criterion.h>
#include <math.h>

#include "train/optim.h"

static ast_tensor *make_param(ast_params *p, const char *name, int n)
{
    ast_scope *s = ast_scope_new(p, "");
    return ast_param(s, name, 1, (int64_t[]){n}, AST_INIT_ZERO, 0.0f);
}

Test(optim, adamw_amsgrad_matches_float64_reference)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *w = make_param(p, "w", 3);
    const float init[3] = {0.5f, -1.0f, 2.0f};
    memcpy(w->data, init, sizeof init);
    ast_adamw_config cfg = {.lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.1f, .amsgrad = 1};
    ast_adamw *o = ast_adamw_new(p, &cfg);
    /* gradients shrink in step 2 so AMSGrad's max(v) differs from v */
    const float grads[2][3] = {{1.0f, -2.0f, 0.5f}, {0.1f, -0.1f, 0.05f}};
    double th[3] = {0.5, -1.0, 2.0}, m[3] = {0}, v[3] = {0}, vmax[3] = {0};
    for (int step = 1; step <= 2; step++) {
        memcpy(w->grad, grads[step - 1], sizeof grads[0]);
        ast_adamw_step(o, cfg.lr);
        for (int j = 0; j < 3; j++) {
            double g = grads[step - 1][j];
            m[j] = 0.9 * m[j] + 0.1 * g;
            v[j] = 0.999 * v[j] + 0.001 * g * g;
            vmax[j] = fmax(vmax[j], v[j]);
            double bc1 = 1 - pow(0.9, step), bc2 = 1 - pow(0.999, step);
            th[j] = th[j] * (1 - 1e-2 * 0.1) - (1e-2 / bc1) * m[j] / (sqrt(vmax[j]) / sqrt(bc2) + 1e-8);
            /* float32 state vs float64: a few ulps of O(1) values */
            cr_assert_float_eq(w->data[j], th[j], 1e-6, "step %d param %d: %g vs %g", step, j, w->data[j], th[j]);
        }
    }
    ast_adamw_free(o);
    ast_params_free(p);
}

Test(optim, parameters_without_gradient_are_left_alone)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *a = make_param(p, "a", 2), *b = make_param(p, "b", 2);
    a->data[0] = b->data[0] = 1.0f;
    ast_adamw_config cfg = {.lr = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 0.5f};
    ast_adamw *o = ast_adamw_new(p, &cfg);
    a->grad[0] = 1.0f;
    ast_adamw_step(o, cfg.lr);
    cr_assert_neq(a->data[0], 1.0f);
    cr_assert_eq(b->data[0], 1.0f, "no gradient: no decay, no update");
    ast_adamw_free(o);
    ast_params_free(p);
}

Test(optim, clipping_scales_to_the_global_norm)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *a = make_param(p, "a", 2), *b = make_param(p, "b", 1);
    a->grad[0] = 3.0f, a->grad[1] = 0.0f, b->grad[0] = 4.0f; /* norm 5 */
    /* Criterion's float macros evaluate their arguments twice: call first. */
    double before = ast_clip_grad_norm(p, 1.0);
    cr_assert_float_eq(before, 5.0, 1e-12);
    /* float32 ulp at 0.6 is 6e-8: allow a few */
    cr_assert_float_eq(a->grad[0], 3.0 / (5.0 + 1e-6), 3e-7);
    cr_assert_float_eq(ast_grad_norm(p), 1.0, 1e-6);
    double again = ast_clip_grad_norm(p, 10.0);
    cr_assert_float_eq(again, 1.0, 1e-6);
    cr_assert_float_eq(a->grad[0], 3.0 / (5.0 + 1e-6), 3e-7, "below the limit nothing changes");
    ast_params_free(p);
}

Test(optim, cosine_schedule_and_warmup)
{
    ast_lr_schedule s = {.kind = AST_LR_COSINE, .lr = 1e-3f, .eta_min = 1e-5f, .t_max = 10};
    cr_assert_float_eq(ast_lr_at(&s, 0, 0), 1e-3f, 1e-9);
    cr_assert_float_eq(ast_lr_at(&s, 0, 5), (1e-3 + 1e-5) / 2, 1e-9);
    cr_assert_float_eq(ast_lr_at(&s, 0, 10), 1e-5f, 1e-9);
    cr_assert_float_eq(ast_lr_at(&s, 0, 20), 1e-3f, 1e-9, "periodic beyond T_max like CosineAnnealingLR");
    s.per_step = 1;
    s.warmup_steps = 4;
    cr_assert_float_eq(ast_lr_at(&s, 0, 0), 2.5e-4f, 1e-9);
    cr_assert_float_eq(ast_lr_at(&s, 4, 0), 1e-3f, 1e-9, "warm-up ends at the peak");
    cr_assert_float_eq(ast_lr_at(&s, 9, 0), (1e-3 + 1e-5) / 2, 1e-9);
    ast_lr_schedule c = {.kind = AST_LR_CONSTANT, .lr = 3e-4f};
    cr_assert_float_eq(ast_lr_at(&c, 100, 7), 3e-4f, 1e-12);
}
