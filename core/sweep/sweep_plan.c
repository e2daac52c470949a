/* alphast.sweep{...}: the configs crossed with the seeds become runs, each
 * resolved (base file + overrides + seed) to its YAML and named by the
 * hash of that YAML and its schedule's code. Everything is checked here,
 * so a bad key fails at the script line of the sweep{} call. */
#include <stdlib.h>
#include <string.h>

#include "sweep_internal.h"

#define MAX_NAME 80
#define MAX_SWEEP_NAME 200
#define AST_STR_(x) #x
#define AST_STR(x) AST_STR_(x)

static const char *const sweep_fields[] = {"name",    "base",   "configs", "seeds",    "schedule",
                                           "jobs",    "threads", "report", "executor", NULL};

static void check_fields(lua_State *L, int t)
{
    sweep_push_sorted_keys(L, t);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
        lua_rawgeti(L, -1, i);
        const char *key = lua_tostring(L, -1);
        int known = 0;
        for (int k = 0; sweep_fields[k]; k++) known |= !strcmp(key, sweep_fields[k]);
        const char *near = known ? NULL : sweep_near(key, sweep_fields);
        if (!known)
            luaL_error(L, "sweep: unknown field '%s'%s%s%s", key, near ? "; did you mean '" : "", near ? near : "",
                       near ? "'?" : "");
        lua_pop(L, 1);
    }
    if (lua_rawlen(L, t)) luaL_error(L, "sweep: fields are named (sweep{base = ..., configs = {...}})");
    lua_pop(L, 1);
}

static int positive_field(lua_State *L, int t, const char *key)
{
    lua_getfield(L, t, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return 0;
    }
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > 4096)
        luaL_error(L, "sweep: %s must be a positive integer", key);
    int v = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    return v;
}

/* One Slurm option of an executor table: a string, a whole number or, for
 * sbatch, a list of strings; checked as the command line's would be. */
static void read_slurm_option(lua_State *L, int idx, const char *key, ast_sweep *s)
{
    ast_error e = {""};
    int rc = 0;
    if (lua_type(L, idx) == LUA_TNUMBER || lua_type(L, idx) == LUA_TSTRING) { /* 1.5 fails as text, with the reason */
        rc = ast_slurm_opt_set(&s->slurm_opts, key, lua_tostring(L, idx), &e);
    } else if (!strcmp(key, "sbatch") && lua_istable(L, idx) && lua_rawlen(L, idx)) {
        for (lua_Integer i = 1; !rc && i <= (lua_Integer)lua_rawlen(L, idx); i++) {
            if (lua_rawgeti(L, idx, i) != LUA_TSTRING) luaL_error(L, "sweep: executor.sbatch[%d] is not a string", (int)i);
            rc = ast_slurm_opt_set(&s->slurm_opts, key, lua_tostring(L, -1), &e);
            lua_pop(L, 1);
        }
    } else {
        luaL_error(L, "sweep: executor.%s must be a %s, not a %s", key,
                   !strcmp(key, "sbatch") ? "string or a list of strings" : "string or a whole number", luaL_typename(L, idx));
    }
    if (rc < 0) luaL_error(L, "sweep: executor.%s: %s", key, e.msg);
}

static int executor_kind(lua_State *L, int idx, const char *where)
{
    const char *kind = lua_type(L, idx) == LUA_TSTRING ? lua_tostring(L, idx) : NULL;
    if (kind && (!strcmp(kind, "local") || !strcmp(kind, "slurm"))) return !strcmp(kind, "slurm");
    return luaL_error(L, "sweep: %s must be \"local\" or \"slurm\"", where);
}

/* executor.gpus = {0, 1, ...}: the local executor's GPUs (docs/gpu.md). */
static void read_gpus(lua_State *L, int idx, ast_sweep *s)
{
    lua_Integer n = lua_istable(L, idx) ? (lua_Integer)lua_rawlen(L, idx) : 0;
    if (n < 1 || n > 4096) luaL_error(L, "sweep: executor.gpus must be a list of GPU numbers, {0, 1, ...}");
    free(s->gpus);
    s->gpus = ast_xcalloc((size_t)n, sizeof *s->gpus);
    s->n_gpus = (int)n;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, idx, i);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0 || lua_tointeger(L, -1) > 4095)
            luaL_error(L, "sweep: executor.gpus[%d] must be a GPU number (0, 1, ... as nvidia-smi -L lists them)", (int)i);
        s->gpus[i - 1] = (int)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
}

/* executor = "local" | "slurm" | {kind = "slurm", partition = ..., time = ..., ...} (docs/cluster.md);
 * a local one's table may give gpus and runs_per_gpu (docs/gpu.md). */
static void read_executor(lua_State *L, int t, ast_sweep *s)
{
    static const char *const keys[] = {"kind", "partition", "time", "mem", "cpus_per_task", "tasks", "sbatch",
                                       "gpus", "runs_per_gpu", NULL};
    int type = lua_getfield(L, t, "executor"), ex = lua_gettop(L);
    if (type == LUA_TSTRING) s->slurm = executor_kind(L, ex, "executor");
    else if (type != LUA_TNIL && type != LUA_TTABLE)
        luaL_error(L, "sweep: executor must be \"local\", \"slurm\" or a table {kind = \"slurm\", partition = ...}");
    if (type != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    if (lua_rawlen(L, ex)) luaL_error(L, "sweep: executor options are named (executor = {kind = \"slurm\", time = \"4:00:00\"})");
    sweep_push_sorted_keys(L, ex);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
        lua_rawgeti(L, -1, i);
        const char *key = lua_tostring(L, -1);
        if (ast_name_index(key, keys, 9) < 0) {
            const char *near = sweep_near(key, keys);
            luaL_error(L, "sweep: executor: unknown option '%s'%s%s%s (known: kind, partition, time, mem, cpus_per_task, "
                       "tasks, sbatch, gpus, runs_per_gpu)", key, near ? "; did you mean '" : "", near ? near : "",
                       near ? "'?" : "");
        }
        lua_getfield(L, ex, key);
        if (!strcmp(key, "kind")) s->slurm = executor_kind(L, -1, "executor.kind");
        else if (!strcmp(key, "gpus")) read_gpus(L, lua_gettop(L), s);
        else if (!strcmp(key, "runs_per_gpu")) s->runs_per_gpu = positive_field(L, ex, key);
        else read_slurm_option(L, lua_gettop(L), key, s);
        lua_pop(L, 2);
    }
    lua_pop(L, 2);
    /* The batch script runs on the cluster as the submitter: options that
     * set its files or environment are code execution by other means. */
    ast_error e = {""};
    if (!s->trusted && ast_slurm_check_resources_only(&s->slurm_opts, &e) < 0)
        luaL_error(L, "sweep: executor.sbatch: %s; a restricted sweep script may give only those; " TRUST_HINT, e.msg);
}

static void read_options(lua_State *L, int t, ast_sweep *s)
{
    read_executor(L, t, s);
    s->jobs = positive_field(L, t, "jobs");
    s->threads = positive_field(L, t, "threads");
    lua_getfield(L, t, "report");
    s->report = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (lua_getfield(L, t, "name") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "sweep: name must be a string, not a %s", luaL_typename(L, -1));
        size_t len;
        const char *name = lua_tolstring(L, -1, &len);
        ast_error e = {""};
        if (sweep_check_name(name, len, &e) < 0) luaL_error(L, "sweep: %s", e.msg);
        free(s->name);
        s->name = ast_xstrdup(name);
    }
    lua_pop(L, 1);
}

/* Why a name cannot be a directory below sweeps/, or NULL: '..' would put
 * the sweep's runs and ledger one level up, over whatever is there. */
static const char *name_problem(const char *name, size_t len)
{
    if (!len) return "is empty";
    if (strlen(name) != len) return "contains a NUL byte";
    if (!strcmp(name, ".") || !strcmp(name, "..")) return "is '.' or '..', an existing directory";
    if (strchr(name, '/')) return "contains '/'";
    if (ast_cfg_bad_text(name, len) >= 0) return "is not valid UTF-8 text or contains control characters";
    if (len > MAX_SWEEP_NAME) return "is longer than " AST_STR(MAX_SWEEP_NAME) " bytes";
    return NULL;
}

int sweep_check_name(const char *name, size_t len, ast_error *e)
{
    const char *why = name_problem(name, len);
    if (!why) return 0;
    char shown[128];
    ast_cfg_escape(name, shown, sizeof shown);
    ast_error_set(e, "name '%s' %s; the name is the sweep's directory (sweeps/<name>): use letters, digits, '-', '_' "
                  "and '.', not '.' or '..'", shown, why);
    return -1;
}

/* Config names reach the ledger (JSON) and messages: text only. */
static void check_config_name(lua_State *L, int idx)
{
    size_t len;
    const char *name = lua_tolstring(L, idx, &len);
    if (name && strlen(name) == len && ast_cfg_bad_text(name, len) < 0) return;
    char shown[128];
    ast_cfg_escape(name ? name : "", shown, sizeof shown);
    luaL_error(L, "sweep: config name '%s' is not valid UTF-8 text or contains control characters; name it in UTF-8",
               shown);
}

/* Pushes the base file (or nil) and its overrides. */
static void push_base(lua_State *L, int t)
{
    lua_getfield(L, t, "base");
    if (sweep_is(L, -1, SWEEP_CONFIG_MT)) {
        lua_getfield(L, -1, "file");
        lua_getfield(L, -2, "overrides");
    } else if (lua_type(L, -1) == LUA_TSTRING) {
        sweep_push_config_path(L, lua_tostring(L, -1));
        lua_newtable(L);
    } else if (lua_isnil(L, -1)) {
        lua_pushnil(L);
        lua_newtable(L);
    } else {
        luaL_error(L, "sweep: base must be a config (alphast.config) or a config file name");
    }
    lua_remove(L, -3);
}

/* Appends {name=, file=, overrides=, schedule=} to the array at out. */
static void add_config(lua_State *L, int out, const char *name, int file, int base_ovr, int entry)
{
    lua_createtable(L, 0, 4);
    lua_pushstring(L, name);
    lua_setfield(L, -2, "name");
    lua_newtable(L);
    if (sweep_is(L, entry, SWEEP_CONFIG_MT)) {
        lua_getfield(L, entry, "overrides");
        sweep_append(L, -2, -1);
        lua_pop(L, 1);
        lua_getfield(L, entry, "file");
    } else {
        if (lua_isnil(L, file)) luaL_error(L, "sweep: configs.%s needs a base config; set sweep{base = ...}", name);
        sweep_append(L, -1, base_ovr);
        sweep_push_overrides(L, entry);
        sweep_append(L, -2, -1);
        lua_pop(L, 1);
        lua_pushvalue(L, file);
        lua_getfield(L, entry, "schedule");
        lua_setfield(L, -4, "schedule");
    }
    lua_setfield(L, -3, "file");
    lua_setfield(L, -2, "overrides");
    lua_rawseti(L, out, (lua_Integer)lua_rawlen(L, out) + 1);
}

/* Pushes the sweep's configs as an array of add_config entries: a list of
 * points in order, a map name -> overrides/config sorted by name, or the
 * base alone. */
static void push_configs(lua_State *L, int t, int file, int base_ovr)
{
    lua_newtable(L);
    int out = lua_gettop(L);
    lua_getfield(L, t, "configs");
    int configs = lua_gettop(L);
    if (lua_isnil(L, configs)) {
        lua_newtable(L);
        add_config(L, out, "base", file, base_ovr, lua_gettop(L));
        lua_pop(L, 2);
        return;
    }
    if (!lua_istable(L, configs) || sweep_is(L, configs, SWEEP_CONFIG_MT))
        luaL_error(L, "sweep: configs must be a table: {Name = {overrides}} or alphast.grid/list/random{...}");
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, configs); i++) {
        lua_rawgeti(L, configs, i);
        int point = lua_gettop(L);
        if (!lua_istable(L, point)) luaL_error(L, "sweep: configs[%d] is a %s, not a point", (int)i, luaL_typename(L, point));
        if (lua_getfield(L, point, "name") == LUA_TNIL) {
            lua_pop(L, 1);
            sweep_push_name(L, point, "base");
        }
        if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "sweep: configs[%d].name must be a string", (int)i);
        check_config_name(L, -1);
        add_config(L, out, lua_tostring(L, -1), file, base_ovr, point);
        lua_pop(L, 2);
    }
    sweep_push_sorted_keys(L, configs);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
        lua_rawgeti(L, -1, i);
        lua_pushvalue(L, -1);
        lua_rawget(L, configs);
        check_config_name(L, -2);
        if (!lua_istable(L, -1)) luaL_error(L, "sweep: configs.%s must be an override table or a config", lua_tostring(L, -2));
        add_config(L, out, lua_tostring(L, -2), file, base_ovr, lua_gettop(L));
        lua_pop(L, 2);
    }
    lua_pop(L, 2);
}

static void copy_fields(lua_State *L, int from, int to)
{
    if (lua_isnil(L, from)) return;
    lua_pushnil(L);
    while (lua_next(L, from)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, to);
    }
}

/* Pushes the config's schedule over the sweep's (per key), or nil. */
static void push_schedule(lua_State *L, int sweep_sched, int config)
{
    lua_getfield(L, config, "schedule");
    int own = lua_gettop(L);
    if (lua_isnil(L, own) && lua_isnil(L, sweep_sched)) return;
    if (!lua_isnil(L, own)) {
        lua_getfield(L, config, "name");
        const char *where = lua_pushfstring(L, "configs.%s.schedule", lua_tostring(L, -1));
        sweep_check_schedule(L, own, where);
        lua_pop(L, 2);
    }
    lua_newtable(L);
    copy_fields(L, sweep_sched, own + 1);
    copy_fields(L, own, own + 1);
    lua_remove(L, own);
}

static void push_id(lua_State *L, const char *name, uint64_t hash)
{
    /* A directory name without shell metacharacters: YAML flow values
     * ({name: moe, top_k: 2}) read as name-moe,top_k-2. */
    char clean[MAX_NAME + 1];
    size_t n = 0;
    for (const char *p = name; *p && n < MAX_NAME; p++) {
        char ch = *p;
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || strchr("._,=+-", ch);
        if (strchr("{}[] \"'", ch)) continue;
        clean[n++] = ok ? ch : ch == ':' ? '-' : '_';
    }
    clean[n] = 0;
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
    lua_pushfstring(L, "%s-%s", n ? clean : "run", hex);
}

/* Resolves config entry `c` with the overrides at ovr into a run table
 * appended to runs; raises if it does not resolve or repeats a run. */
static void add_run(lua_State *L, int runs, int c, int ovr, int schedule, int by_id)
{
    lua_getfield(L, c, "name");
    lua_getfield(L, c, "file");
    const char *name = lua_tostring(L, -2), *file = lua_tostring(L, -1);
    ast_error e = {""};
    ast_cfg *cfg = sweep_resolve(L, file, ovr, &e);
    char *yaml = cfg && ast_cfg_check_supported(cfg, &e) == 0 ? ast_cfg_dump_string(cfg, &e) : NULL;
    if (!yaml) {
        ast_cfg_free(cfg);
        luaL_error(L, "sweep: configs.%s: %s", name, e.msg);
    }
    int64_t seed = ast_cfg_int(cfg, "seed.value");
    const char *device = ast_cfg_str(cfg, "device");
    lua_createtable(L, 0, 9);
    lua_pushstring(L, yaml);
    lua_setfield(L, -2, "yaml");
    lua_pushstring(L, device ? device : "cpu"); /* the local executor places runs on GPUs by it */
    lua_setfield(L, -2, "device");
    ast_cfg_free(cfg);
    uint64_t hash = ast_fnv1a(AST_FNV_OFFSET, yaml, strlen(yaml));
    free(yaml);
    if (!lua_isnil(L, schedule)) hash = sweep_hash_schedule(L, schedule, hash);
    push_id(L, name, hash);
    if (lua_getfield(L, by_id, lua_tostring(L, -1)) != LUA_TNIL)
        luaL_error(L, "sweep: configs.%s (seed %d) repeats run %s (same config, seed and schedule as configs.%s)", name,
                   (int)seed, lua_tostring(L, -2), lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_pushvalue(L, -4);
    lua_setfield(L, by_id, lua_tostring(L, -2));
    lua_setfield(L, -2, "id");
    lua_pushinteger(L, (lua_Integer)hash);
    lua_setfield(L, -2, "hash");
    lua_pushinteger(L, (lua_Integer)seed);
    lua_setfield(L, -2, "seed");
    lua_pushvalue(L, -3);
    lua_setfield(L, -2, "config_name");
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, "base");
    lua_pushvalue(L, ovr);
    lua_setfield(L, -2, "overrides");
    lua_pushvalue(L, schedule);
    lua_setfield(L, -2, "schedule");
    lua_rawseti(L, runs, (lua_Integer)lua_rawlen(L, runs) + 1);
    lua_pop(L, 2);
}

static int sets_seed(lua_State *L, int ovr)
{
    int yes = 0;
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, ovr); i++) {
        lua_rawgeti(L, ovr, i);
        const char *s = lua_tostring(L, -1);
        yes |= !strncmp(s + strspn(s, "+"), "seed.value=", 11);
        lua_pop(L, 1);
    }
    return yes;
}

/* Pushes the seeds array, or nil; raises unless it holds integers. */
static void push_seeds(lua_State *L, int t)
{
    lua_getfield(L, t, "seeds");
    if (lua_isnil(L, -1)) return;
    if (!lua_istable(L, -1) || !lua_rawlen(L, -1)) luaL_error(L, "sweep: seeds must be a list of integers, e.g. {1, 2, 3}");
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
        if (lua_rawgeti(L, -1, i) != LUA_TNUMBER || !lua_isinteger(L, -1)) luaL_error(L, "sweep: seeds[%d] is not an integer", (int)i);
        lua_pop(L, 1);
    }
}

/* The runs of one config: one per seed, or one if it sets its own seed. */
static void add_runs(lua_State *L, int runs, int c, int seeds, int sched, int by_id)
{
    push_schedule(L, sched, c);
    int schedule = lua_gettop(L);
    lua_getfield(L, c, "overrides");
    int ovr = lua_gettop(L);
    if (lua_isnil(L, seeds) || sets_seed(L, ovr)) {
        add_run(L, runs, c, ovr, schedule, by_id);
    } else {
        for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, seeds); i++) {
            lua_newtable(L);
            sweep_append(L, -1, ovr);
            lua_rawgeti(L, seeds, i);
            lua_pushfstring(L, "seed.value=%I", (LUAI_UACINT)lua_tointeger(L, -1));
            lua_rawseti(L, -3, (lua_Integer)lua_rawlen(L, -3) + 1);
            lua_pop(L, 1);
            add_run(L, runs, c, lua_gettop(L), schedule, by_id);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 2);
}

int sweep_declare(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    if (lua_getfield(L, LUA_REGISTRYINDEX, SWEEP_RUNS_KEY) != LUA_TNIL) luaL_error(L, "sweep: a script declares one sweep");
    lua_pop(L, 1);
    check_fields(L, 1);
    read_options(L, 1, sweep_of(L));
    lua_getfield(L, 1, "schedule");
    int sched = lua_gettop(L);
    if (!lua_isnil(L, sched)) sweep_check_schedule(L, sched, "schedule");
    push_base(L, 1);
    int file = lua_gettop(L) - 1, base_ovr = lua_gettop(L);
    push_seeds(L, 1);
    int seeds = lua_gettop(L);
    push_configs(L, 1, file, base_ovr);
    int configs = lua_gettop(L);
    lua_newtable(L);
    int runs = lua_gettop(L);
    lua_newtable(L);
    int by_id = lua_gettop(L); /* id -> config name, to catch repeats */
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, configs); i++) {
        lua_rawgeti(L, configs, i);
        add_runs(L, runs, lua_gettop(L), seeds, sched, by_id);
        lua_pop(L, 1);
    }
    lua_pushvalue(L, runs);
    lua_setfield(L, LUA_REGISTRYINDEX, SWEEP_RUNS_KEY);
    return 0;
}
