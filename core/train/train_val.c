/* The validation loss, made deterministic so that epochs compare: the same
 * sets (fixed centres), a fixed grid of diffusion times and a fixed noise
 * seed every time, in eval mode; the grid ends at t = T, the pure noise
 * the sampler starts from (but under reference_parity). (The reference drew t and noise at random,
 * docs/model.md §11 item 27.) The MoE aux loss is left out, as in the reference.
 * Over several ranks each scores its share of the sets (drawn and noised
 * whole by all, as for training) and the weighted parts are summed. */
#include <math.h>
#include <stdlib.h>

#include "train/train_dist.h"
#include "train_internal.h"

int ast_trainer_val_times(const ast_train_config *tc, int *out)
{
    int n = 0;
    for (int k = 0; k < tc->val_t_points; k++) {
        int t_int = (int)lround(tc->diffusion_steps * (k + 0.5) / tc->val_t_points);
        out[n++] = t_int < 1 ? 1 : t_int;
    }
    if (tc->val_at_T) out[n++] = tc->diffusion_steps; /* the prediction sampling starts from */
    return n;
}

double ast_trainer_val_loss(ast_trainer *t)
{
    const ast_train_config *tc = &t->tc;
    int *times = ast_xmalloc((size_t)(tc->val_t_points + 1) * sizeof *times), n_times = ast_trainer_val_times(tc, times);
    ast_batch b = t->val_batch; /* every field is rewritten below: reusing it changes no number */
    ast_rng rng;
    ast_rng_seed(&rng, tc->seed ^ 0x0a1da7e5ull);
    for (int i = 0; i < tc->val_sets; i++)
        ast_make_set(&t->val_sets, t->val_centres[i], &rng, b.expr + (int64_t)i * b.N * b.G, b.pos + (int64_t)i * b.N * 3,
                     b.mask + (int64_t)i * b.N);
    ast_batch mine = train_ranks_rows(&b, t->ranks.val_lo, t->ranks.val_hi);
    double sum = 0.0;
    for (int k = 0; k < n_times; k++) {
        for (int i = 0; i < b.B; i++) b.t_int[i] = times[k];
        ast_noised z = {b.z_expr, b.z_pos, b.t, b.t_int};
        ast_apply_noise(&t->sched, tc->mode, &rng, b.B, b.N, b.G, b.expr, b.pos, b.mask, &z);
        ast_batch_coeffs(t, &b);
        ast_batch_prior(t, &b, t->ranks.val_lo, t->ranks.val_hi);
        if (mine.B < 1) continue; /* more ranks than validation sets */
        ast_ctx_reset(t->ctx);
        ast_ctx_set_training(t->ctx, 0);
        ast_ctx_set_grad(t->ctx, 0);
        ast_loss_parts lp = ast_trainer_forward(t, &mine);
        float total, aux = 0.0f; /* on a device, each pass synchronises here */
        ast_tensor_read(t->ctx, lp.total, 0, 1, &total);
        if (lp.moe_aux) ast_tensor_read(t->ctx, lp.moe_aux, 0, 1, &aux);
        sum += t->ranks.val_share * (total - aux);
    }
    ast_ctx_set_grad(t->ctx, 1);
    free(times);
    ast_dist_sum_f64(&sum, 1);
    return sum / n_times;
}
