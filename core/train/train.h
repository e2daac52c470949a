/* alphast/train.h: the training loop (docs/model.md §4, fixed as issue 4 asks):
 * diffusion training on neighbourhood sets, AdamW with schedules and
 * clipping, a deterministic validation loss, early stopping, atomic
 * checkpoints with exact resume, and a run directory. */
#ifndef ALPHAST_TRAIN_H
#define ALPHAST_TRAIN_H

#include "config/config.h"
#include "data/data.h"
#include "model/diffusion.h"
#include "model/loss.h"
#include "model/masking.h"
#include "model/model.h"
#include "train/optim.h"

/* What a schedule sets before each optimiser step. */
#define AST_MAX_SCHEDULED 8
typedef struct ast_schedule_values {
    float lr; /* in: the config's learning-rate schedule; out: the rate AdamW uses */
    int n;
    struct {
        const char *name; /* "masking.ratio", "moe.load_balance_weight", "moe.router_noise" */
        float value;
    } named[AST_MAX_SCHEDULED]; /* published to plugins through host->scheduled */
} ast_schedule_values;

/* step: optimiser updates done so far (0 before the first), epoch: 0-based.
 * 0 on success, -1 with e set to stop the run. */
typedef int (*ast_schedule_fn)(void *ud, int64_t step, int epoch, ast_schedule_values *v, ast_error *e);

/* A score of the current weights on the validation cells, higher is
 * better (NaN: none): the primary metric of sampled placements, which the
 * eval layer above this one computes (eval/eval_val.h). */
typedef double (*ast_val_score_fn)(void *ud, ast_model *m, const ast_schedule *s);

/* training.select_on: what picks best.safetensors and early stopping's
 * epochs without improvement. */
typedef enum ast_select_on {
    AST_SELECT_LOSS,    /* the validation loss (the reference's; the default) */
    AST_SELECT_SAMPLED, /* the val_score of sampled placements (falls back to the loss without one) */
} ast_select_on;

/* training.optimizer_sharding: where the AdamW state of a run over
 * several ranks (train_dist.h) lives. */
typedef enum ast_optim_sharding {
    AST_SHARD_ZERO1,      /* each rank keeps and updates 1/R of it (ZeRO stage 1) */
    AST_SHARD_REPLICATED, /* every rank keeps all of it */
} ast_optim_sharding;

typedef struct ast_train_config {
    ast_train_mode mode;
    int diffusion_steps;
    double nu_expression, nu_position;
    ast_loss_config loss;
    ast_pos_param pos_param; /* diffusion.position_parameterisation */

    int sets_per_step;   /* B */
    int set_size;        /* N; 0: whole slices, N the largest slice of the train or val split, at most region_cap */
    int region_cap;      /* evaluation.max_set_size: with set_size 0, a slice larger gives random regions of this many */
    int rotate;          /* random 3-D rotation of each training set */
    float expr_dropout;  /* expression dropout augmentation */
    int epochs;
    int steps_per_epoch;
    int accumulate;      /* gradient accumulation: micro-batches per update */
    int cuda_graph;      /* on a device, capture the step as a graph and replay it (train_graph.c) */
    ast_adamw_config adamw;
    ast_lr_schedule lr;
    double clip_norm;    /* 0 = off */
    int early_stopping, patience;
    int val_sets;        /* fixed validation sets */
    int val_t_points;    /* fixed grid of diffusion times */
    int val_at_T;        /* validation also scores t = T, pure noise, where sampling starts (not under reference_parity) */
    int val_sample_steps; /* training.val_sample_steps: sampler steps of val_score */
    ast_select_on select_on;
    ast_val_score_fn val_score; /* optional, called at every epoch's end; NULL: the loss alone */
    void *val_score_ud;
    const char *val_score_name; /* its metric's name, for metrics.jsonl ("knn_k10") */
    double max_minutes;  /* stop (with a checkpoint) after this long; 0 = no limit */
    const char *init_from; /* training.init_from: a fresh run starts from these weights; NULL: random ones */
    uint64_t seed;
    ast_optim_sharding sharding; /* of the AdamW state over the ranks of an MPI run */
    ast_precision precision;     /* training.precision: of the GEMMs (float32, or bf16 operands) */
    int progress;        /* 1: progress bar on a terminal */
    int tensorboard;     /* logging.logger: tensorboard: metrics.jsonl's values as TensorBoard events too */
    ast_masking_config masking;
    ast_split_opts split;     /* the held-out protocol the run's splits were dealt by (summary.json names it) */
    ast_schedule_fn schedule; /* optional, called before every optimiser step */
    void *schedule_ud;
} ast_train_config;

void ast_train_config_default(ast_train_config *tc);
/* From a loaded config (0, or -1 with e set); strings point into cfg. */
int ast_train_config_from_cfg(const ast_cfg *cfg, ast_train_config *tc, ast_error *e);
/* Settles the recipe's `auto` keys in cfg for held-out cells split as
 * `kind` (resolved): data.train_sets (slices for random cells and blocks,
 * else patches; slices set data.set_size 0 and one set per rank and step)
 * and model.prior (isomap under a slab or sections in expr_to_pos with x0,
 * else none); reference_parity: patches, none (train_recipe.c). */
int ast_train_resolve_recipe(ast_cfg *cfg, ast_split_kind kind, ast_error *e);
int ast_data_opts_from_cfg(const ast_cfg *cfg, ast_data_opts *o);
/* data.split, split_ratio, split_seed, split_key and sections_from_z
 * (a split_key alone means data.split: key; beside another protocol it is
 * an error located at the key). 0, or -1 with e set. */
int ast_split_opts_from_cfg(const ast_cfg *cfg, ast_split_opts *o, ast_error *e);
/* The protocol `kind` (resolved: ast_split_resolve) of options o as
 * results name it: an object {"split", "chosen_by" (auto), "split_seed"
 * (blocks, random), "split_ratio" (all but key), "split_key" (key),
 * "sections_from_z"} for JSON, and a line for tables. */
struct cJSON *ast_split_protocol_json(ast_split_kind kind, const ast_split_opts *o);
void ast_split_protocol_text(ast_split_kind kind, const ast_split_opts *o, char *buf, size_t n);
/* training.precision: 32-true / 32 is float32, bf16-mixed the bf16 GEMMs
 * of engine.h. bf16-mixed where this build or CPU cannot run it is an
 * error located at the value, saying why (0, or -1 with e set). Training
 * and the sampling of train, eval and sample read it. */
int ast_precision_from_cfg(const ast_cfg *cfg, ast_precision *p, ast_error *e);

/* Outcome of a run, also written to summary.json: of the whole run, not
 * of this invocation (a resumed one adds to what its checkpoint saved). */
typedef struct ast_train_result {
    int64_t steps;
    int epochs;
    double best_val, last_val, last_train;
    double best_score, last_score; /* val_score at the best and the last epoch; NaN without one */
    int best_epoch;
    double seconds;          /* training wall time of every invocation, up to its last checkpoint, plus this one's */
    double steps_per_second; /* the steps those seconds timed / seconds */
    const char *stop_reason; /* "epochs", "early_stopping", "time_limit", "signal" */
    int stop_signal;         /* with "signal": the signal that asked to stop mid-epoch (train/train_stop.h) */
} ast_train_result;

typedef struct ast_trainer ast_trainer;

/* Prepares a run in `run_dir` (created; config_yaml, if not NULL, is
 * written there as config.yaml and into the metadata of its weights and
 * checkpoints, with the gene list and alphast's version) over the training
 * and validation splits. */
ast_trainer *ast_trainer_new(ast_model *m, const ast_dataset *d, const ast_split splits[3],
                             const ast_train_config *tc, const char *run_dir, const char *config_yaml, ast_error *e);
void ast_trainer_free(ast_trainer *t);

/* Loads the config's `monitors:` list (names, or {name: x, option: value})
 * as monitor plugins that observe every training step and epoch end and
 * write their metrics, tagged with their names, into the run's
 * metrics.jsonl (docs/monitors.md). 0 also when there are none; -1 with e
 * set on an unknown monitor or a bad option. */
int ast_trainer_add_monitors(ast_trainer *t, const ast_cfg *cfg, ast_error *e);

/* Continue from run_dir/checkpoint.safetensors if it exists (1), start
 * fresh if it does not (0), or fail (-1, e set) on an unusable one: every
 * metadata field is range-checked against the others, the config's model
 * and metrics.jsonl, and the error names the file and the field. A missing
 * checkpoint in a directory that a run trained in (summary.json, or
 * metrics.jsonl past its first epoch) fails too, rather than start over
 * on top of that run's metrics. */
int ast_trainer_resume(ast_trainer *t, ast_error *e);

/* Trains until the epochs, early stopping, the time limit or a signal
 * (SIGUSR1, SIGTERM, SIGINT: train/train_stop.h) end it. A
 * fresh run (no step taken) first loads tc->init_from, if set: alphast's
 * weights or checkpoint, or a PyTorch state_dict saved as safetensors
 * (names as the reference's, "model." prefix or not). Every parameter of
 * the model must be there with its shape and a gene list in the file must
 * equal the data's; the mask tokens of masked training are taken when the
 * file has them; other tensors are ignored. A non-finite loss or gradient
 * stops it with an error; the last good checkpoint stays. 0 on success, -1
 * with e set. */
int ast_trainer_run(ast_trainer *t, ast_train_result *r, ast_error *e);

/* The deterministic validation loss of the current weights. */
double ast_trainer_val_loss(ast_trainer *t);
/* Its diffusion times into out [val_t_points + 1]: the midpoints of
 * val_t_points equal bins of 1..T, then T itself when tc->val_at_T; returns
 * their number. */
int ast_trainer_val_times(const ast_train_config *tc, int *out);

/* Losses of every optimiser step so far (for tests of exact resume). */
int64_t ast_trainer_n_losses(const ast_trainer *t);
/* 1 when the training steps are replayed as a CUDA graph (train_graph.h). */
int ast_trainer_cuda_graph(const ast_trainer *t);
const double *ast_trainer_losses(const ast_trainer *t);

#endif
