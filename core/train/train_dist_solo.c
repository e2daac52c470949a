/* The ranks of a build without MPI: this process alone, rank 0 of 1, whose
 * collectives have nothing to exchange. A launch of several ranks is
 * refused: each would train the whole run by itself, into the same
 * directory. */
#include <stdlib.h>

#include "train/train_dist.h"

int ast_dist_start(ast_error *e)
{
    int ranks;
    const char *who;
    if (ast_dist_launched(&ranks, &who, e) < 0) return -1;
    if (ranks > 1) {
        ast_error_set(e, "launched as %d ranks (%s=%d), but this alphast-run was built without MPI, so each would "
                      "train the whole run alone: configure --with-mpi (apt-get install libopenmpi-dev openmpi-bin) "
                      "and rebuild, or run it as one process", ranks, who, ranks);
        return -1;
    }
    return 0;
}

void ast_dist_stop(void) {}
void ast_dist_fail(void) {}
void ast_dist_abort(int status) { exit(status); }
int ast_dist_rank(void) { return 0; }
int ast_dist_size(void) { return 1; }
int ast_dist_local_rank(void) { return 0; }
void ast_dist_sum_f32(float *x, int64_t n) {}
void ast_dist_sum_f64(double *x, int64_t n) {}
void ast_dist_allgather_f32(float *x, const int64_t *at) {}
void ast_dist_broadcast(void *buf, size_t n, int root) {}
void ast_dist_barrier(void) {}
int ast_dist_all(int ok) { return ok != 0; }
int ast_dist_max(int v) { return v; }
