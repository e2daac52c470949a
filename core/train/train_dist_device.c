/* Ranks on GPUs (train_dist.h): which GPU each takes, and how their
 * gradients and parameters travel. Ranks with GPUs of their own exchange
 * device memory over NCCL where the build has it (train_dist_nccl.c);
 * ranks that share a GPU cannot (NCCL refuses two ranks on one device)
 * and go through the host: a copy into pinned memory, the rank-order sum
 * over MPI, a copy back: the CPU path's sums in rank order. */
#include <string.h>

#include "train/train_dist.h"
#if ALPHAST_HAVE_NCCL
#include "train/train_dist_nccl.h"
#endif

static int g_nccl; /* 1 while NCCL carries the exchanges */

/* 1 when another rank's GPU has this rank's UUID: each rank's is sent to
 * all in turn. */
static int shares_gpu(const unsigned char mine[16])
{
    int shared = 0;
    for (int r = 0; r < ast_dist_size(); r++) {
        unsigned char theirs[16];
        memcpy(theirs, mine, sizeof theirs);
        ast_dist_broadcast(theirs, sizeof theirs, r);
        if (r != ast_dist_rank() && !memcmp(theirs, mine, sizeof theirs)) shared = 1;
    }
    return ast_dist_any(shared);
}

int ast_dist_device_start(const ast_backend *b, ast_error *e)
{
    unsigned char uuid[16];
    char why[512] = "";
    int local = ast_dist_local_rank();
    int rc = b->bind ? b->bind(b, local, uuid, why, sizeof why) : 0;
    if (!ast_dist_all(rc == 0)) {
        ast_error_set(e, "device: %s: rank %d (local rank %d) %s%s", b->name, ast_dist_rank(), local,
                      rc ? "cannot take its GPU: " : "stops: another rank cannot take its GPU (its message says why)",
                      why);
        return -1;
    }
    if (!b->bind) return 0; /* one memory, the host's: the sums above */
    if (shares_gpu(uuid)) {
        if (ast_dist_rank() == 0)
            ast_log(AST_LOG_WARN, "device: %s: ranks share a GPU, so their gradients are summed through MPI from "
                    "host copies (NCCL takes one rank per GPU); launch at most one rank per GPU for speed", b->name);
        return 0;
    }
#if ALPHAST_HAVE_NCCL
    if (train_nccl_start(e) < 0) return -1;
    g_nccl = 1;
    if (ast_dist_rank() == 0)
        ast_log(AST_LOG_INFO, "device: %s: %d ranks on GPUs of their own, gradients summed by NCCL", b->name,
                ast_dist_size());
#else
    if (ast_dist_rank() == 0)
        ast_log(AST_LOG_WARN, "device: %s: this alphast-run was built without NCCL, so the GPUs' gradients are summed "
                "through MPI from host copies, which is slower; install NCCL (libnccl-dev) and configure again", b->name);
#endif
    return 0;
}

void ast_dist_device_stop(void)
{
#if ALPHAST_HAVE_NCCL
    if (g_nccl) train_nccl_stop();
#endif
    g_nccl = 0;
}

void ast_dist_device_sum_f32(const ast_backend *b, float *x, int64_t n, float *host)
{
#if ALPHAST_HAVE_NCCL
    if (g_nccl) {
        train_nccl_sum_f32(x, n);
        return;
    }
#endif
    b->to_host(b, host, x, (size_t)n * sizeof *host);
    ast_dist_sum_f32(host, n);
    b->to_backend(b, x, host, (size_t)n * sizeof *host);
    b->synchronize(b); /* a copy from pinned memory is queued: host is the caller's again once it is done */
}

void ast_dist_device_allgather_f32(const ast_backend *b, float *x, const int64_t *at, float *host)
{
#if ALPHAST_HAVE_NCCL
    if (g_nccl) {
        train_nccl_allgather_f32(x, at);
        return;
    }
#endif
    int r = ast_dist_rank();
    b->to_host(b, host + at[r], x + at[r], (size_t)(at[r + 1] - at[r]) * sizeof *host);
    ast_dist_allgather_f32(host, at);
    b->to_backend(b, x + at[0], host + at[0], (size_t)(at[ast_dist_size()] - at[0]) * sizeof *host);
    b->synchronize(b);
}
