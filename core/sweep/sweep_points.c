/* Point sets for sweep{configs = ...}: alphast.grid (every combination),
 * alphast.list (the points given) and alphast.random (n draws from a
 * seeded RNG, so the same script draws the same points). A point is an
 * override table with a `name` made of the keys that vary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sweep_internal.h"

#define MAX_POINTS 100000

/* Sets point.name from the keys of the point that appear in `varying`. */
static void name_point(lua_State *L, int point, int varying, const char *none)
{
    lua_newtable(L);
    int shown = lua_gettop(L);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, varying); i++) {
        lua_rawgeti(L, varying, i);
        lua_pushvalue(L, -1);
        lua_rawget(L, point);
        lua_rawset(L, shown);
    }
    sweep_push_name(L, shown, none);
    lua_setfield(L, point, "name");
    lua_pop(L, 1);
}

/* An axis {key=, values={...}} appended to the array at axes. */
static void add_axis(lua_State *L, int axes, const char *key, int values)
{
    if (lua_rawlen(L, values) == 0) luaL_error(L, "grid key '%s': no values", key);
    lua_createtable(L, 0, 2);
    lua_pushstring(L, key);
    lua_setfield(L, -2, "key");
    lua_pushvalue(L, values);
    lua_setfield(L, -2, "values");
    lua_rawseti(L, axes, (lua_Integer)lua_rawlen(L, axes) + 1);
}

/* A list of choices, or a single value (a scalar, a mapping, a config). */
static int is_choices(lua_State *L, int idx)
{
    return lua_type(L, idx) == LUA_TTABLE && lua_rawlen(L, idx) > 0 && !sweep_is(L, idx, SWEEP_CONFIG_MT) &&
           !sweep_is(L, idx, SWEEP_DIST_MT);
}

/* The axes of the grid's Hydra strings (KEY=V1,V2  KEY=range(...)
 * KEY=choice(...), as `alphast-run sweep -m` takes them), appended to
 * axes; deletions (~KEY), which every point makes, go to fixed. */
static void add_string_axes(lua_State *L, int spec, int axes, int fixed)
{
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, spec); i++) {
        if (lua_rawgeti(L, spec, i) != LUA_TSTRING)
            luaL_error(L, "grid entry %d: expected \"KEY=V1,V2,...\" (e.g. \"attention=linear,gated\")", (int)i);
        ast_cfg_sweep sw;
        ast_error e = {""};
        if (ast_cfg_sweep_parse(lua_tostring(L, -1), &sw, &e) < 0) luaL_error(L, "grid entry %d: %s", (int)i, e.msg);
        if (!sw.n) {
            lua_rawseti(L, fixed, (lua_Integer)lua_rawlen(L, fixed) + 1);
            ast_cfg_sweep_free(&sw);
            continue;
        }
        lua_pushstring(L, sw.key);
        lua_createtable(L, sw.n, 0);
        for (int k = 0; k < sw.n; k++) {
            lua_pushstring(L, sw.values[k]);
            lua_rawseti(L, -2, k + 1);
        }
        ast_cfg_sweep_free(&sw);
        add_axis(L, axes, lua_tostring(L, -2), lua_gettop(L));
        lua_pop(L, 3);
    }
}

/* Pushes the grid's axes, then its deletions. */
static void push_axes(lua_State *L, int spec)
{
    lua_newtable(L);
    int axes = lua_gettop(L);
    lua_newtable(L);
    add_string_axes(L, spec, axes, axes + 1);
    sweep_push_sorted_keys(L, spec);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, -1); i++) {
        lua_rawgeti(L, -1, i);
        lua_pushvalue(L, -1);
        lua_rawget(L, spec);
        if (!is_choices(L, -1)) {
            lua_createtable(L, 1, 0);
            lua_insert(L, -2);
            lua_rawseti(L, -2, 1);
        }
        add_axis(L, axes, lua_tostring(L, -2), lua_gettop(L));
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
}

/* alphast.grid{key = {v1, v2}, "key=v1,v2", "~key", ...}: the cartesian
 * product, the last key varying fastest. */
int sweep_grid(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    push_axes(L, 1);
    int axes = lua_gettop(L) - 1, fixed = axes + 1, n_axes = (int)lua_rawlen(L, axes);
    lua_Integer count = 1;
    lua_newtable(L);
    int varying = lua_gettop(L);
    for (int a = 1; a <= n_axes; a++) {
        lua_rawgeti(L, axes, a);
        lua_getfield(L, -1, "values");
        lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
        if (count > MAX_POINTS / n) luaL_error(L, "grid: more than %d points", MAX_POINTS);
        count *= n;
        lua_getfield(L, -2, "key");
        if (n > 1) lua_rawseti(L, varying, (lua_Integer)lua_rawlen(L, varying) + 1);
        lua_pop(L, n > 1 ? 2 : 3);
    }
    lua_createtable(L, (int)count, 0);
    for (lua_Integer p = 0; p < count; p++) {
        lua_newtable(L);
        int point = lua_gettop(L);
        sweep_append(L, point, fixed);
        lua_Integer rest = p;
        for (int a = n_axes; a >= 1; a--) {
            lua_rawgeti(L, axes, a);
            lua_getfield(L, -1, "key");
            lua_getfield(L, -2, "values");
            lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
            lua_rawgeti(L, -1, rest % n + 1);
            rest /= n;
            lua_remove(L, -2);
            lua_rawset(L, point);
            lua_pop(L, 1);
        }
        name_point(L, point, varying, "grid");
        lua_rawseti(L, -2, p + 1);
    }
    return 1;
}

/* alphast.list{{name = "A", attention = "gated"}, "ffn=moe", ...} */
int sweep_list(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_newtable(L);
        int point = lua_gettop(L);
        lua_rawgeti(L, 1, i);
        if (lua_type(L, -1) == LUA_TSTRING) {
            lua_rawseti(L, point, 1);
        } else if (lua_type(L, -1) == LUA_TTABLE && !sweep_is(L, -1, SWEEP_CONFIG_MT)) {
            lua_pushnil(L);
            while (lua_next(L, -2)) { /* copy: key, value -> point */
                lua_pushvalue(L, -2);
                lua_insert(L, -2);
                lua_rawset(L, point);
            }
            lua_pop(L, 1);
        } else {
            luaL_error(L, "list entry %d: expected an override table or \"KEY=VALUE\"", (int)i);
        }
        if (lua_getfield(L, point, "name") == LUA_TNIL) {
            sweep_push_name(L, point, "base");
            lua_setfield(L, point, "name");
        }
        lua_pop(L, 1);
        lua_rawseti(L, -2, i);
    }
    return 1;
}

/* ---- random ------------------------------------------------------------ */

static int push_dist(lua_State *L, const char *kind)
{
    double lo = luaL_checknumber(L, 1), hi = luaL_checknumber(L, 2);
    int integer = !strcmp(kind, "int");
    if (integer && (!lua_isinteger(L, 1) || !lua_isinteger(L, 2))) luaL_error(L, "alphast.int(lo, hi): integer bounds");
    if (!(lo < hi || (integer && lo == hi))) luaL_error(L, "alphast.%s(%g, %g): needs lo < hi", kind, lo, hi);
    if (!strcmp(kind, "log_uniform") && lo <= 0) luaL_error(L, "alphast.log_uniform(%g, %g): needs 0 < lo", lo, hi);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, kind);
    lua_setfield(L, -2, "kind");
    lua_pushvalue(L, 1);
    lua_setfield(L, -2, "lo");
    lua_pushvalue(L, 2);
    lua_setfield(L, -2, "hi");
    luaL_setmetatable(L, SWEEP_DIST_MT);
    return 1;
}

int sweep_uniform(lua_State *L) { return push_dist(L, "uniform"); }
int sweep_log_uniform(lua_State *L) { return push_dist(L, "log_uniform"); }
int sweep_int(lua_State *L) { return push_dist(L, "int"); }

static double unit(ast_rng *r) { return (double)(ast_rng_next(r) >> 11) * 0x1p-53; }

/* Floats keep 4 significant digits: readable names, exact YAML. */
static void push_sample(lua_State *L, int dist, ast_rng *r)
{
    lua_getfield(L, dist, "kind");
    lua_getfield(L, dist, "lo");
    lua_getfield(L, dist, "hi");
    const char *kind = lua_tostring(L, -3);
    double lo = lua_tonumber(L, -2), hi = lua_tonumber(L, -1), v;
    lua_Integer ilo = lua_tointeger(L, -2), ihi = lua_tointeger(L, -1);
    lua_pop(L, 3);
    if (!strcmp(kind, "int")) {
        lua_pushinteger(L, ilo + (lua_Integer)(ast_rng_next(r) % (uint64_t)(ihi - ilo + 1)));
        return;
    }
    if (!strcmp(kind, "log_uniform"))
        v = exp(log(lo) + unit(r) * (log(hi) - log(lo)));
    else
        v = lo + unit(r) * (hi - lo);
    char buf[32];
    snprintf(buf, sizeof buf, "%.4g", v);
    lua_pushnumber(L, strtod(buf, NULL));
}

static void push_draw(lua_State *L, int spec, ast_rng *r)
{
    if (sweep_is(L, spec, SWEEP_DIST_MT)) {
        push_sample(L, spec, r);
    } else if (is_choices(L, spec)) {
        lua_rawgeti(L, spec, (lua_Integer)(ast_rng_next(r) % lua_rawlen(L, spec)) + 1);
    } else {
        lua_pushvalue(L, spec);
    }
}

/* alphast.random{n = 8, seed = 1, key = alphast.uniform(lo, hi) | {choices} | value} */
int sweep_random(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_getfield(L, 1, "n");
    lua_getfield(L, 1, "seed");
    if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1 || lua_tointeger(L, -2) > MAX_POINTS)
        luaL_error(L, "random: n must be an integer from 1 to %d", MAX_POINTS);
    if (!lua_isnil(L, -1) && !lua_isinteger(L, -1)) luaL_error(L, "random: seed must be an integer");
    lua_Integer n = lua_tointeger(L, -2);
    ast_rng rng;
    ast_rng_seed(&rng, (uint64_t)lua_tointeger(L, -1));
    lua_pop(L, 2);
    sweep_push_sorted_keys(L, 1);
    int keys = lua_gettop(L);
    lua_newtable(L);
    int varying = lua_gettop(L);
    for (lua_Integer k = 1; k <= (lua_Integer)lua_rawlen(L, keys); k++) {
        lua_rawgeti(L, keys, k);
        const char *key = lua_tostring(L, -1);
        if (!strcmp(key, "n") || !strcmp(key, "seed")) {
            lua_pop(L, 1);
            continue;
        }
        lua_rawget(L, 1);
        int varies = is_choices(L, -1) || sweep_is(L, -1, SWEEP_DIST_MT);
        lua_pop(L, 1);
        lua_rawgeti(L, keys, k);
        if (varies)
            lua_rawseti(L, varying, (lua_Integer)lua_rawlen(L, varying) + 1);
        else
            lua_pop(L, 1);
    }
    lua_createtable(L, (int)n, 0);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_newtable(L);
        int point = lua_gettop(L);
        for (lua_Integer k = 1; k <= (lua_Integer)lua_rawlen(L, keys); k++) {
            lua_rawgeti(L, keys, k);
            const char *key = lua_tostring(L, -1);
            if (strcmp(key, "n") && strcmp(key, "seed")) {
                lua_getfield(L, 1, key);
                push_draw(L, lua_gettop(L), &rng);
                lua_remove(L, -2);
                lua_setfield(L, point, key);
            }
            lua_pop(L, 1);
        }
        name_point(L, point, varying, "random");
        lua_rawseti(L, -2, i);
    }
    return 1;
}
