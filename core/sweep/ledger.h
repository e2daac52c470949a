/* alphast/ledger.h: the state of a sweep directory, shared by every runner
 * working on it.
 *
 * SWEEP_DIR/ledger.jsonl is append-only, one JSON object per line, each
 * appended with a single O_APPEND write so concurrent runners never
 * interleave. A run's state is its last line:
 *   {"time": 1712345678.25, "run": "Gated-8c1f0e2d9a3b4c5d", "config_name": "Gated",
 *    "seed": 1, "hash": "8c1f0e2d9a3b4c5d", "state": "running", "dir": "runs/Gated-8c1f0e2d9a3b4c5d",
 *    "pid": 4242, "start": 1712345670.0, "end": ..., "exit": 0, "signal": 9, "reason": "..."}
 * state: pending | running | done | failed. time/start/end: Unix seconds.
 * dir: relative to SWEEP_DIR. pid, start, end, exit, signal, reason appear
 * when they apply (an interrupted run goes back to pending with
 * "reason": "interrupted").
 *
 * Claims: SWEEP_DIR/claims/<run>.claim exists while a process works on the
 * run. It is created complete and locked (flock) and then linked into
 * place, so creating it is atomic (link fails if it exists) and a claim
 * whose holder died (its lock is free) can be taken over safely. */
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

typedef struct ast_claim {
    int fd; /* holds the lock; -1 when not held */
    char *path;
} ast_claim;

/* Claims run in sweep_dir: 1 claimed (c holds it), 0 another live process
 * holds it, -1 with e set on an I/O error. The lock fd is close-on-exec;
 * clear that to let a child keep the claim alive after this process dies. */
int ast_claim_take(const char *sweep_dir, const char *run, ast_claim *c, ast_error *e);
/* Removes the claim file and drops the lock. */
void ast_claim_release(ast_claim *c);

#endif
