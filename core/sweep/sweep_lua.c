/* The Lua state of a sweep script: the `alphast` module, config objects
 * (a YAML file plus override strings, resolved on demand so they never
 * share state), protected calls with tracebacks, and loading a script
 * into an ast_sweep. */
#include <errno.h>
#include <libgen.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sweep_internal.h"

#define SWEEP_SELF_KEY "alphast.self"

ast_sweep *sweep_of(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, SWEEP_SELF_KEY);
    ast_sweep *s = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return s;
}

/* The message handler. Lua puts the place of an error in string messages
 * only; error(nil) or error({}) would otherwise say "nil" or "table: 0x..."
 * and nothing of where. */
static int traceback(lua_State *L)
{
    const char *msg = lua_type(L, 1) == LUA_TSTRING ? lua_tostring(L, 1) : NULL;
    if (!msg) {
        sweep_push_where(L);
        msg = lua_pushfstring(L, "%serror with a %s value instead of a message; call error with a string "
                              "(error(\"what went wrong\"))", lua_tostring(L, -1), luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

int sweep_pcall(lua_State *L, int nargs, int nresults, ast_error *e)
{
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, traceback);
    lua_insert(L, base);
    int rc = lua_pcall(L, nargs, nresults, base);
    lua_remove(L, base);
    if (rc == LUA_OK) return 0;
    ast_error_set(e, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
}

int sweep_raise(lua_State *L, const ast_error *e) { return luaL_error(L, "%s", e->msg); }

/* ---- config objects ---------------------------------------------------- */

int sweep_is(lua_State *L, int idx, const char *mt)
{
    if (!lua_getmetatable(L, idx)) return 0;
    luaL_getmetatable(L, mt);
    int yes = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return yes;
}

void sweep_push_config(lua_State *L, const char *file, int ovr_idx)
{
    ovr_idx = lua_absindex(L, ovr_idx);
    lua_createtable(L, 0, 2);
    lua_pushstring(L, file);
    lua_setfield(L, -2, "file");
    lua_pushvalue(L, ovr_idx);
    lua_setfield(L, -2, "overrides");
    luaL_setmetatable(L, SWEEP_CONFIG_MT);
}

/* An existing file that is not a regular one: reading a FIFO or a device
 * blocks for as long as no one writes to it, where no instruction budget
 * sees it. */
static int special_file(const char *path)
{
    struct stat st;
    return !stat(path, &st) && !S_ISREG(st.st_mode);
}

static void check_regular(lua_State *L, const char *name, const char *path)
{
    if (special_file(path))
        luaL_error(L, "config '%s': %s is not a regular file (a FIFO, device or directory); name a YAML file", name,
                   path);
}

void sweep_push_config_path(lua_State *L, const char *name)
{
    const ast_sweep *s = sweep_of(L);
    if (name[0] == '/')
        lua_pushstring(L, name);
    else
        lua_pushfstring(L, "%s/%s", s->lua->dir, name);
    if (!access(lua_tostring(L, -1), R_OK) || strchr(name, '/')) {
        check_regular(L, name, lua_tostring(L, -1));
        return;
    }
    char shipped[4096], rel[1024];
    snprintf(rel, sizeof rel, "configs/%s%s", name, strstr(name, ".yaml") ? "" : ".yaml");
    ast_shipped_file(rel, shipped, sizeof shipped);
    if (access(shipped, R_OK))
        luaL_error(L, "config '%s': no such file next to the script (%s) nor a shipped %s", name, lua_tostring(L, -1), rel);
    lua_pop(L, 1);
    lua_pushstring(L, shipped);
}

ast_cfg *sweep_resolve(lua_State *L, const char *file, int ovr_idx, ast_error *e)
{
    ast_cfg *cfg = ast_cfg_load_file(file, e);
    lua_Integer n = cfg ? (lua_Integer)lua_rawlen(L, ovr_idx) : 0;
    for (lua_Integer i = 1; cfg && i <= n; i++) {
        lua_rawgeti(L, ovr_idx, i);
        const char *assignment = lua_tostring(L, -1);
        lua_pop(L, 1); /* the string stays alive in the table */
        if (ast_cfg_override(cfg, assignment, e) < 0) {
            ast_cfg_free(cfg);
            cfg = NULL;
        }
    }
    return cfg;
}

/* Resolves the config object at idx and raises if it does not load. */
static void check_config(lua_State *L, int idx)
{
    lua_getfield(L, idx, "file");
    lua_getfield(L, idx, "overrides");
    ast_error e = {""};
    ast_cfg *cfg = sweep_resolve(L, lua_tostring(L, -2), lua_absindex(L, -1), &e);
    lua_pop(L, 2);
    if (!cfg) sweep_raise(L, &e);
    ast_cfg_free(cfg);
}

/* alphast.config(path) */
static int l_config(lua_State *L)
{
    sweep_push_config_path(L, luaL_checkstring(L, 1));
    lua_newtable(L);
    sweep_push_config(L, lua_tostring(L, -2), -1);
    check_config(L, lua_gettop(L));
    return 1;
}

/* alphast.override(config_or_path, {overrides}) */
static int l_override(lua_State *L)
{
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_newtable(L); /* the combined overrides */
    int all = lua_gettop(L);
    if (sweep_is(L, 1, SWEEP_CONFIG_MT)) {
        lua_getfield(L, 1, "file");
        lua_getfield(L, 1, "overrides");
        sweep_append(L, all, -1);
        lua_pop(L, 1);
    } else if (lua_type(L, 1) == LUA_TSTRING) {
        sweep_push_config_path(L, lua_tostring(L, 1));
    } else {
        return luaL_argerror(L, 1, "expected a config (alphast.config) or a config file name");
    }
    sweep_push_overrides(L, 2);
    sweep_append(L, all, -1);
    lua_pop(L, 1);
    sweep_push_config(L, lua_tostring(L, -1), all);
    check_config(L, lua_gettop(L));
    return 1;
}

static int l_config_tostring(lua_State *L)
{
    lua_getfield(L, 1, "file");
    lua_getfield(L, 1, "overrides");
    lua_pushfstring(L, "config(%s, %d overrides)", lua_tostring(L, -2), (int)lua_rawlen(L, -1));
    return 1;
}

static const luaL_Reg module_fns[] = {
    {"config", l_config},         {"override", l_override},       {"grid", sweep_grid},
    {"list", sweep_list},         {"random", sweep_random},       {"uniform", sweep_uniform},
    {"log_uniform", sweep_log_uniform}, {"int", sweep_int},       {"sweep", sweep_declare},
    {NULL, NULL},
};

/* Puts the metatable on top out of getmetatable's reach: a __gc the script
 * put there would make every later config or distribution a finalizer. */
static void seal(lua_State *L)
{
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
}

static int open_module(lua_State *L)
{
    luaL_newmetatable(L, SWEEP_CONFIG_MT);
    seal(L);
    lua_pushcfunction(L, l_config_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_createtable(L, 0, 1); /* methods: cfg:override{...} */
    lua_pushcfunction(L, l_override);
    lua_setfield(L, -2, "override");
    lua_setfield(L, -2, "__index");
    luaL_newmetatable(L, SWEEP_DIST_MT);
    seal(L);
    lua_pop(L, 2);
    luaL_newlib(L, module_fns);
    return 1;
}

/* ---- loading a script -------------------------------------------------- */

static char *string_field(lua_State *L, int idx, const char *key)
{
    lua_getfield(L, idx, key);
    char *s = ast_xstrdup(lua_tostring(L, -1));
    lua_pop(L, 1);
    return s;
}

static void read_run(lua_State *L, int idx, ast_sweep_run *r)
{
    r->config_name = string_field(L, idx, "config_name");
    r->id = string_field(L, idx, "id");
    r->base = string_field(L, idx, "base");
    r->yaml = string_field(L, idx, "yaml");
    r->device = string_field(L, idx, "device");
    lua_getfield(L, idx, "seed");
    r->seed = lua_tointeger(L, -1);
    lua_getfield(L, idx, "hash");
    r->hash = (uint64_t)lua_tointeger(L, -1);
    lua_getfield(L, idx, "schedule");
    r->scheduled = !lua_isnil(L, -1);
    lua_getfield(L, idx, "overrides");
    r->n_overrides = (int)lua_rawlen(L, -1);
    r->overrides = ast_xcalloc((size_t)r->n_overrides + 1, sizeof *r->overrides);
    for (int i = 0; i < r->n_overrides; i++) {
        lua_rawgeti(L, -1, i + 1);
        r->overrides[i] = ast_xstrdup(lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    lua_pop(L, 4);
}

static int read_runs(ast_sweep *s, ast_error *e)
{
    lua_State *L = s->lua->L;
    if (lua_getfield(L, LUA_REGISTRYINDEX, SWEEP_RUNS_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        ast_error_set(e, "%s: declares no sweep; call alphast.sweep{base = ..., configs = {...}} (docs/sweeps.md)",
                      s->script);
        return -1;
    }
    s->n_runs = (int)lua_rawlen(L, -1);
    s->runs = ast_xcalloc((size_t)s->n_runs, sizeof *s->runs);
    for (int i = 0; i < s->n_runs; i++) {
        lua_rawgeti(L, -1, i + 1);
        read_run(L, lua_gettop(L), &s->runs[i]);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return 0;
}

static ast_sweep *sweep_new(const char *abs, const ast_sweep_limits *limits)
{
    ast_sweep *s = ast_xcalloc(1, sizeof *s);
    s->script = ast_xstrdup(abs);
    char *copy = ast_xstrdup(abs), *base = basename(copy), *dot = strrchr(base, '.');
    if (dot && dot != base) *dot = 0;
    s->name = ast_xstrdup(base);
    free(copy);
    s->trusted = limits->trusted;
    s->lua = ast_xcalloc(1, sizeof *s->lua);
    copy = ast_xstrdup(abs);
    s->lua->dir = ast_xstrdup(dirname(copy));
    free(copy);
    s->lua->schedule_ref = LUA_NOREF;
    s->lua->limits = *limits;
    s->lua->script = s->script;
    lua_State *L = s->lua->L = sweep_new_state(s->lua);
    sweep_open_libs(s->lua, open_module);
    lua_pushlightuserdata(L, s);
    lua_setfield(L, LUA_REGISTRYINDEX, SWEEP_SELF_KEY);
    return s;
}

/* Loads and runs the script in one phase, so that reading a huge file
 * counts toward the memory limit too. Text only unless trusted: a binary
 * chunk is unchecked bytecode. */
static int evaluate(ast_sweep *s, const char *script, ast_error *e)
{
    lua_State *L = s->lua->L;
    sweep_phase_begin(s->lua, "the sweep script", s->lua->limits.script_instructions, "ALPHAST_SWEEP_INSTRUCTIONS",
                      s->lua->limits.script_seconds);
    int rc = luaL_loadfilex(L, script, s->trusted ? NULL : "t") == LUA_OK ? 0 : -1;
    if (rc < 0) {
        ast_error_set(e, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    if (rc == 0) rc = sweep_pcall(L, 0, 0, e);
    sweep_phase_end(s->lua, rc < 0, e);
    return rc;
}

/* sweep{name = ...} was checked when the script set it; a name taken from
 * the file name ("..lua" gives ".") is checked here. */
static int check_default_name(const ast_sweep *s, ast_error *e)
{
    ast_error why = {""};
    if (sweep_check_name(s->name, strlen(s->name), &why) == 0) return 0;
    ast_error_set(e, "%s: the sweep's name comes from the file name: %s; or name it with sweep{name = \"...\"}",
                  s->script, why.msg);
    return -1;
}

ast_sweep *ast_sweep_load_limited(const char *script, const ast_sweep_limits *limits, ast_error *e)
{
    char *abs = realpath(script, NULL);
    if (!abs) {
        ast_error_set(e, "%s: cannot open the sweep script: %s", script, strerror(errno));
        return NULL;
    }
    if (special_file(abs)) {
        ast_error_set(e, "%s: not a regular file (a FIFO, device or directory); give the sweep script, a Lua file",
                      script);
        free(abs);
        return NULL;
    }
    ast_sweep *s = sweep_new(abs, limits);
    free(abs);
    if (evaluate(s, script, e) < 0 || read_runs(s, e) < 0 || check_default_name(s, e) < 0) {
        ast_sweep_free(s);
        return NULL;
    }
    return s;
}

/* Is the override seed=... or seed.value=... (+ prefixes aside)? */
static int is_seed_override(const char *s)
{
    s += strspn(s, "+");
    size_t n = strcspn(s, "=");
    return s[n] == '=' && ((n == 4 && !strncmp(s, "seed", 4)) || (n == 10 && !strncmp(s, "seed.value", 10)));
}

/* Pushes the seeds of a seed override as sweep{seeds = ...} takes them;
 * raises unless every value is an integer. */
static void push_seed_values(lua_State *L, const char *override)
{
    ast_cfg_sweep sw;
    ast_error e = {""};
    if (ast_cfg_sweep_parse(override, &sw, &e) < 0) luaL_error(L, "%s", e.msg);
    lua_createtable(L, sw.n, 0);
    for (int k = 0; k < sw.n; k++) {
        char *end;
        errno = 0;
        long long seed = strtoll(sw.values[k], &end, 10);
        if (end == sw.values[k] || *end || errno) {
            lua_pushfstring(L, "%s: '%s' is not an integer seed; give integers, e.g. seed=1,2,3 or seed=range(1,4)",
                            override, sw.values[k]);
            ast_cfg_sweep_free(&sw);
            lua_error(L);
        }
        lua_pushinteger(L, (lua_Integer)seed);
        lua_rawseti(L, -2, k + 1);
    }
    ast_cfg_sweep_free(&sw);
}

/* Splits the overrides array at idx into the grid's overrides (pushed
 * first) and its seeds (pushed next, nil without a seed override): -m's
 * seeds are seeds, as in a script, so the report pools each config's
 * seeds instead of comparing one seed with another. */
static void split_seeds(lua_State *L, int idx)
{
    lua_newtable(L);
    lua_pushnil(L);
    int grid = lua_gettop(L) - 1, seeds = grid + 1;
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, idx); i++) {
        const char *s = (lua_rawgeti(L, idx, i), lua_tostring(L, -1));
        if (!is_seed_override(s)) {
            lua_rawseti(L, grid, (lua_Integer)lua_rawlen(L, grid) + 1);
            continue;
        }
        if (!lua_isnil(L, seeds)) luaL_error(L, "%s: the seeds are given twice; give them once, e.g. seed=range(1,4)", s);
        push_seed_values(L, s);
        lua_replace(L, seeds);
        lua_pop(L, 1);
    }
}

/* grid_main(config, {overrides...}): the script ast_sweep_grid stands for. */
static int grid_main(lua_State *L)
{
    split_seeds(L, 2);
    lua_pushcfunction(L, sweep_grid);
    lua_pushvalue(L, 3);
    lua_call(L, 1, 1);
    lua_createtable(L, 0, 3);
    lua_insert(L, -2);
    lua_setfield(L, -2, "configs");
    lua_pushvalue(L, 4);
    lua_setfield(L, -2, "seeds");
    lua_pushvalue(L, 1);
    lua_setfield(L, -2, "base");
    lua_pushcfunction(L, sweep_declare);
    lua_insert(L, -2);
    lua_call(L, 1, 0);
    return 0;
}

ast_sweep *ast_sweep_grid(const char *config, const char *const *overrides, int n, const ast_sweep_limits *limits,
                          ast_error *e)
{
    char *abs = realpath(config, NULL);
    if (!abs) {
        ast_error_set(e, "%s: cannot open the config: %s; check the path", config, strerror(errno));
        return NULL;
    }
    ast_sweep *s = sweep_new(abs, limits);
    free(abs);
    lua_State *L = s->lua->L;
    sweep_phase_begin(s->lua, "the command-line grid", limits->script_instructions, "ALPHAST_SWEEP_INSTRUCTIONS",
                      limits->script_seconds);
    lua_pushcfunction(L, grid_main);
    lua_pushstring(L, s->script);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushstring(L, overrides[i]);
        lua_rawseti(L, -2, i + 1);
    }
    int rc = lua_pcall(L, 2, 0, 0) == LUA_OK ? 0 : -1;
    if (rc < 0) {
        ast_error_set(e, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
    }
    sweep_phase_end(s->lua, rc < 0, e);
    if (rc < 0 || read_runs(s, e) < 0 || check_default_name(s, e) < 0) {
        ast_sweep_free(s);
        return NULL;
    }
    return s;
}

ast_sweep *ast_sweep_load(const char *script, ast_error *e)
{
    ast_sweep_limits limits;
    if (ast_sweep_limits_from_env(&limits, e) < 0) return NULL;
    return ast_sweep_load_limited(script, &limits, e);
}

void ast_sweep_free(ast_sweep *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_runs; i++) {
        ast_sweep_run *r = &s->runs[i];
        for (int j = 0; j < r->n_overrides; j++) free(r->overrides[j]);
        free(r->overrides), free(r->config_name), free(r->id), free(r->base), free(r->yaml), free(r->device);
    }
    free(s->runs);
    sweep_close_state(s->lua);
    free(s->lua->dir), free(s->lua);
    free(s->script), free(s->name);
    ast_slurm_opts_free(&s->slurm_opts);
    free(s->gpus);
    free(s);
}

const ast_sweep_run *ast_sweep_find(const ast_sweep *s, const char *id)
{
    for (int i = 0; i < s->n_runs; i++)
        if (!strcmp(s->runs[i].id, id)) return &s->runs[i];
    return NULL;
}
