/* Schedules: Lua functions of (step, epoch), or constants, for the
 * learning rate, the masking ratio, the MoE load-balance weight and the
 * router noise. The trainer calls them before every optimiser step
 * (ast_train_config.schedule); the values other than lr reach plugins by
 * name through host->scheduled. */
#include <math.h>
#include <string.h>

#include "sweep_internal.h"

typedef struct schedule_key {
    const char *key;       /* in the script's schedule table */
    const char *published; /* name plugins ask host->scheduled for; NULL: the learning rate */
    double lo, hi;         /* allowed values */
} schedule_key;

static const schedule_key schedule_keys[] = {
    {"lr", NULL, 0.0, INFINITY},
    {"mask_ratio", "masking.ratio", 0.0, 1.0},
    {"moe_weight", "moe.load_balance_weight", 0.0, INFINITY},
    {"router_noise", "moe.router_noise", 0.0, INFINITY},
};
#define N_KEYS ((int)(sizeof schedule_keys / sizeof schedule_keys[0]))
static const char *const key_names[] = {"lr", "mask_ratio", "moe_weight", "router_noise", NULL};

static int known_key(const char *key)
{
    for (int k = 0; k < N_KEYS; k++)
        if (!strcmp(key, schedule_keys[k].key)) return 1;
    return 0;
}

void sweep_check_schedule(lua_State *L, int idx, const char *where)
{
    idx = lua_absindex(L, idx);
    if (!lua_istable(L, idx) || sweep_is(L, idx, SWEEP_CONFIG_MT) || lua_rawlen(L, idx))
        luaL_error(L, "%s must be a table {lr = function(step, epoch) ... end, ...}", where);
    sweep_push_sorted_keys(L, idx);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
        lua_rawgeti(L, -1, i);
        const char *key = lua_tostring(L, -1);
        const char *near = known_key(key) ? NULL : sweep_near(key, key_names);
        if (!known_key(key))
            luaL_error(L, "%s.%s: unknown schedule%s%s%s (known: lr, mask_ratio, moe_weight, router_noise)", where, key,
                       near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
        int type = lua_getfield(L, idx, key);
        if (type != LUA_TFUNCTION && type != LUA_TNUMBER)
            luaL_error(L, "%s.%s must be a function(step, epoch) or a number, not a %s", where, key, lua_typename(L, type));
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
}

static int feed(lua_State *L, const void *p, size_t n, void *ud)
{
    (void)L;
    *(uint64_t *)ud = ast_fnv1a(*(uint64_t *)ud, p, n);
    return 0;
}

/* Hashes the text of the value on top of the stack (with its NUL). */
static uint64_t hash_text_of_top(lua_State *L, uint64_t h)
{
    size_t n;
    const char *s = luaL_tolstring(L, -1, &n);
    h = ast_fnv1a(h, s, n + 1);
    lua_pop(L, 1);
    return h;
}

/* A function's stripped bytecode (the same for the same code wherever it
 * sits in the script) and the scalar values it closes over. */
static uint64_t hash_function(lua_State *L, int f, uint64_t h)
{
    lua_pushvalue(L, f);
    lua_dump(L, feed, &h, 1);
    lua_pop(L, 1);
    for (int i = 1; lua_getupvalue(L, f, i); i++) {
        int t = lua_type(L, -1);
        if (t == LUA_TNUMBER || t == LUA_TSTRING || t == LUA_TBOOLEAN) h = hash_text_of_top(L, h);
        lua_pop(L, 1);
    }
    return h;
}

uint64_t sweep_hash_schedule(lua_State *L, int idx, uint64_t h)
{
    for (int k = 0; k < N_KEYS; k++) {
        int type = lua_getfield(L, idx, schedule_keys[k].key);
        if (type != LUA_TNIL) h = ast_fnv1a(h, schedule_keys[k].key, strlen(schedule_keys[k].key) + 1);
        if (type == LUA_TFUNCTION) h = hash_function(L, lua_gettop(L), h);
        if (type == LUA_TNUMBER) h = hash_text_of_top(L, h);
        lua_pop(L, 1);
    }
    return h;
}

/* The value of schedule key k at this step (function result or constant). */
static int schedule_value(ast_sweep_lua *sl, const schedule_key *k, int64_t step, int epoch, double *out, ast_error *e)
{
    lua_State *L = sl->L;
    ast_error why = {""};
    if (lua_isfunction(L, -1)) {
        lua_pushinteger(L, (lua_Integer)step);
        lua_pushinteger(L, epoch);
        /* Every call has its own budget: the trainer calls it every step. */
        sweep_phase_begin(sl, "the schedule", sl->limits.schedule_instructions, "ALPHAST_SCHEDULE_INSTRUCTIONS",
                          sl->limits.schedule_seconds);
        int rc = sweep_pcall(L, 2, 1, &why);
        sweep_phase_end(sl, rc < 0, &why);
        if (rc < 0) {
            ast_error_set(e, "schedule.%s(step %lld, epoch %d) failed: %s", k->key, (long long)step, epoch, why.msg);
            return -1;
        }
    }
    int is_number = lua_type(L, -1) == LUA_TNUMBER;
    *out = lua_tonumber(L, -1);
    if (!is_number) {
        ast_error_set(e, "schedule.%s(step %lld, epoch %d) returned a %s; return a number", k->key, (long long)step,
                      epoch, luaL_typename(L, -1));
    } else if (!(*out >= k->lo && *out <= k->hi)) {
        ast_error_set(e, "schedule.%s(step %lld, epoch %d) = %g, outside [%g, %g]", k->key, (long long)step, epoch,
                      *out, k->lo, k->hi);
    }
    lua_pop(L, 1);
    return is_number && *out >= k->lo && *out <= k->hi ? 0 : -1;
}

static int run_schedule(void *ud, int64_t step, int epoch, ast_schedule_values *v, ast_error *e)
{
    ast_sweep_lua *sl = ud;
    lua_State *L = sl->L;
    lua_rawgeti(L, LUA_REGISTRYINDEX, sl->schedule_ref);
    int rc = 0;
    for (int k = 0; k < N_KEYS && rc == 0; k++) {
        const schedule_key *key = &schedule_keys[k];
        double x;
        if (lua_getfield(L, -1, key->key) == LUA_TNIL) {
            lua_pop(L, 1);
            continue;
        }
        rc = schedule_value(sl, key, step, epoch, &x, e);
        if (rc == 0 && !key->published) v->lr = (float)x;
        if (rc == 0 && key->published) {
            v->named[v->n].name = key->published;
            v->named[v->n++].value = (float)x;
        }
    }
    lua_pop(L, 1);
    return rc;
}

int ast_sweep_bind_schedule(ast_sweep *s, const char *id, ast_train_config *tc, ast_error *e)
{
    const ast_sweep_run *r = ast_sweep_find(s, id);
    if (!r) {
        ast_error_set(e, "%s: no run %s; the script changed since the sweep listed it (run the sweep again)", s->script, id);
        return -1;
    }
    lua_State *L = s->lua->L;
    lua_getfield(L, LUA_REGISTRYINDEX, SWEEP_RUNS_KEY);
    lua_rawgeti(L, -1, (lua_Integer)(r - s->runs) + 1);
    lua_getfield(L, -1, "schedule");
    luaL_unref(L, LUA_REGISTRYINDEX, s->lua->schedule_ref);
    s->lua->schedule_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pop(L, 2);
    if (s->lua->schedule_ref == LUA_REFNIL) return 0;
    tc->schedule = run_schedule;
    tc->schedule_ud = s->lua;
    return 0;
}
