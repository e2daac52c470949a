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
} sweep_opts;

typedef enum sweep_outcome { SWEEP_ALL_DONE, SWEEP_SOME_FAILED, SWEEP_INTERRUPTED, SWEEP_ERROR } sweep_outcome;

/* Runs every run that is not done yet; runs held by another runner are
 * waited for. SIGINT/SIGTERM stop it cleanly (running children get SIGINT
 * and go back to pending; a second signal kills them). */
sweep_outcome sweep_pool_run(ast_sweep *s, const sweep_opts *o, ast_error *e);

#endif
