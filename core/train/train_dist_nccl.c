/* Gradient sums and parameter gathers between GPUs over NCCL
 * (train_dist_nccl.h). A run repeats bit for bit at the same number of
 * ranks: an all-reduce adds each element once, in the order NCCL's
 * algorithm fixes for the communicator (the ring's order, its chunking
 * and channels follow from the ranks, the topology, the size and the
 * algorithm and protocol), and sends that one sum to every rank, so all
 * ranks hold the same bits and so does a rerun on the same machines. The
 * algorithm is pinned to Ring with the Simple protocol (what NCCL picks for
 * gradients of megabytes anyway) unless the environment names another, so
 * that NCCL's tuning cannot choose otherwise between runs; NVLink
 * multicast (NVLS), which adds inside the NVSwitch in an order of its own
 * that nothing here has checked to repeat, is off. The sums differ in
 * their last bits from the CPU path's rank-order sums in double: the ring
 * adds in float. */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/train_dist.h"
#include "train/train_dist_nccl.h"

static ncclComm_t g_comm;

/* Every launch and copy of a thread goes to its own default stream
 * (nvcc --default-stream per-thread, Makefile.am): the collectives queue
 * there, behind the backward that made the gradients. */
#define STREAM cudaStreamPerThread

static void nccl_check(ncclResult_t rc, const char *call)
{
    if (rc == ncclSuccess) return;
    fprintf(stderr, "alphast: rank %d: %s failed: %s (%s); the run ends\n", ast_dist_rank(), call,
            ncclGetErrorString(rc), ncclGetLastError(g_comm));
    ast_dist_abort(70);
}

int train_nccl_start(ast_error *e)
{
    ncclUniqueId id;
    setenv("NCCL_ALGO", "Ring", 0);
    setenv("NCCL_PROTO", "Simple", 0);
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    ncclResult_t rc = ast_dist_rank() == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    if (!ast_dist_all(rc == ncclSuccess)) {
        ast_error_set(e, "NCCL: rank 0 could not make the run's id (%s); set NCCL_DEBUG=WARN to see why",
                      ncclGetErrorString(rc));
        return -1;
    }
    ast_dist_broadcast(&id, sizeof id, 0);
    rc = ncclCommInitRank(&g_comm, ast_dist_size(), id, ast_dist_rank());
    if (!ast_dist_all(rc == ncclSuccess)) {
        ast_error_set(e, "NCCL: rank %d could not join the other ranks' GPUs (%s); set NCCL_DEBUG=WARN to see why",
                      ast_dist_rank(), rc == ncclSuccess ? "another rank failed" : ncclGetErrorString(rc));
        if (rc == ncclSuccess) ncclCommDestroy(g_comm);
        return -1;
    }
    return 0;
}

void train_nccl_stop(void)
{
    ncclCommDestroy(g_comm);
    g_comm = NULL;
}

void train_nccl_sum_f32(float *x, int64_t n)
{
    nccl_check(ncclAllReduce(x, x, (size_t)n, ncclFloat32, ncclSum, g_comm, STREAM), "ncclAllReduce");
}

/* Each rank's part goes to all from its own root: the parts differ in
 * length by one, which ncclAllGather's equal counts cannot take. */
void train_nccl_allgather_f32(float *x, const int64_t *at)
{
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < ast_dist_size(); r++)
        nccl_check(ncclBroadcast(x + at[r], x + at[r], (size_t)(at[r + 1] - at[r]), ncclFloat32, r, g_comm, STREAM),
                   "ncclBroadcast");
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
}
