/* What the files of the Lua sweep module share (sweep_lua.c: the state and
 * configs; sweep_values.c: Lua values as YAML text and overrides;
 * sweep_points.c: grid/list/random; sweep_plan.c: sweep{} into runs;
 * sweep_schedule.c: schedules for the trainer). Not a public interface. */
#ifndef ALPHAST_SWEEP_INTERNAL_H
#define ALPHAST_SWEEP_INTERNAL_H

#include <lauxlib.h>
#include <lua.h>

#include "config/config.h"
#include "sweep/sweep.h"

#define SWEEP_CONFIG_MT "alphast.config" /* config objects: {file=, overrides={...}} */
#define SWEEP_DIST_MT "alphast.dist"     /* a.uniform(...) etc.: {kind=, lo=, hi=} */
#define SWEEP_RUNS_KEY "alphast.runs"    /* registry: the runs sweep{} built */

/* How to lift the restriction, for the errors of what a restricted script may not do. */
#define TRUST_HINT                                                                                              \
    "for a script you trust, run `alphast-run sweep --trust-script` (train: --trust-script) or set "           \
    "ALPHAST_TRUST_SWEEP=1 (docs/sweeps.md)"

struct ast_sweep_lua {
    lua_State *L;
    char *dir;        /* the script's directory, for relative config paths and require */
    const char *script; /* the sweep's script path, for messages */
    int schedule_ref; /* registry ref of the bound run's schedule table */
    ast_sweep_limits limits;
    /* The phase of script code now running (sweep_phase_begin): its name for
     * messages, or NULL between phases, when no Lua code may run. */
    const char *phase;
    const char *budget_var; /* the environment variable that raises the budget */
    int64_t budget, used;   /* VM instructions allowed in the phase and run so far */
    size_t heap;            /* bytes the Lua state holds */
    int over_memory;        /* an allocation in the phase was refused */
};

/* ---- the sandbox (sweep_sandbox.c) ------------------------------------------- */

/* A Lua state whose memory and instructions are counted in sl. */
lua_State *sweep_new_state(ast_sweep_lua *sl);
/* The restricted standard library (or the full one when sl->limits.trusted)
 * and the alphast module. */
void sweep_open_libs(ast_sweep_lua *sl, lua_CFunction open_module);
/* Script code may run from here: at most `budget` VM instructions (then an
 * error naming `what` and budget_var), limits.memory_bytes of heap and
 * `seconds` of wall time (then the process exits with a message). */
void sweep_phase_begin(ast_sweep_lua *sl, const char *what, int64_t budget, const char *budget_var, double seconds);
/* Ends the phase; adds the memory hint to e when `failed` for memory. */
void sweep_phase_end(ast_sweep_lua *sl, int failed, ast_error *e);

/* Closes sl's Lua state within the script's memory cap and wall clock:
 * finalizers run there, with hooks off. */
void sweep_close_state(ast_sweep_lua *sl);
/* Pushes "file:line: " of the innermost Lua function running, or "". */
void sweep_push_where(lua_State *L);

/* The sweep being loaded (sweep{} fills it). */
ast_sweep *sweep_of(lua_State *L);

/* lua_pcall with a message handler that appends the traceback; on error
 * the message goes to e and the stack loses the function and arguments. */
int sweep_pcall(lua_State *L, int nargs, int nresults, ast_error *e);

/* Raises a Lua error located at the script line calling the module. */
int sweep_raise(lua_State *L, const ast_error *e);

/* ---- config objects ----------------------------------------------------- */

/* Is the value at idx a table with the metatable registered as mt? */
int sweep_is(lua_State *L, int idx, const char *mt);
/* Pushes a config object for `file` with the overrides array at ovr_idx. */
void sweep_push_config(lua_State *L, const char *file, int ovr_idx);
/* Pushes the absolute path of a config named in the script (relative to
 * the script, else a shipped configs/NAME.yaml); raises if there is none. */
void sweep_push_config_path(lua_State *L, const char *name);
/* Loads file and applies the override strings of the array at ovr_idx;
 * NULL with e set on any error. Never raises. */
ast_cfg *sweep_resolve(lua_State *L, const char *file, int ovr_idx, ast_error *e);

/* ---- values --------------------------------------------------------------- */

/* Pushes the YAML text of a string (as written), number, boolean or table
 * (flow style, keys sorted); raises for other types. */
void sweep_push_yaml(lua_State *L, int idx);
/* Pushes an array of "KEY=VALUE" strings from an override table: its array
 * part (Hydra strings, in order), then its string keys sorted, skipping
 * `name` and `schedule`; `seed` means seed.value. */
void sweep_push_overrides(lua_State *L, int idx);
/* Pushes an array of the table's string keys, sorted; raises on other
 * keys outside the array part. */
void sweep_push_sorted_keys(lua_State *L, int idx);
/* Appends the array at src to the array at dst. */
void sweep_append(lua_State *L, int dst, int src);
/* Pushes a run name from an override table: its "KEY=VALUE" strings with
 * each key shortened to its last component, joined by ","; `none` if it
 * has no overrides. */
void sweep_push_name(lua_State *L, int idx, const char *none);
/* The candidate closest to `word`, for "did you mean" hints, or NULL. */
const char *sweep_near(const char *word, const char *const *candidates);

/* ---- module functions ------------------------------------------------------ */

int sweep_grid(lua_State *L);
int sweep_list(lua_State *L);
int sweep_random(lua_State *L);
int sweep_uniform(lua_State *L);
int sweep_log_uniform(lua_State *L);
int sweep_int(lua_State *L);
int sweep_declare(lua_State *L); /* alphast.sweep{...} */
/* 0 if `name` (len bytes) can name the sweep's directory, else -1 with e
 * saying why. */
int sweep_check_name(const char *name, size_t len, ast_error *e);

/* Checks a schedule table (keys and value types); raises with `where`. */
void sweep_check_schedule(lua_State *L, int idx, const char *where);
/* Feeds a schedule table's code and constants into a hash. */
uint64_t sweep_hash_schedule(lua_State *L, int idx, uint64_t h);

#endif
