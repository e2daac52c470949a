/* alphast/sweep.h: sweeps written in Lua (docs/sweeps.md). A script builds
 * configs from YAML files and overrides, crosses them with seeds and hands
 * the result to alphast.sweep{...}; every point becomes one run = (name,
 * resolved config, seed), identified by a hash, optionally with Lua
 * schedules the training loop calls before each optimiser step.
 *
 * The script runs in an embedded Lua 5.4 state with the `alphast` module
 * (require "alphast", or the global `alphast`), restricted unless trusted:
 * no processes, file writing or native code, and a budget of instructions
 * and memory (ast_sweep_limits). Script errors (syntax,
 * runtime, bad config keys) come back as one message with the Lua traceback
 * ("sweep.lua:12: training.epochs: ...\nstack traceback: ..."). */
#ifndef ALPHAST_SWEEP_H
#define ALPHAST_SWEEP_H

#include <stdint.h>

#include "base/hash.h"
#include "engine/engine.h"
#include "sweep/slurm.h"
#include "train/train.h"

typedef struct ast_sweep_run {
    char *config_name; /* "Gated", or "attention=gated,num_experts=4" for grid points */
    char *id;          /* "<config_name>-<hash as 16 hex digits>": the run directory's name */
    uint64_t hash;     /* FNV-1a 64 of the resolved YAML and the schedule's code */
    int64_t seed;      /* seed.value of the resolved config */
    char *base;        /* the config file the overrides apply to */
    char **overrides;  /* KEY=VALUE in the order applied; the last one sets seed.value */
    int n_overrides;
    char *yaml;        /* the resolved config as ast_cfg_dump writes it */
    char *device;      /* its device: "cpu", or "cuda" for a run the local executor places on a GPU */
    int scheduled;     /* 1 if the run has a schedule (train --schedule SCRIPT:ID) */
} ast_sweep_run;

typedef struct ast_sweep_lua ast_sweep_lua;

/* What a script may do (docs/sweeps.md, "What a sweep script may do"). */
typedef struct ast_sweep_limits {
    int trusted;                   /* 1: the full Lua standard library (processes, files, native code) */
    int64_t script_instructions;   /* Lua VM instructions for evaluating the script, its requires included */
    int64_t schedule_instructions; /* Lua VM instructions for one call of a schedule function */
    int64_t memory_bytes;          /* Lua heap while script code runs */
    /* Wall-clock backstops for what no instruction count sees (a library
     * function that never returns): past them the process says why and exits. */
    double script_seconds, schedule_seconds;
} ast_sweep_limits;

#define AST_SWEEP_SCRIPT_INSTRUCTIONS 1000000000LL /* about a second or ten of pure Lua */
#define AST_SWEEP_SCHEDULE_INSTRUCTIONS 10000000LL /* a few ms, before every optimiser step */
#define AST_SWEEP_MEMORY_BYTES (1LL << 30)
#define AST_SWEEP_SCRIPT_SECONDS 600.0
#define AST_SWEEP_SCHEDULE_SECONDS 60.0

/* The defaults, changed by ALPHAST_TRUST_SWEEP=1, ALPHAST_SWEEP_INSTRUCTIONS,
 * ALPHAST_SCHEDULE_INSTRUCTIONS and ALPHAST_SWEEP_MEMORY_MB; -1 with e set
 * when one of them is malformed. */
int ast_sweep_limits_from_env(ast_sweep_limits *l, ast_error *e);

typedef struct ast_sweep {
    char *script; /* absolute path */
    char *name;   /* sweep{name=} or the script's base name */
    ast_sweep_run *runs;
    int n_runs;
    int jobs, threads; /* sweep{jobs=, threads=}; 0 when the script leaves them out */
    int report;        /* sweep{report=true} */
    int slurm;         /* sweep{executor = "slurm" or {kind = "slurm", ...}}: submit a job array */
    ast_slurm_opts slurm_opts; /* the executor table's Slurm options */
    int *gpus, n_gpus;  /* executor = {gpus = {0, 1}}: the GPUs of the runs not on the CPU; 0: not given */
    int runs_per_gpu;   /* executor = {runs_per_gpu = k}: runs at a time on each; 0: not given */
    int trusted;        /* evaluated with the full standard library */
    ast_sweep_lua *lua; /* the script's state, alive for its schedules */
} ast_sweep;

/* Runs the script once, within `limits`; NULL with e set (message and
 * traceback) when it fails, goes over a limit or declares no sweep. */
ast_sweep *ast_sweep_load_limited(const char *script, const ast_sweep_limits *limits, ast_error *e);
/* The same with ast_sweep_limits_from_env. */
ast_sweep *ast_sweep_load(const char *script, ast_error *e);
/* The sweep `alphast-run sweep -m CONFIG OVERRIDES...` declares: what a
 * script named after the config would, with
 *   alphast.sweep{base = CONFIG, configs = alphast.grid{OVERRIDES...}}
 * (the same runs, ids and directory). Overrides are KEY=V1,V2,...,
 * KEY=range(...), KEY=choice(...), single values and ~KEY; `script` is
 * the config's path. NULL with e set (no traceback: no script). */
ast_sweep *ast_sweep_grid(const char *config, const char *const *overrides, int n, const ast_sweep_limits *limits,
                          ast_error *e);
void ast_sweep_free(ast_sweep *s);

/* The run with this id, NULL if the script has none. */
const ast_sweep_run *ast_sweep_find(const ast_sweep *s, const char *id);

/* Points tc's schedule at run `id`'s Lua functions; the sweep must outlive
 * the training. 0, or -1 with e set (unknown id: the script changed). */
int ast_sweep_bind_schedule(ast_sweep *s, const char *id, ast_train_config *tc, ast_error *e);

/* Run `id`'s schedule evaluated at every optimiser step of its config
 * (training.epochs x steps_per_epoch), saved to path as a schedule table
 * (train/schedule_table.h) for its training process. 0, or -1 with e set
 * (a schedule function failed: the run fails). */
int ast_sweep_tabulate_schedule(ast_sweep *s, const char *id, const char *path, ast_error *e);

#endif
