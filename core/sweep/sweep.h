/* alphast/sweep.h: sweeps written in Lua (docs/sweeps.md). A script builds
 * configs from YAML files and overrides, crosses them with seeds and hands
 * the result to alphast.sweep{...}; every point becomes one run = (name,
 * resolved config, seed), identified by a hash, optionally with Lua
 * schedules the training loop calls before each optimiser step.
 *
 * The script runs in an embedded Lua 5.4 state with the `alphast` module
 * (require "alphast", or the global `alphast`). Script errors (syntax,
 * runtime, bad config keys) come back as one message with the Lua traceback
 * ("sweep.lua:12: training.epochs: ...\nstack traceback: ..."). */
#ifndef ALPHAST_SWEEP_H
#define ALPHAST_SWEEP_H

#include <stdint.h>

#include "base/hash.h"
#include "engine/engine.h"
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
    int scheduled;     /* 1 if the run has a schedule (train --schedule SCRIPT:ID) */
} ast_sweep_run;

typedef struct ast_sweep_lua ast_sweep_lua;

typedef struct ast_sweep {
    char *script; /* absolute path */
    char *name;   /* sweep{name=} or the script's base name */
    ast_sweep_run *runs;
    int n_runs;
    int jobs, threads; /* sweep{jobs=, threads=}; 0 when the script leaves them out */
    int report;        /* sweep{report=true} */
    ast_sweep_lua *lua; /* the script's state, alive for its schedules */
} ast_sweep;

/* Runs the script; NULL with e set (message and traceback) when it fails
 * or declares no sweep. */
ast_sweep *ast_sweep_load(const char *script, ast_error *e);
void ast_sweep_free(ast_sweep *s);

/* The run with this id, NULL if the script has none. */
const ast_sweep_run *ast_sweep_find(const ast_sweep *s, const char *id);

/* Points tc's schedule at run `id`'s Lua functions; the sweep must outlive
 * the training. 0, or -1 with e set (unknown id: the script changed). */
int ast_sweep_bind_schedule(ast_sweep *s, const char *id, ast_train_config *tc, ast_error *e);

#endif
