/* alphast/optim.h: AdamW (optionally AMSGrad), global-norm clipping and
 * the learning-rate schedules of the training loop (docs/model.md §4.3). */
#ifndef ALPHAST_OPTIM_H
#define ALPHAST_OPTIM_H

#include "engine/backend.h"

typedef struct ast_adamw_config {
    float lr;
    float beta1, beta2, eps;
    float weight_decay; /* decoupled: theta *= 1 - lr * wd */
    int amsgrad;
} ast_adamw_config;

typedef struct ast_adamw {
    ast_adamw_config cfg;
    ast_params *params;
    int64_t step;
    /* The part of the parameters this optimiser updates: elements
     * [first, first + count) of all of them flattened in registration order
     * (all of them, or one rank's part under ZeRO-1). Of parameter i that
     * is its elements [lo[i], lo[i] + len[i]), len[i] 0 when none. */
    int64_t first, count;
    int64_t *lo, *len;
    float **m, **v, **vmax; /* per parameter, len[i] each (NULL when 0); vmax only with amsgrad */
    /* The step's scalars: its constants staged in pinned host memory and
     * their backend copy, and the gradient's sum of squares (backend). */
    ast_adamw_hyper *hyper_host, *hyper;
    double *sumsq;
} ast_adamw;

ast_adamw *ast_adamw_new(ast_params *p, const ast_adamw_config *cfg);
/* The optimiser of elements [first, first + count) of the flattened
 * parameters: its state is theirs alone, and a step updates only them
 * (each rank's part under ZeRO-1). */
ast_adamw *ast_adamw_new_part(ast_params *p, const ast_adamw_config *cfg, int64_t first, int64_t count);
void ast_adamw_free(ast_adamw *o);
/* One update with learning rate lr of the optimiser's part. A parameter
 * whose gradient is all zero (the whole gradient, also outside the part)
 * received none this step and is skipped, as PyTorch skips grad=None
 * (e.g. the last layer's unused time branch, docs/model.md §2.3). */
void ast_adamw_step(ast_adamw *o, float lr);

/* The training step's update in two halves, so a captured step (graph.h)
 * can replay the second: ast_adamw_stage counts the update and writes its
 * constants for lr into pinned host memory (after the previous update has
 * read them); ast_adamw_queue queues, on the backend, the gradient's sum
 * of squares, clipping to clip_norm (when > 0), the copy of the constants
 * and AdamW, which leaves everything as it was when the norm or *loss
 * (backend memory; NULL: not checked) is not finite. */
void ast_adamw_stage(ast_adamw *o, float lr);
void ast_adamw_queue(ast_adamw *o, double clip_norm, const float *loss);
/* The norm the last ast_adamw_queue measured, before clipping (waits for it). */
double ast_adamw_norm(const ast_adamw *o);

/* L2 norm over all parameter gradients (float64 accumulation). */
double ast_grad_norm(const ast_params *p);
/* Scales all gradients so their global norm is at most max_norm (> 0);
 * returns the norm before clipping. */
double ast_clip_grad_norm(ast_params *p, double max_norm);

typedef enum ast_lr_kind { AST_LR_CONSTANT, AST_LR_COSINE } ast_lr_kind;

typedef struct ast_lr_schedule {
    ast_lr_kind kind;
    float lr, eta_min;
    int64_t t_max;        /* period in the unit below */
    int per_step;         /* 0: the unit is the epoch (reference); 1: the step */
    int64_t warmup_steps; /* linear warm-up from 0, in steps */
} ast_lr_schedule;

/* Learning rate at (step, epoch): warm-up, then constant or
 * eta_min + (lr - eta_min)(1 + cos(pi e / T_max)) / 2 (periodic, as
 * CosineAnnealingLR's closed form). */
float ast_lr_at(const ast_lr_schedule *s, int64_t step, int epoch);

#endif
