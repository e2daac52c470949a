/* State shared by the training loop's files (train.c, train_val.c,
 * train_ckpt.c); not a public interface. */
#ifndef ALPHAST_TRAIN_INTERNAL_H
#define ALPHAST_TRAIN_INTERNAL_H

#include <stdio.h>

#include "train/train.h"
#include "train/train_dist_loop.h"
#include "train/train_graph.h"

/* One batch of B sets: clean data and the noised model inputs. */
typedef struct ast_batch {
    int B, N, G;
    float *expr, *pos, *mask;
    float *z_expr, *z_pos, *t;
    int *t_int;
    float *pos_a, *pos_b; /* [B]: ast_pos_param_coeffs of t_int (ast_batch_coeffs) */
    /* The network's per-set constants of z_expr (ast_model_prior_in), made
     * on the host with the batch (ast_batch_prior): prior [B, N, 3] and
     * geodesics [B, N, N], each NULL where the model needs none or computes
     * it itself (masking may replace the expression it sees). */
    float *prior, *geo;
    ast_masking *masks; /* set when this batch is masked; NULL otherwise and always in validation */
    const ast_backend *pinned_by; /* whose pinned memory holds it (the training batch on a device), or NULL */
} ast_batch;

struct ast_trainer {
    ast_model *model;
    const ast_dataset *data;
    ast_train_config tc;
    char *dir;
    ast_schedule sched;
    ast_adamw *opt;
    ast_masking *masking; /* NULL unless masking.enable */
    ast_ctx *ctx;
    ast_rng data_rng;
    ast_set_sampler train_sets, val_sets;
    int64_t *val_centres;
    ast_batch batch;
    /* The next step's batch, drawn while the device runs this one
     * (train_graph.c; host memory, copied into `batch` when its step
     * comes), and data_rng as it was before that draw: what a checkpoint
     * saves meanwhile, as a resumed run draws that batch again. */
    ast_batch ahead;
    int drawn_ahead;
    ast_rng rng_before_ahead;
    ast_batch val_batch; /* made once: a validation set count too large for memory fails at the start */
    FILE *metrics;
    ast_schedule_values scheduled; /* of the current step */
    int n_model_params; /* the model's parameters, which the mask tokens follow */
    /* The metadata of best.safetensors and checkpoints (ast_params_save's
     * key, value, ..., NULL): alphast's version, the genes, the config. */
    const char *meta[7];
    char *genes_json, *config_yaml;

    /* progress, saved in checkpoints */
    int64_t step;
    int epoch;
    /* Within the epoch under way: its steps done and their losses' sum, not
     * 0 only in a checkpoint a signal made mid-epoch (train_stop.h). */
    int epoch_step;
    double epoch_loss_sum;
    double best_val;
    int best_epoch, bad_epochs;
    double last_val, last_train;
    /* training.select_on's criterion at the best epoch (lower is better:
     * the loss, or minus the sampled score), and the sampled score at the
     * best and the last epoch (NaN without one) */
    double best_crit, best_score, last_score;
    /* The whole run's bookkeeping across invocations (summary.json), also
     * saved: the training seconds and the steps they timed up to the last
     * checkpoint (timed_steps < step only after a checkpoint that predates
     * it), the arena's high-water mark and the invocations that checkpointed. */
    double prior_seconds;
    int64_t prior_timed_steps;
    size_t prior_peak_arena;
    int invocations;

    double run_start;   /* ast_now() when this invocation's ast_trainer_run began; 0 before */
    int64_t first_step; /* t->step then */

    double *losses; /* of this process's steps */
    int64_t n_losses, cap_losses;

    struct train_monitors *monitors; /* NULL: none configured */
    struct train_tboard *tboard;     /* NULL: no TensorBoard events */

    train_ranks ranks; /* this process's share of the run (train_dist_loop.h) */
    train_graph graph; /* the step as a CUDA graph (train_graph.h) */
};

/* Allocates B sets of N cells and G genes (in pin's pinned host memory
 * unless NULL), with room for the per-set constants that `prior_of`
 * needs (NULL: none); -1 with e naming `what` (the config keys that sized
 * it) and the bytes when memory runs out. */
int ast_batch_init(ast_batch *b, int B, int N, int G, const ast_model *prior_of, const ast_backend *pin,
                   const char *what, ast_error *e);
void ast_batch_free(ast_batch *b);
/* The positions' x0 coefficients of the batch's times, before its forward. */
void ast_batch_coeffs(const ast_trainer *t, ast_batch *b);
/* The prior and geodesics of sets lo .. hi of the batch's noised
 * expression, on the host, before its forward (nothing when it has no
 * room for them). */
void ast_batch_prior(const ast_trainer *t, ast_batch *b, int lo, int hi);
/* The host's half of a training micro-batch: sets, times, noise, the
 * coefficients, the prior and masks drawn into b from data_rng. */
void train_draw_batch(ast_trainer *t, ast_batch *b);
/* train_draw_batch into t->batch, or the batch drawn ahead copied there. */
void train_prepare_batch(ast_trainer *t);
/* The backend's half: forward and backward of t->batch (this rank's sets)
 * queued on a fresh step; returns the batch's loss (not yet read). */
ast_tensor *train_queue_micro_step(ast_trainer *t);
/* Forward pass and loss of the batch's noised inputs on t->ctx. */
ast_loss_parts ast_trainer_forward(ast_trainer *t, ast_batch *b);

int ast_trainer_save(ast_trainer *t, ast_error *e);
/* This invocation's run time so far plus the checkpointed runs' (seconds). */
double ast_trainer_run_seconds(const ast_trainer *t);
int ast_trainer_load(ast_trainer *t, const char *path, ast_error *e);
/* run_dir/NAME into buf. */
const char *ast_trainer_file(const ast_trainer *t, const char *name, char *buf, size_t n);

/* train_monitors.c: the config's monitors observe a training step or an
 * epoch's end (before validation). A step's observation is queued with
 * the step (train_monitors_queue: after backward, before clipping; it
 * keeps the step's statistics and queues the gradient norms) and observed
 * after it (train_monitors_observe, which waits for the backend). */
typedef struct train_monitors train_monitors;
void train_monitors_queue(ast_trainer *t);
void train_monitors_observe(ast_trainer *t, ast_phase phase);
void train_monitors_free(train_monitors *tm);

/* train_tboard.c (logging.logger: tensorboard, on rank 0): open once
 * metrics.jsonl is; sync after each line or lines written there, to chart
 * them; close when the trainer is freed. Open: 0, or -1 with e set. */
typedef struct train_tboard train_tboard;
int train_tboard_open(ast_trainer *t, ast_error *e);
void train_tboard_sync(ast_trainer *t);
void train_tboard_close(ast_trainer *t);

#endif
