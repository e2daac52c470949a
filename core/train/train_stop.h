/* alphast/train_stop.h: stopping training cleanly on a signal. Slurm warns
 * a job before its time limit or preemption (SIGUSR1 with
 * `sbatch --signal=B:USR1@N`) and then sends SIGTERM; a user presses
 * Ctrl-C. While ast_trainer_run runs, each of these only asks it to stop:
 * it finishes the optimiser step under way, writes a checkpoint that
 * holds where in the epoch it was, and returns with stop_reason "signal".
 * `alphast-run train` then exits with AST_EXIT_PREEMPTED, and running it
 * again continues with exactly the losses the run would have had. */
#ifndef ALPHAST_TRAIN_STOP_H
#define ALPHAST_TRAIN_STOP_H

/* The exit status of a training process stopped by a signal with its work
 * saved (sysexits.h's EX_TEMPFAIL: try again later). The sweep runners put
 * such a run back to pending, never failed. */
#define AST_EXIT_PREEMPTED 75

/* Installs the handlers of SIGUSR1, SIGTERM and SIGINT, which only record
 * the signal. A second SIGTERM or SIGINT is not caught: it ends the process
 * as before, for when a step takes too long. Calls nest: `alphast-run
 * train` catches for the whole command (over MPI a rank killed by a signal
 * before or after the loop would end the run of every rank without a
 * checkpoint), ast_trainer_run for its loop. */
void ast_train_stop_catch(void);
/* Puts back the dispositions ast_train_stop_catch replaced, at the
 * release that matches the first catch. */
void ast_train_stop_release(void);
/* The first signal received since ast_train_stop_catch, or 0. */
int ast_train_stop_signal(void);

#endif
