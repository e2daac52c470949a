/* The Slurm executor of `alphast-run sweep` (docs/cluster.md): one job
 * array whose tasks each run `alphast-run sweep --worker`, a process pool
 * (sweep_pool.c) that claims runs from the sweep's ledger until none is
 * left. The ledger, not Slurm's job states, says what is done. */
#ifndef ALPHAST_CLI_SWEEP_SLURM_H
#define ALPHAST_CLI_SWEEP_SLURM_H

#include "sweep/sweep.h"

typedef struct sweep_submission {
    const ast_sweep *sweep;
    const ast_slurm_opts *opts; /* the script's options with the command line's over them */
    const char *dir;            /* the sweep directory */
    const char *const *worker;  /* the worker's options and arguments after `sweep --worker --out DIR` */
    int n_worker;
    int jobs, threads;          /* of each task: its runs at a time and their threads */
    int dry_run;                /* print the batch script, submit nothing */
} sweep_submission;

/* Declares the runs in the ledger, writes DIR/slurm/sweep.sbatch
 * atomically and submits it with `sbatch --parsable` (with dry_run: prints
 * it and writes nothing). Returns the command's exit status. */
int sweep_slurm_submit(const sweep_submission *sub);

/* In a Slurm task stopped by Slurm's warning (SIGUSR1) with runs of the
 * sweep not done: `scontrol requeue $SLURM_JOB_ID`, so the task comes back
 * and claims them. Prints what it did; 0, or -1 when it could not. */
int sweep_slurm_requeue(const ast_sweep *s, const char *dir);

#endif
