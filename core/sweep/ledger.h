/* alphast/ledger.h: the state of a sweep directory, shared by every runner
 * working on it.
 *
 * SWEEP_DIR/ledger.jsonl is append-only, one JSON object per line, each
 * appended with a single O_APPEND write so concurrent runners never
 * interleave. A run's state is its last line:
 *   {"time": 1712345678.25, "run": "Gated-8c1f0e2d9a3b4c5d", "config_name": "Gated",
 *    "seed": 1, "hash": "8c1f0e2d9a3b4c5d", "state": "running", "dir": "runs/Gated-8c1f0e2d9a3b4c5d",
 *    "pid": 4242, "host": "node3", "job": "1234_5", "start": 1712345670.0, "end": ..., "exit": 0,
 *    "signal": 9, "reason": "...", "gpu": "1"}
 * state: pending | running | done | failed. time/start/end: Unix seconds.
 * dir: relative to SWEEP_DIR. pid, host, job (the Slurm job array task),
 * start, end, exit, signal, reason appear when they apply (gpu: the
 * CUDA_VISIBLE_DEVICES a run on a GPU got from the local executor; an interrupted
 * run goes back to pending with "reason": "interrupted", a preempted one
 * with "preempted").
 *
 * Claims: SWEEP_DIR/claims/<run>.claim exists while a process works on the
 * run. It is created complete and locked (flock) and then linked into
 * place, so creating it is atomic (link fails if it exists) and a claim
 * whose holder died (its lock is free) can be taken over safely. It holds
 * one JSON line saying who claimed: {"pid": 4242, "host": "node3", "job": "1234_5"}. */
#ifndef ALPHAST_LEDGER_H
#define ALPHAST_LEDGER_H

#include <stdint.h>

#include "engine/engine.h"

typedef enum ast_run_state { AST_RUN_PENDING, AST_RUN_RUNNING, AST_RUN_DONE, AST_RUN_FAILED } ast_run_state;

const char *ast_run_state_name(ast_run_state s);

typedef struct ast_ledger_entry {
    const char *run, *config_name, *hash, *dir;
    int64_t seed;
    ast_run_state state;
    double time;       /* filled by ast_ledger_append when 0 */
    int pid;           /* 0: not written */
    double start, end; /* 0: not written */
    int exit_code;     /* -1: not written */
    int signal;        /* 0: not written */
    const char *reason; /* NULL: not written */
    const char *host, *job; /* the runner's host and Slurm job; NULL: not written */
    const char *gpu;        /* the GPU the run was given (CUDA_VISIBLE_DEVICES); NULL: not written */
} ast_ledger_entry;

/* Appends one line to SWEEP_DIR/ledger.jsonl. 0, or -1 with e set. */
int ast_ledger_append(const char *sweep_dir, const ast_ledger_entry *en, ast_error *e);

/* The last state of every run in the ledger (a missing ledger is empty;
 * a torn last line from a crash is skipped). */
typedef struct ast_ledger ast_ledger;
ast_ledger *ast_ledger_read(const char *sweep_dir, ast_error *e);
void ast_ledger_free(ast_ledger *l);
/* 1 and the run's last state and its time, or 0 if the run has no line. */
int ast_ledger_last(const ast_ledger *l, const char *run, ast_run_state *state, double *time);
/* How many lines the ledger has for the run in `state` (for tests and
 * for checking that nothing ran twice). */
int ast_ledger_count(const ast_ledger *l, const char *run, ast_run_state state);

/* A run as the ledger tells it: its last line, and how many lines it has in
 * each state (lines[AST_RUN_DONE] > 1: it was recorded done twice). */
typedef struct ast_ledger_run {
    const char *run, *config_name; /* config_name: NULL if no line had it */
    ast_run_state state;           /* of the last line, as the fields below */
    double time;
    int pid;                         /* 0: not written */
    const char *reason, *host, *job; /* NULL: not written */
    const char *gpu;                 /* NULL: not written */
    int lines[4];                    /* per ast_run_state */
} ast_ledger_run;
/* The runs the ledger names, in the order of their first lines. */
int ast_ledger_n_runs(const ast_ledger *l);
const ast_ledger_run *ast_ledger_run_at(const ast_ledger *l, int i);

typedef struct ast_claim {
    int fd; /* holds the lock; -1 when not held */
    char *path;
} ast_claim;

/* Claims run in sweep_dir: 1 claimed (c holds it), 0 another live process
 * holds it, -1 with e set on an I/O error. The lock fd is close-on-exec;
 * clear that to let a child keep the claim alive after this process dies.
 * The claim names this process, this host and, in a Slurm job, the job
 * (ast_runner_job). */
int ast_claim_take(const char *sweep_dir, const char *run, ast_claim *c, ast_error *e);
/* Removes the claim file and drops the lock. */
void ast_claim_release(ast_claim *c);

/* Who holds a run's claim, as its file says, without taking it. */
typedef enum ast_claim_liveness {
    AST_CLAIM_NONE,   /* no claim file */
    AST_CLAIM_LIVE,   /* on this host, and its lock is held */
    AST_CLAIM_STALE,  /* on this host, and its lock is free: its holder died */
    AST_CLAIM_REMOTE, /* another host's: a lock there cannot be tested from here */
} ast_claim_liveness;
typedef struct ast_claim_info {
    ast_claim_liveness liveness;
    int pid;          /* 0: unknown (a claim of an older alphast holds only the pid) */
    char host[256];   /* "" if unknown */
    char job[64];     /* "" outside Slurm */
    double age;       /* seconds since it was claimed */
} ast_claim_info;
ast_claim_liveness ast_claim_inspect(const char *sweep_dir, const char *run, ast_claim_info *info);

/* This host's name, and the Slurm job array task this process runs in
 * ("1234_5", or the job id outside an array; "" outside Slurm): what
 * claims and ledger lines say about their runner. */
const char *ast_runner_host(void);
const char *ast_runner_job(void);

#endif
