/* Lua values as config text: numbers, booleans and tables become YAML
 * (the text ast_cfg_set takes), override tables become Hydra-style
 * "KEY=VALUE" strings in a deterministic order, so a script evaluated
 * twice resolves to byte-identical configs and hashes. */
#include <stdlib.h>
#include <string.h>

#include "sweep_internal.h"

static int by_string(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

void sweep_push_sorted_keys(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_Integer len = (lua_Integer)lua_rawlen(L, idx);
    lua_newtable(L);
    int keys = lua_gettop(L), n = 0;
    for (lua_pushnil(L); lua_next(L, idx); lua_pop(L, 1)) {
        if (lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 && lua_tointeger(L, -2) <= len) continue;
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "table key %s: expected a string key (or a list entry)", luaL_tolstring(L, -2, NULL));
        lua_pushvalue(L, -2);
        lua_rawseti(L, keys, ++n);
    }
    /* The strings stay anchored in `keys` while the array points at them. */
    const char **v = lua_newuserdatauv(L, (size_t)(n ? n : 1) * sizeof *v, 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, keys, i + 1);
        v[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    qsort(v, (size_t)n, sizeof *v, by_string);
    lua_newtable(L);
    for (int i = 0; i < n; i++) {
        lua_pushstring(L, v[i]);
        lua_rawseti(L, -2, i + 1);
    }
    lua_replace(L, keys);
    lua_pop(L, 1);
}

void sweep_append(lua_State *L, int dst, int src)
{
    dst = lua_absindex(L, dst), src = lua_absindex(L, src);
    lua_Integer n = (lua_Integer)lua_rawlen(L, dst), m = (lua_Integer)lua_rawlen(L, src);
    for (lua_Integer i = 1; i <= m; i++) {
        lua_rawgeti(L, src, i);
        lua_rawseti(L, dst, n + i);
    }
}

static void push_number(lua_State *L, int idx)
{
    if (lua_isinteger(L, idx)) {
        lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, idx));
        return;
    }
    /* The shortest form that reads back to the same double. */
    double v = lua_tonumber(L, idx);
    char buf[40];
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    lua_pushstring(L, buf);
}

/* Strings inside a flow collection need quotes when YAML would read them
 * as structure. */
static void push_flow_string(lua_State *L, int idx)
{
    const char *s = lua_tostring(L, idx);
    if (*s && !strpbrk(s, ",:[]{}#&*!|>'\"%@`") && s[0] != ' ' && s[strlen(s) - 1] != ' ') {
        lua_pushvalue(L, idx);
        return;
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addchar(&b, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') luaL_addchar(&b, '\\');
        luaL_addchar(&b, *s);
    }
    luaL_addchar(&b, '"');
    luaL_pushresult(&b);
}

static void push_value(lua_State *L, int idx, int depth);

/* depth: the levels of tables around this one. The limit is the config's
 * own, and stops a table that contains itself from recursing until the
 * C stack or the unchecked Lua stack overflows. */
static void push_table(lua_State *L, int idx, int depth)
{
    if (depth >= AST_CFG_MAX_DEPTH)
        luaL_error(L, "a config value nested deeper than %d tables (does a table contain itself?)", AST_CFG_MAX_DEPTH);
    luaL_checkstack(L, 8, "a deeply nested config value");
    lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
    if (n > 0) {
        lua_pushliteral(L, "[");
        for (lua_Integer i = 1; i <= n; i++) {
            if (i > 1) lua_pushliteral(L, ", "), lua_concat(L, 2);
            lua_rawgeti(L, idx, i);
            push_value(L, -1, depth + 1);
            lua_remove(L, -2);
            lua_concat(L, 2);
        }
        lua_pushliteral(L, "]");
        lua_concat(L, 2);
        return;
    }
    sweep_push_sorted_keys(L, idx);
    int keys = lua_gettop(L);
    lua_pushliteral(L, "{");
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, keys); i++) {
        lua_rawgeti(L, keys, i);
        lua_pushstring(L, i > 1 ? ", " : "");
        lua_insert(L, -2);
        lua_pushliteral(L, ": ");
        lua_rawgeti(L, keys, i);
        lua_rawget(L, idx);
        push_value(L, -1, depth + 1);
        lua_remove(L, -2);
        lua_concat(L, 5);
    }
    lua_pushliteral(L, "}");
    lua_concat(L, 2);
    lua_remove(L, keys);
}

/* depth 0: the value itself, whose strings are YAML text as written;
 * inside a table strings are quoted where YAML needs it. */
static void push_value(lua_State *L, int idx, int depth)
{
    idx = lua_absindex(L, idx);
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        if (depth)
            push_flow_string(L, idx);
        else
            lua_pushvalue(L, idx);
        return;
    case LUA_TNUMBER: push_number(L, idx); return;
    case LUA_TBOOLEAN: lua_pushstring(L, lua_toboolean(L, idx) ? "true" : "false"); return;
    case LUA_TTABLE:
        if (!sweep_is(L, idx, SWEEP_CONFIG_MT) && !sweep_is(L, idx, SWEEP_DIST_MT)) {
            push_table(L, idx, depth);
            return;
        }
        /* fall through */
    default: luaL_error(L, "a %s cannot be a config value", luaL_typename(L, idx));
    }
}

void sweep_push_yaml(lua_State *L, int idx) { push_value(L, idx, 0); }

/* "seed" is the run's seed: seed.value in the config. */
static const char *config_key(const char *key) { return strcmp(key, "seed") ? key : "seed.value"; }

/* A Hydra string of the list part: KEY=VALUE, +KEY=VALUE, ++KEY=VALUE,
 * ~KEY or ~KEY=VALUE (the config checks the rest when it applies them). */
static void push_hydra_string(lua_State *L, int idx, lua_Integer i)
{
    lua_rawgeti(L, idx, i);
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    size_t pre = s ? strspn(s, "+~") : 0;
    if (!s || s[pre] == '=' || (!strchr(s, '=') && s[0] != '~'))
        luaL_error(L, "override %d: expected \"KEY=VALUE\", \"+KEY=VALUE\", \"++KEY=VALUE\" or \"~KEY\" "
                      "(e.g. \"attention=gated\")", (int)i);
    const char *key = s + pre;
    if (!strncmp(key, "seed", 4) && (key[4] == '=' || !key[4])) {
        lua_pushlstring(L, s, pre);
        lua_pushfstring(L, "seed.value%s", key + 4);
        lua_concat(L, 2);
        lua_remove(L, -2);
    }
}

void sweep_push_overrides(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_newtable(L);
    int out = lua_gettop(L), n = 0;
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, idx); i++) {
        push_hydra_string(L, idx, i);
        lua_rawseti(L, out, ++n);
    }
    sweep_push_sorted_keys(L, idx);
    int keys = lua_gettop(L);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, keys); i++) {
        lua_rawgeti(L, keys, i);
        const char *key = lua_tostring(L, -1);
        lua_pop(L, 1); /* still anchored in keys */
        if (!strcmp(key, "name") || !strcmp(key, "schedule")) continue;
        lua_pushfstring(L, "%s=", config_key(key));
        lua_getfield(L, idx, key);
        sweep_push_yaml(L, -1);
        lua_remove(L, -2);
        lua_concat(L, 2);
        lua_rawseti(L, out, ++n);
    }
    lua_pop(L, 1);
}

const char *sweep_near(const char *word, const char *const *candidates)
{
    int n = 0;
    while (candidates[n]) n++;
    return ast_did_you_mean(word, candidates, n);
}

void sweep_push_name(lua_State *L, int idx, const char *none)
{
    sweep_push_overrides(L, idx);
    int ovr = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, ovr); i++) {
        lua_rawgeti(L, ovr, i);
        const char *s = lua_tostring(L, -1), *eq = s + strcspn(s, "="); /* ~KEY has none */
        size_t pre = strspn(s, "+~");
        const char *key = s + pre, *dot;
        while ((dot = memchr(key, '.', (size_t)(eq - key)))) key = dot + 1;
        int seed = !strncmp(s + pre, "seed.value=", 11); /* "seed=1" reads better than "value=1" */
        lua_pop(L, 1); /* anchored in ovr; the buffer may use the stack now */
        if (i > 1) luaL_addchar(&b, ',');
        luaL_addlstring(&b, s, pre);
        luaL_addstring(&b, seed ? "seed" : "");
        luaL_addstring(&b, seed ? eq : key);
    }
    luaL_pushresult(&b);
    if (!lua_rawlen(L, -1)) {
        lua_pop(L, 1);
        lua_pushstring(L, none);
    }
    lua_remove(L, ovr);
}
