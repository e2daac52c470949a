/* alphast/slurm.h: what `alphast-run sweep --executor slurm` asks of Slurm
 * (docs/cluster.md). The options come from the script's
 * `executor = {kind = "slurm", ...}` and from the command line, each
 * checked where it is given; the batch script they make is one job array
 * whose tasks each run `alphast-run sweep --worker`, claiming runs from the
 * sweep's ledger until none is left. */
#ifndef ALPHAST_SLURM_H
#define ALPHAST_SLURM_H

#include "engine/engine.h"

/* The array size when no option sets it: one task per run not done, up to
 * this (Slurm's default MaxArraySize is 1001, indices 0..1000); the tasks
 * then take the remaining runs one after another. */
#define AST_SLURM_DEFAULT_MAX_TASKS 1000
/* Seconds before the time limit at which Slurm sends the tasks SIGUSR1 (a
 * quarter of limits under 8 minutes): time for the runs to finish their
 * step and write a checkpoint. */
#define AST_SLURM_WARN_SECONDS 120

typedef struct ast_slurm_opts {
    char *partition;   /* NULL: the cluster's default */
    char *time;        /* a Slurm time limit ("4:00:00", "1-12", "90"); NULL: the partition's */
    char *mem;         /* memory per node ("8G", "16000M"); NULL: the cluster's default */
    int cpus_per_task; /* 0: the runs a task runs at once x their threads */
    int tasks;         /* the array's size; 0: one per run not done */
    char **sbatch;     /* more sbatch options, written last (so they win), each "--name[=value]" */
    int n_sbatch;
} ast_slurm_opts;

/* Sets option `key` (partition, time, mem, cpus_per_task, tasks, sbatch:
 * as the script's executor table names them) from text, checked: 0, or -1
 * with e saying what a good value looks like ("'4h' is not a Slurm time
 * limit: ...", for the caller to prefix with where it was given). sbatch
 * takes one or more options separated by blanks and adds them. */
int ast_slurm_opt_set(ast_slurm_opts *o, const char *key, const char *value, ast_error *e);
/* 0 if o's sbatch options only ask for resources (--partition, --qos,
 * --gres, --time, ...: what a restricted sweep script may give, in their
 * long form), else -1 with e naming the first that does more (--export,
 * --output, --chdir, ...). */
int ast_slurm_check_resources_only(const ast_slurm_opts *o, ast_error *e);
/* The options `over` sets replace o's (the command line over the script). */
void ast_slurm_opts_override(ast_slurm_opts *o, const ast_slurm_opts *over);
void ast_slurm_opts_free(ast_slurm_opts *o);

/* The seconds of a Slurm time limit, 0 for UNLIMITED / INFINITE, -1 when
 * the text is none of Slurm's forms: minutes, minutes:seconds,
 * hours:minutes:seconds, days-hours, days-hours:minutes,
 * days-hours:minutes:seconds. */
long ast_slurm_time_seconds(const char *text);

/* One job array for a sweep. */
typedef struct ast_slurm_array {
    const char *name;          /* the sweep's name, for the job's */
    const char *sweep_dir;     /* absolute; logs go to its slurm/ */
    const char *workdir;       /* absolute: where the tasks start (the submitter's directory) */
    const char *const *worker; /* the task's command, the program (absolute) first */
    int n_worker;
    int tasks, cpus_per_task;  /* resolved: at least 1 */
} ast_slurm_array;

/* The batch script (bash): #SBATCH lines for the array, its logs
 * (SWEEP_DIR/slurm/%A_%a.out, appended to across requeues), the warning
 * signal (B:USR1, AST_SLURM_WARN_SECONDS before the time limit), --requeue,
 * the options and then the extra sbatch options; its body execs the worker,
 * every argument quoted for the shell. NULL with e set when a path cannot
 * be written on an #SBATCH line (blanks, quotes, backslashes, '%'). */
char *ast_slurm_script(const ast_slurm_opts *o, const ast_slurm_array *a, ast_error *e);

#endif
