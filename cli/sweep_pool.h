/* The process pool behind `alphast-run sweep`: runs each run of a sweep as
 * `alphast-run train` in a child process, N at a time, claiming runs and
 * recording their states in the sweep directory's ledger (alphast/ledger.h). */
#ifndef ALPHAST_CLI_SWEEP_POOL_H
#define ALPHAST_CLI_SWEEP_POOL_H

#include "sweep/sweep.h"

typedef struct sweep_opts {
    const char *dir; /* the sweep directory, existing */
    int jobs;        /* runs at a time */
    int threads;     /* OPENBLAS_NUM_THREADS of each run */
    int fail_fast;   /* stop everything at the first failure */
    int worker;      /* a Slurm task (--worker): stop when nothing is left to claim, never wait for runs others hold */
    const char *device;  /* --device NAME for every run (train --device), or NULL: each run's config's */
    const int *gpus;     /* the GPUs of the runs not on the CPU (sweep_gpus.h), n_gpus of them */
    int n_gpus;
    int runs_per_gpu;    /* at most this many runs at a time on each */
} sweep_opts;

/* A pending line for every run of s the ledger of dir has not seen, as a
 * runner writes when it starts (the submitter of a job array writes them
 * before its tasks start); *not_done: the runs not done. 0, or -1 with e set. */
int sweep_pool_declare(const ast_sweep *s, const char *dir, int *not_done, ast_error *e);

/* The runs of s the ledger of dir does not have as done (nor, unless
 * count_failed, as failed); -1 with e set. */
int sweep_pool_left(const ast_sweep *s, const char *dir, int count_failed, ast_error *e);

typedef enum sweep_outcome { SWEEP_ALL_DONE, SWEEP_SOME_FAILED, SWEEP_INTERRUPTED, SWEEP_ERROR } sweep_outcome;

/* Runs every run that is not done yet; runs held by another runner are
 * waited for (unless o->worker). SIGINT, SIGTERM and SIGUSR1 stop it
 * cleanly: running children get SIGUSR1, finish their step, write a
 * checkpoint and go back to pending ("interrupted" after SIGINT, else
 * "preempted"); a second SIGINT kills them. */
typedef struct sweep_tally {
    int stop_signal;   /* the first signal received, or 0 */
    int ended;         /* runs that ended, done or failed, while this pool ran */
} sweep_tally;
sweep_outcome sweep_pool_run(ast_sweep *s, const sweep_opts *o, sweep_tally *tally, ast_error *e);

#endif
