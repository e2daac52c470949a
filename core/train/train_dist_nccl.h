/* The exchanges of ranks with GPUs of their own, over NCCL (configure
 * finds it beside CUDA when MPI is on): train_dist_device.c's fast path.
 * Not a public interface. */
#ifndef ALPHAST_TRAIN_DIST_NCCL_H
#define ALPHAST_TRAIN_DIST_NCCL_H

#include <stdint.h>

#include "base/base.h"

/* The ranks' communicator, on the GPU each has bound; 0, or -1 with e set
 * on every rank. Collective. */
int train_nccl_start(ast_error *e);
void train_nccl_stop(void);
/* ast_dist_device_sum_f32 and ast_dist_device_allgather_f32 of device
 * memory, queued on the calling thread's stream behind its kernels. */
void train_nccl_sum_f32(float *x, int64_t n);
void train_nccl_allgather_f32(float *x, const int64_t *at);

#endif
