/* alphast/masking.h: masked diffusion (docs/model.md §5), fixed as issue 4 asks.
 *
 * During training, with probability masking_probability per batch, some
 * model inputs are hidden after noising: genes of the expression input
 * (strategy random / block / structured) and 1 or 2 position axes of a
 * cell. A hidden entry is replaced by a learnable mask token (one value
 * per gene, one per axis) and the model is additionally asked to
 * reconstruct it: loss += reconstruction_weight * (R_expr + R_pos).
 * Masking never happens in validation or sampling.
 *
 * Differences from the reference, each deliberate:
 * - random masking hides exactly m_cnt genes per cell (the reference's
 *   k-th-value threshold hid m_cnt + 1, docs/model.md §11 item 8);
 * - m_cnt = min(max(1, floor(G rho)), G - v) keeps v = 10 genes visible
 *   as the reference does, but v = G - 1 when G <= 10 (the reference's
 *   G - 10 went negative and failed): small panels still mask one gene;
 * - padded cells are never masked (they are not cells, docs/model.md §11 item 9);
 * - the progressive schedule counts optimiser steps, which the checkpoint
 *   saves, so a resumed run continues its schedule (docs/model.md §11 item 15);
 * - the reconstruction target is the clean x0 by default, which is what
 *   the model predicts; the reference's pre-mask noised input asks the same
 *   output for z_t and x0 at once (docs/model.md §11 item 7). `input` restores it;
 * - the clean conditioning modality (expression in expr_to_pos, positions
 *   in pos_to_expr) is not masked unless mask_conditioning is set: it is
 *   the information the model is asked to condition on, so hiding it (as
 *   the reference does) removes the very expression it must place, and
 *   "reconstructing" it from itself teaches nothing about the generated
 *   modality.
 *
 * The tokens are parameters of the model's store, named as the
 * reference's state_dict names them:
 *   masking_module.mask_token.expression_mask_token  [1, 1, G]
 *   masking_module.mask_token.position_mask_token    [1, 1, 3]
 * initialised N(0, 0.02^2); they exist only when masking is enabled
 * (+G+3 parameters, docs/model.md §2.11) and are trained and checkpointed with the
 * rest. */
#ifndef ALPHAST_MASKING_H
#define ALPHAST_MASKING_H

#include <stdio.h>

#include "config/config.h"
#include "engine/backend.h"
#include "model/diffusion.h"
#include "model/model.h"

typedef enum ast_mask_strategy { AST_MASK_RANDOM, AST_MASK_BLOCK, AST_MASK_STRUCTURED } ast_mask_strategy;

/* What the masked entries are compared with: the clean data x0, or the
 * model input before masking (z_t for a noised modality; the reference). */
typedef enum ast_recon_target { AST_RECON_CLEAN, AST_RECON_INPUT } ast_recon_target;

/* The masking.* keys (code defaults of the reference, docs/model.md §5). */
typedef struct ast_masking_config {
    int enable;                  /* false */
    float expression_mask_ratio; /* 0.4 */
    float position_mask_ratio;   /* 0.33 */
    ast_mask_strategy strategy;  /* random */
    int mask_expression;         /* true */
    int mask_position;           /* true */
    float reconstruction_weight; /* 0.5 */
    float masking_probability;   /* 0.5 */
    int progressive;             /* progressive_masking, false */
    int64_t progressive_steps;   /* 10000 optimiser steps */
    int mask_conditioning;       /* alphast: false, see above */
    ast_recon_target target;     /* alphast reconstruction_target: clean */
} ast_masking_config;

void ast_masking_config_default(ast_masking_config *mc);
/* From a loaded config. Fails (e set) when masking is enabled but the
 * switches and the training mode leave nothing to mask. */
int ast_masking_config_from_cfg(const ast_cfg *cfg, ast_train_mode mode, ast_masking_config *mc, ast_error *e);

/* Whether masking may touch `modality` (AST_MOD_EXPR / AST_MOD_POS) in
 * this training mode: its switch is on, and it is noised or
 * mask_conditioning is set. */
int ast_masking_covers(const ast_masking_config *mc, ast_train_mode mode, int modality);

/* ---- drawing masks (1 = masked; padded cells, node_mask 0, never) ------ */

/* target * min(1, step / progressive_steps) when progressive, else target. */
float ast_masking_ratio(const ast_masking_config *mc, float target, int64_t step);

/* Genes to mask per cell for ratio rho: 0 when rho is 0, else
 * min(max(1, floor(G rho)), G - min(10, G - 1)). */
int ast_mask_gene_count(int G, float ratio);

/* out [B, N, G]: m_cnt genes of every valid cell. random: chosen uniformly
 * per cell; block: one contiguous run [s, s + m_cnt), s uniform, shared by
 * all cells of a set; structured: the genes with the largest |input|
 * (ties: lower gene first; no randomness). node_mask [B, N], NULL = all
 * valid. */
void ast_mask_expression(ast_mask_strategy strategy, ast_rng *rng, int B, int N, int G, int m_cnt,
                         const float *input, const float *node_mask, float *out);

/* out [B, N, 3]: per valid cell r ~ U(0, 1); r < 0.3 rho masks 2 distinct
 * random axes, else r < rho masks 1 random axis, else none. */
void ast_mask_positions(ast_rng *rng, int B, int N, float ratio, const float *node_mask, float *out);

/* ---- the training-time module ------------------------------------------ */

typedef struct ast_masking ast_masking;

/* Registers the mask tokens in p (or finds them if a previous module on the
 * same store did) for batches of B sets of N cells and G genes. */
ast_masking *ast_masking_new(const ast_masking_config *mc, ast_train_mode mode, ast_params *p, int B, int N, int G);
void ast_masking_free(ast_masking *mk);
/* For a step on device b: the masks and the loss's weights move to b's
 * pinned memory (b->host_alloc), and every batch takes the same ops
 * (unmasked ones with zero masks and weights: the same numbers), so that
 * a captured step replays with each batch's fresh masks. The trainer pins
 * only on a device; nothing when mk or b is NULL. */
void ast_masking_pin(ast_masking *mk, const ast_backend *b);

/* A sweep's mask_ratio schedule for the next draws: the masking ratios
 * become share x the configured expression/position ratios, in place of
 * the progressive ramp. NAN returns to the config's own schedule. */
void ast_masking_schedule(ast_masking *mk, float share);

/* One batch's decision (u ~ U(0,1) < masking_probability) and masks at
 * optimiser step `step`, from the noised expression input z_expr (for the
 * structured strategy). Returns mk when the batch is masked, else NULL
 * (also when mk is NULL: masking disabled, nothing drawn); a pinned
 * module (ast_masking_pin) returns mk for every batch. */
ast_masking *ast_masking_draw(ast_masking *mk, ast_rng *rng, int64_t step, const float *z_expr,
                              const float *node_mask);

/* Replaces the masked entries of the model inputs [B, N, G] / [B, N, 3] by
 * the tokens on the tape: x (1 - M) + M token, so the tokens get the
 * gradient of exactly the entries they fill. */
void ast_masking_inputs(ast_masking *mk, ast_ctx *c, ast_tensor **expr, ast_tensor **pos);

/* reconstruction_weight (R_expr + R_pos), [1]: each R is the mean squared
 * error of the predictions over the masked entries (0 if none) against
 * the clean data or the pre-mask inputs, as the config selects. Both R
 * wait on the device for ast_masking_collect. */
ast_tensor *ast_masking_loss(ast_masking *mk, ast_ctx *c, const ast_model_out *pred, ast_tensor *clean_expr,
                             ast_tensor *clean_pos, ast_tensor *input_expr, ast_tensor *input_pos);

/* A step's masking figures for metrics.jsonl (masked_expr_reconstruction,
 * masked_pos_reconstruction, masking_applied): means over the batches
 * drawn since the last ast_masking_take_metrics (R is 0 for unmasked ones;
 * applied is the share of masked batches). */
typedef struct ast_masking_metrics {
    double expr_reconstruction, pos_reconstruction, applied;
} ast_masking_metrics;
/* Fills out with this step's figures, then starts counting afresh; 0
 * (out untouched) when mk is NULL, else 1. */
int ast_masking_take_metrics(ast_masking *mk, ast_masking_metrics *out);
/* Adds the last ast_masking_loss's R values to the metrics' sums (also done
 * by ast_masking_take_metrics): call once the backend has synchronised
 * after each micro-batch's backward (its loss's read), before its context
 * is reset. The values come with the step's ops (ast_ctx_read_later), a
 * replayed step's too. Nothing when mk is NULL or no loss is pending. */
void ast_masking_collect(ast_masking *mk);

#endif
