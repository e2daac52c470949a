/* What a sweep script may do (docs/sweeps.md, "What a sweep script may do"):
 * the Lua state's memory allocator with a cap, an instruction budget per
 * evaluation and per schedule call, and the restricted standard library a
 * script gets unless it is trusted.
 *
 * The script comes from a file anyone may hand over, and it runs again in
 * every training process that has a schedule; by default it can compute
 * but not start processes, write files or load native code. */
#include <lualib.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sweep_internal.h"

#define HOOK_EVERY 10000                /* instructions between two looks at the budget */
#define MODULES_KEY "alphast.modules"   /* registry: what a restricted require loaded */

/* ---- limits ------------------------------------------------------------------ */

static ast_sweep_lua *sandbox_of(lua_State *L) { return *(ast_sweep_lua **)lua_getextraspace(L); }

/* Counts toward the cap only while script code runs (sl->phase), so the C
 * side's own bookkeeping between phases never fails for memory. */
static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    ast_sweep_lua *sl = ud;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        sl->heap -= old;
        return NULL;
    }
    if (sl->phase && nsize > old && sl->heap + (nsize - old) > (size_t)sl->limits.memory_bytes) {
        sl->over_memory = 1;
        return NULL; /* Lua collects and retries, then raises "not enough memory" */
    }
    void *p = realloc(ptr, nsize);
    if (p) sl->heap = sl->heap - old + nsize;
    return p;
}

static int panic(lua_State *L)
{
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "alphast: unprotected error in the sweep's Lua state: %s\n", msg ? msg : "(not a string)");
    return 0; /* Lua aborts */
}

lua_State *sweep_new_state(ast_sweep_lua *sl)
{
    lua_State *L = lua_newstate(limited_alloc, sl);
    AST_ASSERT(L, "cannot create a Lua state: out of memory");
    lua_atpanic(L, panic);
    *(ast_sweep_lua **)lua_getextraspace(L) = sl; /* new coroutines copy it */
    return L;
}

void sweep_push_where(lua_State *L)
{
    lua_Debug ar;
    for (int level = 0; lua_getstack(L, level, &ar); level++)
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
            lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
            return;
        }
    lua_pushliteral(L, "");
}

/* Once over budget the hook fires at every instruction, so a pcall in the
 * script that catches the error cannot run on: each instruction after it
 * raises again until the error reaches alphast's own pcall. */
static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    ast_sweep_lua *sl = sandbox_of(L);
    sl->used += lua_gethookcount(L);
    if (sl->phase && sl->used <= sl->budget) return;
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1);
    sweep_push_where(L);
    if (!sl->phase)
        lua_pushliteral(L, "Lua code ran outside the sweep script and its schedules (a __gc finalizer?); remove it");
    else
        lua_pushfstring(L, "%s ran more than %I Lua instructions (an endless loop?); if it needs more, set %s (docs/sweeps.md)",
                        sl->phase, (LUAI_UACINT)sl->budget, sl->budget_var);
    lua_concat(L, 2);
    lua_error(L);
}

/* ---- the wall-clock backstop ------------------------------------------------------------ */

/* The instruction budget cannot stop a C function of the library that
 * runs for ever: string.find(string.rep("a", 20000), ".-.-.-b")
 * backtracks for hours inside one instruction. A thread of its own
 * watches every phase and, when one outlives its deadline, says so and
 * ends the process: there is no way to unwind out of that C code.
 * One phase runs at a time in a process (scripts are not evaluated from
 * several threads at once), so one watchdog serves them all. */
static struct {
    pthread_once_t once;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int armed;                /* a phase is running */
    unsigned long generation; /* which one */
    struct timespec deadline; /* CLOCK_MONOTONIC */
    char message[512];        /* what to say if it passes */
} watchdog = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static int passed(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline->tv_sec || (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

static void *watch(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&watchdog.mu);
    for (;;) {
        while (!watchdog.armed) pthread_cond_wait(&watchdog.cv, &watchdog.mu);
        unsigned long generation = watchdog.generation;
        struct timespec deadline = watchdog.deadline;
        while (watchdog.armed && watchdog.generation == generation && !passed(&deadline))
            pthread_cond_timedwait(&watchdog.cv, &watchdog.mu, &deadline);
        if (watchdog.armed && watchdog.generation == generation) {
            ssize_t ignored = write(STDERR_FILENO, watchdog.message, strlen(watchdog.message));
            (void)ignored;
            _exit(1);
        }
    }
    return NULL;
}

/* The thread blocks every signal, so that SIGINT and SIGCHLD keep reaching
 * the thread that waits for them. */
static void start_watchdog(void)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&watchdog.cv, &attr);
    pthread_condattr_destroy(&attr);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, NULL, watch, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    AST_ASSERT(rc == 0, "cannot start the sweep script's watchdog thread: %s", strerror(rc));
    pthread_detach(t);
}

static void arm_watchdog(const ast_sweep_lua *sl, const char *what, double seconds)
{
    pthread_once(&watchdog.once, start_watchdog);
    pthread_mutex_lock(&watchdog.mu);
    clock_gettime(CLOCK_MONOTONIC, &watchdog.deadline);
    watchdog.deadline.tv_sec += (time_t)seconds;
    watchdog.deadline.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (watchdog.deadline.tv_nsec >= 1000000000L) watchdog.deadline.tv_sec++, watchdog.deadline.tv_nsec -= 1000000000L;
    snprintf(watchdog.message, sizeof watchdog.message,
             "alphast: %s: %s ran for more than %g s, stuck inside a library function (a string pattern that "
             "backtracks without end?); stopped\n", sl->script, what, seconds);
    watchdog.armed = 1;
    watchdog.generation++;
    pthread_cond_signal(&watchdog.cv);
    pthread_mutex_unlock(&watchdog.mu);
}

static void disarm_watchdog(void)
{
    pthread_mutex_lock(&watchdog.mu);
    watchdog.armed = 0;
    pthread_cond_signal(&watchdog.cv);
    pthread_mutex_unlock(&watchdog.mu);
}

/* ---- phases ---------------------------------------------------------------------- */

void sweep_phase_begin(ast_sweep_lua *sl, const char *what, int64_t budget, const char *budget_var, double seconds)
{
    arm_watchdog(sl, what, seconds);
    sl->phase = what;
    sl->budget = budget;
    sl->budget_var = budget_var;
    sl->used = 0;
    sl->over_memory = 0;
    lua_sethook(sl->L, count_hook, LUA_MASKCOUNT, budget < HOOK_EVERY ? (int)budget : HOOK_EVERY);
}

void sweep_phase_end(ast_sweep_lua *sl, int failed, ast_error *e)
{
    if (failed && sl->over_memory && strstr(e->msg, "not enough memory")) {
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        ast_error_set(e, "%s: %s used more than %lld MiB of Lua memory; if it needs more, set ALPHAST_SWEEP_MEMORY_MB "
                      "(docs/sweeps.md)", msg, sl->phase, (long long)(sl->limits.memory_bytes >> 20));
    }
    sl->phase = NULL;
    lua_sethook(sl->L, count_hook, LUA_MASKCOUNT, 1); /* nothing may run between phases */
    disarm_watchdog();
}

void sweep_close_state(ast_sweep_lua *sl)
{
    sweep_phase_begin(sl, "closing the script's Lua state (its __gc finalizers)", sl->limits.script_instructions,
                      "ALPHAST_SWEEP_INSTRUCTIONS", sl->limits.script_seconds);
    lua_close(sl->L);
    sl->L = NULL;
    sl->phase = NULL;
    disarm_watchdog();
}

/* ---- the restricted library -------------------------------------------------- */

/* A function or library a restricted script may not use: the error names
 * it (upvalue 1) and the opt-in. */
static int blocked_call(lua_State *L)
{
    return luaL_error(L, "%s is not available to a sweep script: it runs restricted (no processes, file writing or "
                      "native code); " TRUST_HINT, lua_tostring(L, lua_upvalueindex(1)));
}

static void push_blocked(lua_State *L, const char *name)
{
    lua_pushstring(L, name);
    lua_pushcclosure(L, blocked_call, 1);
}

/* __index of a restricted library: a name the full library has (upvalue 2,
 * a set) is refused by name; any other is nil, as in the full library. */
static int blocked_index(lua_State *L)
{
    const char *key = lua_tostring(L, 2);
    if (!key || lua_getfield(L, lua_upvalueindex(2), key) == LUA_TNIL) return 0;
    return luaL_error(L, "%s.%s is not available to a sweep script: it runs restricted (no processes, file writing "
                      "or native code); " TRUST_HINT, lua_tostring(L, lua_upvalueindex(1)), key);
}

/* Replaces the library table on top of the stack (the full one) by one
 * with only `keep`, whose other names raise; sets it as global `name`. */
static void restrict_library(lua_State *L, const char *name, const char *const *keep)
{
    int full = lua_gettop(L);
    lua_newtable(L); /* the restricted library */
    lua_newtable(L); /* its metatable */
    lua_pushstring(L, name);
    lua_newtable(L); /* the names refused */
    for (lua_pushnil(L); lua_next(L, full); lua_pop(L, 1)) {
        int kept = 0;
        for (int i = 0; keep && keep[i]; i++) kept |= lua_type(L, -2) == LUA_TSTRING && !strcmp(lua_tostring(L, -2), keep[i]);
        lua_pushvalue(L, -2);
        if (kept)
            lua_pushvalue(L, -2), lua_rawset(L, full + 1);
        else
            lua_pushboolean(L, 1), lua_rawset(L, full + 4);
    }
    lua_pushcclosure(L, blocked_index, 2);
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable"); /* getmetatable cannot reach the set */
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setglobal(L, name);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_insert(L, -2);
    lua_setfield(L, -2, name); /* the full library leaves the registry too */
    lua_pop(L, 1);
    lua_remove(L, full);
}

/* Calls the function a wrapper stands for (its upvalue 1) with the
 * wrapper's arguments; returns its results. */
static int call_wrapped(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* Opens a standard library without making it global and leaves it on the stack. */
static void open_quietly(lua_State *L, const char *name, lua_CFunction open)
{
    luaL_requiref(L, name, open, 0);
}

/* Reading is allowed, but only regular files outside /proc, /sys and /dev:
 * a FIFO, a terminal or /proc/kmsg would block the script where no
 * instruction count can stop it. */
static void check_readable(lua_State *L, const char *fn, const char *path)
{
    struct stat st;
    if (stat(path, &st)) return; /* missing: the library says so */
    char *real = realpath(path, NULL);
    int special = !real || !strncmp(real, "/proc/", 6) || !strncmp(real, "/sys/", 5) || !strncmp(real, "/dev/", 5);
    free(real);
    if (special || !S_ISREG(st.st_mode))
        luaL_error(L, "%s('%s'): a restricted sweep script reads regular files only (not devices, FIFOs, /proc or "
                   "/sys); " TRUST_HINT, fn, path);
}

/* io.open(path [, "r" | "rb"]): upvalue 1 is the full library's io.open. */
static int restricted_open(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1), *mode = luaL_optstring(L, 2, "r");
    if (strcmp(mode, "r") && strcmp(mode, "rb"))
        return luaL_error(L, "io.open('%s', '%s'): a restricted sweep script opens files for reading only (mode 'r'); "
                          TRUST_HINT, path, mode);
    check_readable(L, "io.open", path);
    lua_settop(L, 2);
    return call_wrapped(L);
}

/* io.lines(path, ...): upvalue 1 is the full library's io.lines; without a
 * path it would read standard input. */
static int restricted_lines(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    check_readable(L, "io.lines", path);
    return call_wrapped(L);
}

/* load(chunk [, name [, mode [, env]]]) in text mode: binary chunks are
 * unchecked bytecode, which can crash the interpreter. Upvalue 1: load. */
static int restricted_load(lua_State *L)
{
    const char *mode = luaL_optstring(L, 3, "t");
    if (strcmp(mode, "t"))
        return luaL_error(L, "load: binary chunks (mode '%s') are not available to a sweep script; load Lua source "
                          "(mode 't'); " TRUST_HINT, mode);
    int n = lua_gettop(L) < 3 ? 3 : lua_gettop(L); /* an env given as nil stays nil; none stays none */
    lua_settop(L, n);
    lua_pushliteral(L, "t");
    lua_replace(L, 3);
    return call_wrapped(L);
}

static int has_gc(lua_State *L, int idx)
{
    lua_pushliteral(L, "__gc");
    int has = lua_rawget(L, idx) != LUA_TNIL;
    lua_pop(L, 1);
    return has;
}

/* setmetatable(t, mt) without __gc: Lua runs finalizers with hooks off,
 * so a finalizer that loops would never meet the instruction budget (and
 * may run at any allocation, or when the state closes). Upvalue 1:
 * setmetatable. 5.4 marks an object for finalization only if its
 * metatable has __gc when it is set, so checking here is enough. */
static int restricted_setmetatable(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TTABLE && has_gc(L, 2))
        return luaL_error(L, "setmetatable: __gc finalizers are not available to a sweep script (they run outside "
                          "the instruction budget); " TRUST_HINT);
    return call_wrapped(L);
}

/* getmetatable(v) of tables only (other values have none a script set).
 * Strings share one metatable, and file handles one whose __gc (the io
 * library's, marked on every handle) Lua calls with hooks off: a script
 * that replaced it would run code no budget reaches, and at any allocation
 * or while the state closes. Upvalue 1: getmetatable. */
static int restricted_getmetatable(lua_State *L)
{
    luaL_checkany(L, 1);
    if (lua_type(L, 1) != LUA_TTABLE && lua_getmetatable(L, 1))
        return luaL_error(L, "getmetatable(%s): the metatables of strings and file handles are not available to a "
                          "sweep script (__gc finalizers put there run outside the instruction budget); " TRUST_HINT,
                          luaL_typename(L, 1));
    return call_wrapped(L);
}

static void wrap_field(lua_State *L, int lib, const char *key, lua_CFunction wrapper)
{
    lua_getfield(L, lib, key);
    lua_pushcclosure(L, wrapper, 1);
    lua_setfield(L, lib, key);
}

/* ---- require ------------------------------------------------------------------ */

/* Module names are dotted identifiers, so the file they name stays below
 * the script's directory. */
static int module_name_ok(const char *name)
{
    int start = 1;
    for (const char *p = name; *p; p++) {
        int alpha = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_';
        if (*p == '.' && !start) start = 1;
        else if (alpha || (!start && *p >= '0' && *p <= '9')) start = 0;
        else return 0;
    }
    return *name && !start;
}

/* Loads DIR/a/b.lua for "a.b" (Lua source only) and runs it; pushes its
 * result, or true. Errors go through: they are the script's. */
static void load_module(lua_State *L, const char *name)
{
    const ast_sweep_lua *sl = sandbox_of(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, sl->dir);
    luaL_addchar(&b, '/');
    for (const char *p = name; *p; p++) luaL_addchar(&b, *p == '.' ? '/' : *p);
    luaL_addstring(&b, ".lua");
    luaL_pushresult(&b);
    const char *path = lua_tostring(L, -1);
    check_readable(L, "require", path);
    if (luaL_loadfilex(L, path, "t") != LUA_OK)
        luaL_error(L, "require '%s': %s (a restricted sweep script requires the alphast module, the standard "
                   "libraries and Lua files next to it)", name, lua_tostring(L, -1));
    lua_pushstring(L, name);
    lua_pushvalue(L, -3);
    lua_call(L, 2, 1);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_remove(L, -2);
}

/* require(name): "alphast", the libraries the script has (restricted), or
 * a Lua file from the script's directory, loaded once. */
static int restricted_require(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    static const char *const libs[] = {"string", "table", "math", "utf8", "coroutine", "os", "io", NULL};
    if (!strcmp(name, "alphast")) {
        luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
        lua_getfield(L, -1, "alphast");
        return 1;
    }
    for (int i = 0; libs[i]; i++)
        if (!strcmp(name, libs[i])) return lua_getglobal(L, name), 1;
    if (!module_name_ok(name))
        return luaL_error(L, "require '%s': not a module name; a restricted sweep script requires Lua files next to "
                          "it by dotted names (require \"lib.helpers\" is lib/helpers.lua); " TRUST_HINT, name);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, MODULES_KEY);
    int state = lua_getfield(L, -1, name);
    if (state == LUA_TBOOLEAN && !lua_toboolean(L, -1))
        return luaL_error(L, "require '%s': the module requires itself (directly or through others)", name);
    if (state != LUA_TNIL) return 1;
    lua_pop(L, 1);
    lua_pushboolean(L, 0); /* loading: a cycle raises instead of recursing */
    lua_setfield(L, -2, name);
    load_module(L, name);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    return 1;
}

/* ---- the two environments ----------------------------------------------------------- */

static const char *const os_keep[] = {"time", "clock", "date", "difftime", "getenv", NULL};
static const char *const io_keep[] = {"open", "lines", "type", NULL};

/* Pure libraries in full; os and io cut down; debug and package refused
 * by name (debug.sethook would remove the instruction budget, package
 * loads native code); dofile and loadfile refused, load text-only, no
 * finalizers (setmetatable without __gc, getmetatable of tables only). */
static void open_restricted(lua_State *L)
{
    static const luaL_Reg pure[] = {{LUA_GNAME, luaopen_base}, {LUA_STRLIBNAME, luaopen_string},
                                    {LUA_TABLIBNAME, luaopen_table}, {LUA_MATHLIBNAME, luaopen_math},
                                    {LUA_UTF8LIBNAME, luaopen_utf8}, {LUA_COLIBNAME, luaopen_coroutine},
                                    {NULL, NULL}};
    for (const luaL_Reg *lib = pure; lib->name; lib++) {
        luaL_requiref(L, lib->name, lib->func, 1);
        lua_pop(L, 1);
    }
    open_quietly(L, LUA_OSLIBNAME, luaopen_os);
    restrict_library(L, LUA_OSLIBNAME, os_keep);
    open_quietly(L, LUA_IOLIBNAME, luaopen_io);
    restrict_library(L, LUA_IOLIBNAME, io_keep);
    lua_getglobal(L, LUA_IOLIBNAME);
    wrap_field(L, lua_gettop(L), "open", restricted_open);
    wrap_field(L, lua_gettop(L), "lines", restricted_lines);
    lua_pop(L, 1);
    open_quietly(L, LUA_DBLIBNAME, luaopen_debug);
    restrict_library(L, LUA_DBLIBNAME, NULL);
    open_quietly(L, LUA_LOADLIBNAME, luaopen_package);
    restrict_library(L, LUA_LOADLIBNAME, NULL);
    lua_pushglobaltable(L);
    push_blocked(L, "dofile");
    lua_setfield(L, -2, "dofile");
    push_blocked(L, "loadfile");
    lua_setfield(L, -2, "loadfile");
    wrap_field(L, lua_gettop(L), "load", restricted_load);
    wrap_field(L, lua_gettop(L), "setmetatable", restricted_setmetatable);
    wrap_field(L, lua_gettop(L), "getmetatable", restricted_getmetatable);
    lua_pushcfunction(L, restricted_require);
    lua_setfield(L, -2, "require");
    lua_pop(L, 1);
}

/* The full library, with require also finding Lua files next to the script
 * (package.path starts with DIR/?.lua), as it does restricted. */
static void open_trusted(lua_State *L, const char *dir)
{
    luaL_openlibs(L);
    lua_getglobal(L, LUA_LOADLIBNAME);
    lua_pushfstring(L, "%s/?.lua;", dir);
    lua_getfield(L, -2, "path");
    lua_concat(L, 2);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
}

void sweep_open_libs(ast_sweep_lua *sl, lua_CFunction open_module)
{
    lua_State *L = sl->L;
    if (sl->limits.trusted)
        open_trusted(L, sl->dir);
    else
        open_restricted(L);
    luaL_requiref(L, "alphast", open_module, 1);
    lua_pop(L, 1);
}

/* ---- limits from the environment ------------------------------------------------------ */

/* A positive count from the environment: "1000000" or "1e6". */
static int env_count(const char *var, int64_t *out, int64_t max, ast_error *e)
{
    const char *text = getenv(var);
    if (!text || !*text) return 0;
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= 1 && v <= (double)max) || v != (double)(int64_t)v) {
        ast_error_set(e, "%s=%s: expected a whole number from 1 to %lld (e.g. 1e9)", var, text, (long long)max);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int ast_sweep_limits_from_env(ast_sweep_limits *l, ast_error *e)
{
    *l = (ast_sweep_limits){0, AST_SWEEP_SCRIPT_INSTRUCTIONS, AST_SWEEP_SCHEDULE_INSTRUCTIONS, AST_SWEEP_MEMORY_BYTES,
                            AST_SWEEP_SCRIPT_SECONDS, AST_SWEEP_SCHEDULE_SECONDS};
    const char *trust = getenv("ALPHAST_TRUST_SWEEP");
    if (trust && *trust && strcmp(trust, "0") && strcmp(trust, "1")) {
        ast_error_set(e, "ALPHAST_TRUST_SWEEP=%s: expected 1 (trust sweep scripts) or 0", trust);
        return -1;
    }
    l->trusted = trust && !strcmp(trust, "1");
    int64_t mib = l->memory_bytes >> 20;
    if (env_count("ALPHAST_SWEEP_INSTRUCTIONS", &l->script_instructions, (int64_t)1e15, e) < 0 ||
        env_count("ALPHAST_SCHEDULE_INSTRUCTIONS", &l->schedule_instructions, (int64_t)1e15, e) < 0 ||
        env_count("ALPHAST_SWEEP_MEMORY_MB", &mib, (int64_t)1 << 30, e) < 0)
        return -1;
    l->memory_bytes = mib << 20;
    return 0;
}
