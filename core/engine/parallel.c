/* The one pool of worker threads: every kernel's parallel work, the GEMMs
 * included (ast_sgemm splits them into single-threaded OpenBLAS calls, and
 * the pool sets OpenBLAS to one thread when it starts). It has as many
 * threads as OPENBLAS_NUM_THREADS asked of OpenBLAS, so a run never uses
 * more cores than it was given. Work is split into contiguous ranges, one
 * per thread, fixed by n and the thread count: kernels that write each
 * element from one thread give the same bits for any timing.
 *
 * Workers wait for a job by spinning a short while with sched_yield (jobs
 * come back to back within a step), then sleep on a condition variable. */
#include <cblas.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

#define MAX_THREADS 64
#define SPIN_ROUNDS 2000

typedef struct job {
    ast_range_fn fn;
    void *arg;
    int64_t n;
    int parts; /* one per thread; a part may be empty */
} job;

static struct {
    pthread_mutex_t busy; /* one job at a time; a second caller runs serially */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int threads; /* 0 = not started in this process */
    unsigned start_generation; /* what the workers have seen when they start */
    job job;
    atomic_uint generation; /* bumped for each job */
    atomic_int remaining;   /* workers still running the current job */
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static _Thread_local int in_worker;

static void run_part(const job *j, int part)
{
    int64_t lo = j->n * part / j->parts, hi = j->n * (part + 1) / j->parts;
    if (lo < hi) j->fn(j->arg, lo, hi);
}

static unsigned wait_for_job(unsigned seen)
{
    for (int i = 0; i < SPIN_ROUNDS; i++) {
        unsigned g = atomic_load_explicit(&pool.generation, memory_order_acquire);
        if (g != seen) return g;
        sched_yield();
    }
    pthread_mutex_lock(&pool.lock);
    unsigned g;
    while ((g = atomic_load_explicit(&pool.generation, memory_order_acquire)) == seen)
        pthread_cond_wait(&pool.wake, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
    return g;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned seen = pool.start_generation;
    in_worker = 1;
    for (;;) {
        seen = wait_for_job(seen);
        run_part(&pool.job, id);
        atomic_fetch_sub_explicit(&pool.remaining, 1, memory_order_acq_rel);
    }
    return NULL;
}

/* A forked child has none of the parent's threads: start afresh on first use. */
static void forget_pool_in_child(void)
{
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pool.threads = 0;
}

/* The pool's size: OpenBLAS's thread count when the pool first starts
 * (OPENBLAS_NUM_THREADS); kept across fork, when OpenBLAS already runs on
 * one thread. */
static int wanted_threads(void)
{
    static int wanted;
    if (!wanted) {
        int n = openblas_get_num_threads();
        wanted = n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
    }
    return wanted;
}

static void start_pool(void)
{
    static int atfork_set;
    if (!atfork_set) pthread_atfork(NULL, NULL, forget_pool_in_child), atfork_set = 1;
    int n = wanted_threads();
    /* GEMMs are split over this pool too (ast_sgemm), each part on one
     * OpenBLAS thread: one set of threads, none spinning while another works. */
    openblas_set_num_threads(1);
    /* Read here, not in the workers: a worker that starts after the first
     * job was posted must still see that job as new. */
    pool.start_generation = atomic_load(&pool.generation);
    for (int id = 1; id < n; id++) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker, (void *)(intptr_t)id)) {
            n = id; /* fewer threads than asked: still correct */
            break;
        }
        pthread_detach(t);
    }
    pool.threads = n;
}

int ast_parallel_threads(void)
{
    if (!pool.threads) start_pool();
    return pool.threads;
}

void ast_parallel_for(int64_t n, int64_t grain, ast_range_fn fn, void *arg)
{
    int threads = in_worker ? 1 : ast_parallel_threads();
    if (threads < 2 || n < 2 * grain || pthread_mutex_trylock(&pool.busy)) {
        if (n > 0) fn(arg, 0, n);
        return;
    }
    pool.job = (job){fn, arg, n, threads};
    atomic_store_explicit(&pool.remaining, threads - 1, memory_order_release);
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add_explicit(&pool.generation, 1, memory_order_acq_rel);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    run_part(&pool.job, 0);
    while (atomic_load_explicit(&pool.remaining, memory_order_acquire) > 0) sched_yield();
    pthread_mutex_unlock(&pool.busy);
}

typedef struct copy_job {
    char *to;
    const char *from;
    size_t bytes;
} copy_job;

enum { COPY_CHUNK = 1 << 20 };

static void copy_chunks(void *arg, int64_t lo, int64_t hi)
{
    const copy_job *c = arg;
    size_t start = (size_t)lo * COPY_CHUNK, end = (size_t)hi * COPY_CHUNK;
    if (end > c->bytes) end = c->bytes;
    memcpy(c->to + start, c->from + start, end - start);
}

void ast_copy_parallel(void *to, const void *from, size_t bytes)
{
    copy_job c = {to, from, bytes};
    ast_parallel_for((int64_t)((bytes + COPY_CHUNK - 1) / COPY_CHUNK), 2, copy_chunks, &c);
}
