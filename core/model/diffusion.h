/* alphast/diffusion.h: the noise model of docs/model.md §3 — per-modality cosine
 * schedules, forward noising, the reverse step and the limit distribution.
 *
 * Convention (as the reference): alpha_bar[t] is the SIGNAL AMPLITUDE and
 * sigma_bar[t] = sqrt(1 - alpha_bar[t]^2) the noise std. Index 0 of every
 * per-modality array is expression, 1 is positions. */
#ifndef ALPHAST_DIFFUSION_H
#define ALPHAST_DIFFUSION_H

#include "engine/engine.h"

/* Functions returning int give 0 on success and -1 with the error set. */

enum { AST_MOD_EXPR = 0, AST_MOD_POS = 1 };

typedef enum ast_train_mode { AST_MODE_JOINT, AST_MODE_EXPR_TO_POS, AST_MODE_POS_TO_EXPR } ast_train_mode;

/* Which modalities a mode generates (noises in training, samples at test). */
int ast_mode_noises(ast_train_mode mode, int modality);
const char *ast_mode_name(ast_train_mode mode);
int ast_mode_parse(const char *s, ast_train_mode *out);

typedef struct ast_schedule {
    int steps;               /* T_d */
    float *log_alpha_bar[2]; /* [T_d + 1] */
    float *alpha_bar[2];
    float *sigma_bar[2];
} ast_schedule;

/* Cosine schedule with exponents nu (docs/model.md §3.1). */
int ast_schedule_init(ast_schedule *s, int steps, double nu_expr, double nu_pos, ast_error *e);
void ast_schedule_free(ast_schedule *s);

/* A batch of B sets of N cells in the diffusion state. */
typedef struct ast_noised {
    float *expr;  /* [B, N, G] model input */
    float *pos;   /* [B, N, 3] model input */
    float *t;     /* [B] t_int / T_d */
    int *t_int;   /* [B] */
} ast_noised;

/* Forward noising (docs/model.md §3.3) of the modalities `mode` generates, with
 * t_int given per set; the other modality is copied clean. Position noise
 * is centred over each set's valid cells. mask [B, N] (NULL = all valid). */
void ast_apply_noise(const ast_schedule *s, ast_train_mode mode, ast_rng *rng, int B, int N, int G,
                     const float *expr, const float *pos, const float *mask, ast_noised *out);

/* The limit distribution (docs/model.md §3.5): generated modalities ~ N(0, I) * mask
 * (positions centred), the conditioning ones clean; t_int = T_d. */
void ast_limit_sample(const ast_schedule *s, ast_train_mode mode, ast_rng *rng, int B, int N, int G,
                      const float *expr, const float *pos, const float *mask, ast_noised *out);

/* One reverse step z_t -> z_s (docs/model.md §3.4) for the generated modalities,
 * given the model's x0 predictions; s < t_int for every set. With rng
 * NULL the posterior noise is skipped (the step returns the mean). */
void ast_reverse_step(const ast_schedule *s, ast_train_mode mode, ast_rng *rng, int B, int N, int G,
                      const float *pred_expr, const float *pred_pos, const float *mask, int s_int,
                      ast_noised *z);

/* The posterior's step z_s = cz z_t + cx x0 + std eps for modality m from
 * t_int down to s_int (docs/model.md §3.4): what ast_reverse_step applies
 * per set, for a caller that applies it elsewhere (the sampler's device
 * step, core/eval/sample_device.c). */
typedef struct ast_reverse_coeffs {
    float cz, cx, std;
} ast_reverse_coeffs;
void ast_reverse_coeffs_at(const ast_schedule *s, int m, int t_int, int s_int, ast_reverse_coeffs *out);

/* eps ~ N(0, I) * mask [B, N] (NULL = all valid) for one modality [B, N, D]
 * of all sets, drawn from rng in order; centred per set (ast_center_sets)
 * when `center` (positions). The noise of ast_limit_sample and
 * ast_reverse_step. */
void ast_masked_noise(ast_rng *rng, float *eps, const float *mask, int B, int N, int D, int center);

/* What the network's position output F means. x0: the clean positions
 * themselves (the reference, and the default). v: v = alpha_bar eps -
 * sigma_bar x0, so x0_hat = alpha_bar z_t - sigma_bar F: the noisy input
 * reaches the prediction through a skip and the target stays O(1) at both
 * ends of the schedule (eps-prediction divides by alpha_bar ~ 2e-6 at T).
 * Measured on the bundled data (docs/evaluation.md), v placed held-out
 * cells worse than x0 with the aligned loss, so it is an option. */
typedef enum ast_pos_param { AST_POS_X0, AST_POS_V } ast_pos_param;

const char *ast_pos_param_name(ast_pos_param p);
int ast_pos_param_parse(const char *s, ast_pos_param *out); /* 0, or -1 if unknown */

/* Per-set coefficients of x0_hat = a z_t + b F for positions at times
 * t_int [B]: a [B], b [B]. */
void ast_pos_param_coeffs(const ast_schedule *s, ast_pos_param p, int B, const int *t_int, float *a, float *b);

/* The x0 prediction of positions from the network's output out_pos
 * [B,N,3] and its noisy input z_pos at times t_int [B] (see
 * ast_pos_param in model/diffusion.h); out_pos itself for x0. Recorded
 * on the tape, so training's loss reaches the network through it. */
ast_tensor *ast_pos_x0_hat(ast_ctx *c, const ast_schedule *s, ast_pos_param p, const int *t_int, ast_tensor *z_pos,
                           ast_tensor *out_pos);
/* The same with the coefficients of ast_pos_param_coeffs given (a, b [B]
 * in host memory): a caller that replays a captured step keeps them in
 * pinned memory it fills before each replay (the trainer's batch). */
ast_tensor *ast_pos_x0_hat_from(ast_ctx *c, ast_pos_param p, const float *a, const float *b, ast_tensor *z_pos,
                                ast_tensor *out_pos);
/* The same with a and b as tensors [B, 1, 1] already in the backend's
 * memory (the sampler's device step stages them there). */
ast_tensor *ast_pos_x0_hat_with(ast_ctx *c, ast_pos_param p, ast_tensor *a, ast_tensor *b, ast_tensor *z_pos,
                                ast_tensor *out_pos);

/* Subtract each set's mean over valid cells from x [B, N, D] and zero the
 * padded rows (remove_mean_with_mask). */
void ast_center_sets(float *x, const float *mask, int B, int N, int D);

#endif
