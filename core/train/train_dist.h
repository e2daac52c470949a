/* alphast/train_dist.h: the processes of one run. `mpirun -np R
 * alphast-run train` (or srun) starts R ranks; built --with-mpi they talk
 * through MPI (train_dist_mpi.c), built without it a launch of several
 * ranks is refused and the one process is rank 0 of 1
 * (train_dist_solo.c). Every collective below runs on every rank, in the
 * same order, and gives every rank the same bits: sums are taken in rank
 * order, never in the order messages arrive, so a run repeats exactly.
 * With one rank each is the identity. Ranks on GPUs exchange device
 * memory through the ast_dist_device_ functions below. */
#ifndef ALPHAST_TRAIN_DIST_H
#define ALPHAST_TRAIN_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "engine/backend.h"

/* The ranks a launcher says it started (the environment of mpirun, MPICH's
 * hydra or srun), 1 when none did. 0 with what said it in `who`, or -1
 * with e set when a launcher variable is not a positive number. */
int ast_dist_launched(int *ranks, const char **who, ast_error *e);

/* Joins the launcher's ranks (MPI_Init) when it started more than one;
 * otherwise nothing. -1 with e set when several ranks were launched and
 * this build has no MPI, or MPI sees another number of them. Call first,
 * once per process; ast_dist_stop at the end. */
int ast_dist_start(ast_error *e);
void ast_dist_stop(void);
/* This rank failed and has said why. Most errors happen alike on every
 * rank, and when all fail the run ends as one process would; ranks that
 * go on would wait for this one forever, so when they have not failed
 * within a grace period the whole run is ended (MPI_Abort). */
void ast_dist_fail(void);
/* Ends every rank of the run at once. */
AST_NORETURN void ast_dist_abort(int status);

int ast_dist_rank(void);
int ast_dist_size(void);

/* x[0..n) becomes its sum over the ranks, added in rank order (in double,
 * rounded once). */
void ast_dist_sum_f32(float *x, int64_t n);
void ast_dist_sum_f64(double *x, int64_t n);
/* x[at[r] .. at[r + 1]) is rank r's (at has size + 1 ascending entries):
 * afterwards every rank holds every rank's part. */
void ast_dist_allgather_f32(float *x, const int64_t *at);
/* root's n bytes at buf on every rank. */
void ast_dist_broadcast(void *buf, size_t n, int root);
void ast_dist_barrier(void);
/* 1 when ok is non-zero on every rank. */
int ast_dist_all(int ok);
/* 1 when flag is non-zero on any rank (so that the ranks act together). */
static inline int ast_dist_any(int flag) { return !ast_dist_all(!flag); }
/* The largest v of the ranks. */
int ast_dist_max(int v);

/* This rank's number among the ranks of its machine: the launcher's
 * (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, SLURM_LOCALID), else from
 * MPI's split by shared memory. Collective. */
int ast_dist_local_rank(void);

/* Ranks that train on GPUs (train_dist_device.c). Start binds each to its
 * GPU of b (backend.h's bind: the local rank modulo the visible ones) and
 * chooses how their device memory is exchanged: over NCCL
 * (train_dist_nccl.c) when every rank has a GPU of its own and the build
 * has NCCL, else through the sums above from pinned host copies (NCCL
 * refuses two ranks on one GPU). Collective: -1 with e set on every rank
 * when any cannot bind. Stop ends what start began. */
int ast_dist_device_start(const ast_backend *b, ast_error *e);
void ast_dist_device_stop(void);
/* x[0..n) in b's memory becomes its sum over the ranks, the same bits on
 * every rank; host (n floats, pinned) is the path through MPI's scratch. */
void ast_dist_device_sum_f32(const ast_backend *b, float *x, int64_t n, float *host);
/* ast_dist_allgather_f32 of x in b's memory, host (at[size] floats) its scratch. */
void ast_dist_device_allgather_f32(const ast_backend *b, float *x, const int64_t *at, float *host);

/* Rank r's share [*lo, *hi) of n items split in contiguous parts that
 * differ by at most one. */
void ast_dist_part(int64_t n, int r, int size, int64_t *lo, int64_t *hi);

#endif
