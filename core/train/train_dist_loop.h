/* The training loop's side of the ranks of a run (train_dist.h): data
 * parallelism. Every rank draws every global batch, as one process would
 * (the same RNG, so the same sets, times and noise), and trains on its
 * contiguous share of the sets; the gradients are summed over the ranks,
 * each weighted by its share of the batch's mean, so every rank holds the
 * gradient of the whole batch and takes the same step. AdamW's state is
 * split over the ranks (ZeRO-1: each updates its part of the flattened
 * parameters, then all gather them) or whole on each
 * (training.optimizer_sharding). Validation splits its sets alike. With
 * one rank each function leaves the loop as it was. Not a public
 * interface; the trainer embeds a train_ranks. */
#ifndef ALPHAST_TRAIN_DIST_LOOP_H
#define ALPHAST_TRAIN_DIST_LOOP_H

#include <stdint.h>

#include "train/optim.h"

typedef struct ast_trainer ast_trainer;
typedef struct ast_batch ast_batch;

typedef struct train_ranks {
    int rank, size;
    int lo, hi;             /* this rank's sets [lo, hi) of each training batch */
    float share;            /* (hi - lo) / batch: its weight in the batch's mean loss */
    int val_lo, val_hi;     /* and of the validation sets */
    double val_share;
    int sharded;            /* ZeRO-1 over more than one rank: the AdamW state is of part[rank] only */
    int64_t *part;          /* [size + 1]: where each rank's part of the flattened parameters starts */
    int64_t n_grad, n_buf;  /* parameter and buffer elements */
    const ast_backend *device; /* the ranks' GPUs' backend, NULL on the CPU */
    float *flat;            /* a step's exchange: gradients (on the CPU), buffer changes, loss; pinned on a device */
    float *buf_start;       /* the buffers when the step began */
} train_ranks;

/* Before the optimiser is made (it takes part[rank] when sharded): the
 * shares of this rank. -1 with e set for a run the ranks cannot split:
 * fewer sets per batch than ranks, or masked training. */
int train_ranks_init(ast_trainer *t, ast_error *e);
void train_ranks_free(train_ranks *r);
/* AdamW over this rank's part of the parameters when sharded, else all. */
ast_adamw *train_ranks_optimizer(ast_trainer *t);

/* Sets [lo, hi) of b, as a batch of their own (pointing into b). */
ast_batch train_ranks_rows(const ast_batch *b, int lo, int hi);

/* Before a step's micro-batches: dropout and router noise of each rank
 * draw from a stream of (seed, step, rank), so a resumed run redraws them;
 * the buffers plugins change while training (the MoE's selection bias)
 * are noted. */
void train_ranks_step_begin(ast_trainer *t);
/* After them: the gradients and the step's loss (this rank's share of the
 * mean, `loss`) summed over the ranks, and the buffers' changes averaged
 * (so every rank keeps the same). Returns the loss of the whole batch. */
double train_ranks_reduce(ast_trainer *t, double loss);
/* After the optimiser step: the parts the ranks updated, gathered. */
void train_ranks_step_end(ast_trainer *t);

/* At the start of a run: every rank must start from rank 0's weights,
 * buffers, data stream and config (-1 with e set otherwise: the ranks read
 * different files). */
int train_ranks_check_same(ast_trainer *t, ast_error *e);

#endif
