/* What the checkpoint's files share: train_ckpt.c writes the weights and
 * the metadata (checkpoint.safetensors, rank 0), train_dist_ckpt.c the
 * AdamW state, in that file or, split over the ranks (ZeRO-1), in one file
 * per rank. Not a public interface. */
#ifndef ALPHAST_TRAIN_CKPT_H
#define ALPHAST_TRAIN_CKPT_H

#include "io/safetensors.h"
#include "train_internal.h"

/* The AdamW moments are saved as "<prefix><parameter name>", as PyTorch's
 * optimizer state names them: exp_avg, exp_avg_sq, max_exp_avg_sq (AMSGrad only). */
static const char *const moment_names[3] = {"optimizer.exp_avg.", "optimizer.exp_avg_sq.", "optimizer.max_exp_avg_sq."};

static inline float **moments(ast_adamw *o, int k) { return k == 0 ? o->m : k == 1 ? o->v : o->vmax; }
static inline int moment_kinds(const ast_adamw *o) { return o->cfg.amsgrad ? 3 : 2; }

/* The optimiser's part of the AdamW state on the host, kind after kind,
 * parameter after parameter (those with elements in the part), as the
 * checkpoints add it; free() it. Whole, each moment is its parameter's size. */
float *train_moments_to_host(ast_adamw *o);

/* checkpoint.safetensors of a run with its AdamW state split: "zero1", and
 * over how many ranks. Absent: the state is in the file, whole. */
#define CKPT_SHARDING "optimizer_sharding"
#define CKPT_SHARD_RANKS "optimizer_ranks"

/* Every rank writes its part of the state, then rank 0 the completion
 * marker of the set; before checkpoint.safetensors, which names it. -1
 * with e set on every rank when any failed (the last whole set stays). */
int train_shards_save(ast_trainer *t, ast_error *e);
/* After checkpoint.safetensors: the sets of other steps go (rank 0). */
void train_shards_prune(ast_trainer *t);
/* The AdamW state a checkpoint names: whole in f (into this rank's part
 * when split), or this rank's file of the set f names. */
int train_moments_load(ast_trainer *t, const ast_st_file *f, ast_error *e);

#endif
