/* The ranks of a run over MPI (configure --with-mpi). Collectives are
 * built from MPI's data movement only (alltoallv, allgatherv, bcast): the
 * one arithmetic, the sum, is done here in rank order, so its bits do not
 * depend on the reduction tree an MPI library picks. MPI's default error
 * handler stays: a failed exchange ends the whole run. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/train_dist.h"

static int g_started, g_rank, g_size = 1;
/* Where failed ranks meet (ast_dist_fail): a communicator of its own, as
 * the ranks still training wait in collectives of MPI_COMM_WORLD. */
static MPI_Comm g_failed = MPI_COMM_NULL;

/* How long a failed rank waits for the others to fail too: they do so at
 * the same step, well within this; a rank still training past it waits
 * for the failed one in vain. */
#define FAIL_GRACE_SECONDS 10.0

/* Elements per exchange: MPI counts and offsets are ints, and the receive
 * buffer of a sum stays at most this big. */
#define WINDOW ((int64_t)1 << 26)

int ast_dist_start(ast_error *e)
{
    int ranks, provided, size;
    const char *who;
    if (ast_dist_launched(&ranks, &who, e) < 0) return -1;
    if (ranks < 2) return 0; /* one rank: nothing to join, as a build without MPI */
    /* FUNNELED: only the main thread calls MPI; the thread pool never does. */
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        ast_error_set(e, "MPI_Init failed (launched as %d ranks by %s)", ranks, who);
        return -1;
    }
    g_started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != ranks || provided < MPI_THREAD_FUNNELED) {
        if (size != ranks)
            ast_error_set(e, "%s=%d says %d ranks were launched, but MPI joined %d: with srun, pass the PMI the MPI "
                          "library uses (srun --mpi=pmix); with mpirun, use the mpirun of the MPI alphast-run was "
                          "built with", who, ranks, ranks, size);
        else
            ast_error_set(e, "the MPI library offers no MPI_THREAD_FUNNELED (alphast's thread pool runs beside "
                          "the thread that calls MPI)");
        ast_dist_stop();
        return -1;
    }
    g_size = size;
    MPI_Comm_dup(MPI_COMM_WORLD, &g_failed);
    /* Every rank would print the same lines: the others keep to warnings. */
    if (g_rank > 0) setenv("ALPHAST_LOG", "warn", 0);
    return 0;
}

void ast_dist_stop(void)
{
    if (g_failed != MPI_COMM_NULL) MPI_Comm_free(&g_failed);
    if (g_started) MPI_Finalize();
    g_started = 0, g_rank = 0, g_size = 1;
}

void ast_dist_fail(void)
{
    if (g_size < 2) return;
    MPI_Request all_failed;
    int done = 0;
    MPI_Ibarrier(g_failed, &all_failed);
    for (double until = MPI_Wtime() + FAIL_GRACE_SECONDS; !done && MPI_Wtime() < until;) {
        MPI_Test(&all_failed, &done, MPI_STATUS_IGNORE);
        if (!done) nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    if (!done) ast_dist_abort(1);
    ast_dist_stop();
}

void ast_dist_abort(int status)
{
    if (g_started) MPI_Abort(MPI_COMM_WORLD, status);
    exit(status);
}

int ast_dist_rank(void) { return g_rank; }
int ast_dist_size(void) { return g_size; }

int ast_dist_local_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        char *end = NULL;
        long local = v ? strtol(v, &end, 10) : -1;
        if (v && end != v && !*end && local >= 0 && local < g_size) return (int)local;
    }
    /* Another launcher: the ranks that share this machine's memory, in rank order. */
    MPI_Comm node;
    int local = 0;
    if (g_size < 2) return 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local);
    MPI_Comm_free(&node);
    return local;
}

/* Each rank's part of the window [w0, w1) of an array split at `at` (size
 * + 1 offsets), as MPI counts and offsets from w0. */
static void window_parts(const int64_t *at, int64_t w0, int64_t w1, int *count, int *displ)
{
    for (int r = 0; r < g_size; r++) {
        int64_t lo = at[r] > w0 ? at[r] : w0, hi = at[r + 1] < w1 ? at[r + 1] : w1;
        count[r] = hi > lo ? (int)(hi - lo) : 0;
        displ[r] = hi > lo ? (int)(lo - w0) : 0;
    }
}

/* The sum of n elements (float, or double if dbl) in place: a reduce-scatter
 * (rank r receives everyone's r-th part and adds them up in rank order),
 * then an allgather of the sums. */
static void sum_window(void *x, int64_t n, int dbl, int *count, int *displ, int64_t *at)
{
    MPI_Datatype type = dbl ? MPI_DOUBLE : MPI_FLOAT;
    size_t es = dbl ? sizeof(double) : sizeof(float);
    for (int r = 0; r < g_size; r++) {
        int64_t hi;
        ast_dist_part(n, r, g_size, &at[r], &hi);
    }
    at[g_size] = n;
    window_parts(at, 0, n, count, displ);
    int mine = count[g_rank], *rcount = count + g_size, *rdispl = displ + g_size;
    for (int r = 0; r < g_size; r++) rcount[r] = mine, rdispl[r] = r * mine;
    char *recv = ast_xmalloc((size_t)g_size * (size_t)mine * es + 1);
    MPI_Alltoallv(x, count, displ, type, recv, rcount, rdispl, type, MPI_COMM_WORLD);
    for (int k = 0; k < mine; k++) {
        double acc = 0.0;
        for (int r = 0; r < g_size; r++)
            acc += dbl ? ((const double *)recv)[(size_t)r * mine + k] : ((const float *)recv)[(size_t)r * mine + k];
        if (dbl) ((double *)x)[displ[g_rank] + k] = acc;
        else ((float *)x)[displ[g_rank] + k] = (float)acc;
    }
    free(recv);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x, count, displ, type, MPI_COMM_WORLD);
}

static void sum(void *x, int64_t n, int dbl)
{
    if (g_size < 2) return;
    int *count = ast_xmalloc(4 * (size_t)g_size * sizeof *count), *displ = count + 2 * g_size;
    int64_t *at = ast_xmalloc(((size_t)g_size + 1) * sizeof *at);
    size_t es = dbl ? sizeof(double) : sizeof(float);
    for (int64_t w0 = 0; w0 < n; w0 += WINDOW)
        sum_window((char *)x + (size_t)w0 * es, n - w0 < WINDOW ? n - w0 : WINDOW, dbl, count, displ, at);
    free(count), free(at);
}

void ast_dist_sum_f32(float *x, int64_t n) { sum(x, n, 0); }
void ast_dist_sum_f64(double *x, int64_t n) { sum(x, n, 1); }

void ast_dist_allgather_f32(float *x, const int64_t *at)
{
    if (g_size < 2) return;
    int *count = ast_xmalloc(2 * (size_t)g_size * sizeof *count), *displ = count + g_size;
    for (int64_t w0 = at[0]; w0 < at[g_size]; w0 += WINDOW) {
        int64_t w1 = at[g_size] - w0 < WINDOW ? at[g_size] : w0 + WINDOW;
        window_parts(at, w0, w1, count, displ);
        MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x + w0, count, displ, MPI_FLOAT, MPI_COMM_WORLD);
    }
    free(count);
}

void ast_dist_broadcast(void *buf, size_t n, int root)
{
    if (g_size < 2) return;
    for (size_t done = 0; done < n; done += (size_t)WINDOW) {
        size_t part = n - done < (size_t)WINDOW ? n - done : (size_t)WINDOW;
        MPI_Bcast((char *)buf + done, (int)part, MPI_BYTE, root, MPI_COMM_WORLD);
    }
}

void ast_dist_barrier(void)
{
    if (g_size > 1) MPI_Barrier(MPI_COMM_WORLD);
}

int ast_dist_all(int ok)
{
    int mine = ok != 0, all = mine;
    if (g_size > 1) MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

int ast_dist_max(int v)
{
    int most = v;
    if (g_size > 1) MPI_Allreduce(&v, &most, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return most;
}
