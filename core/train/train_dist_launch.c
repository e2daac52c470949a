/* Which launcher started this process, and how many ranks it started:
 * what both builds need to know (one to join them, the other to refuse). */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "train/train_dist.h"

/* Each launcher's number of ranks. Slurm's is SLURM_STEP_NUM_TASKS, set by
 * srun for the tasks of a step, not SLURM_NTASKS: a batch script has that
 * for the whole allocation while it runs one process, and so do the
 * single trainings a sweep starts in it. */
static const char *const size_vars[] = {
    "OMPI_COMM_WORLD_SIZE", /* Open MPI's mpirun */
    "PMI_SIZE",             /* MPICH's and Intel MPI's hydra, srun --mpi=pmi2 */
    "SLURM_STEP_NUM_TASKS", /* srun */
};

int ast_dist_launched(int *ranks, const char **who, ast_error *e)
{
    *ranks = 1, *who = NULL;
    for (size_t i = 0; i < sizeof size_vars / sizeof *size_vars; i++) {
        const char *v = getenv(size_vars[i]);
        if (!v) continue;
        char *end = NULL;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (end == v || *end || errno || n < 1 || n > INT_MAX) {
            ast_error_set(e, "%s='%s' in the environment is not a number of ranks; unset it, or launch with "
                          "mpirun -np R or srun -n R", size_vars[i], v);
            return -1;
        }
        *ranks = (int)n, *who = size_vars[i];
        return 0;
    }
    return 0;
}

void ast_dist_part(int64_t n, int r, int size, int64_t *lo, int64_t *hi)
{
    *lo = n / size * r + (r < n % size ? r : n % size);
    *hi = *lo + n / size + (r < n % size);
}
