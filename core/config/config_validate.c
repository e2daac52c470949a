/* Checks a config tree against the schema, one clear error per problem:
 * where it is, which key, what is wrong and how to fix it. */
#include <stdint.h>
#include <string.h>

#include "config_impl.h"

enum { MAX_SIBLINGS = 64 };

const char *cfg_describe(const ast_cfg_node *n, char *buf, size_t size)
{
    switch (n->kind) {
    case AST_CFG_SCALAR: snprintf(buf, size, "'%.200s'", n->value); return buf;
    case AST_CFG_NULL: return "nothing (null)";
    case AST_CFG_MAP: return "a mapping";
    case AST_CFG_SEQ: return "a list";
    }
    return "?";
}

static int fail_at(const ast_cfg_node *n, ast_error *e, const char *expected, const char *fix)
{
    char got[256];
    ast_cfg_fail(e, n->file, n->line, n->col, n->path, "expected %s, got %s; %s", expected,
             cfg_describe(n, got, sizeof got), fix);
    return -1;
}

void cfg_fail_unknown(ast_error *e, const char *file, int line, int col, const char *parent,
                      const char *key)
{
    const char *names[MAX_SIBLINGS];
    int n = cfg_schema_children(parent, names, MAX_SIBLINGS);
    const char *guess = ast_did_you_mean(key, names, n);
    char path[512], known[700] = "";
    snprintf(path, sizeof path, "%s%s%s", parent, *parent ? "." : "", key);
    if (guess) {
        ast_cfg_fail(e, file, line, col, path, "unknown key; did you mean '%s'?", guess);
        return;
    }
    for (int i = 0; i < n; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", names[i]);
    ast_cfg_fail(e, file, line, col, path, "unknown key; the keys here are: %s", known);
}

static int check_bound(const ast_cfg_node *n, const cfg_key *k, double v, ast_error *e)
{
    static const char *const need[] = {NULL, "a value > 0", "a value >= 0", "a value between 0 and 1"};
    int ok = k->bound == CFG_FREE || (k->bound == CFG_POSITIVE && v > 0) ||
             (k->bound == CFG_NONNEG && v >= 0) || (k->bound == CFG_PROB && v >= 0 && v <= 1);
    if (ok) return 0;
    char fix[128];
    snprintf(fix, sizeof fix, "the default is %s", k->def ? k->def : "unset");
    return fail_at(n, e, need[k->bound], fix);
}

static int check_int(const ast_cfg_node *n, const cfg_key *k, ast_error *e)
{
    int64_t v;
    char fix[96];
    snprintf(fix, sizeof fix, "write a whole number like %s", k->def);
    if (n->kind != AST_CFG_SCALAR || ast_yaml_int(n->value, &v) < 0)
        return fail_at(n, e, "an integer", fix);
    if (v < INT32_MIN || v > INT32_MAX) return fail_at(n, e, "an integer that fits in 32 bits", fix);
    return check_bound(n, k, (double)v, e);
}

static int check_float(const ast_cfg_node *n, const cfg_key *k, ast_error *e)
{
    double v;
    char fix[96];
    snprintf(fix, sizeof fix, "write a number like %s", k->def);
    if (n->kind != AST_CFG_SCALAR || ast_yaml_float(n->value, &v) < 0)
        return fail_at(n, e, "a number", fix);
    return check_bound(n, k, v, e);
}

static int check_enum(const ast_cfg_node *n, const cfg_key *k, ast_error *e)
{
    const char *names[16];
    char buf[256], list[256] = "";
    int count = 0;
    snprintf(buf, sizeof buf, "%s", k->choices);
    for (char *tok = strtok(buf, "|"); tok && count < 16; tok = strtok(NULL, "|")) names[count++] = tok;
    for (int i = 0; i < count; i++) {
        if (n->kind == AST_CFG_SCALAR && !strcmp(n->value, names[i])) return 0;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    }
    const char *guess = n->kind == AST_CFG_SCALAR ? ast_did_you_mean(n->value, names, count) : NULL;
    char expected[300], fix[128];
    snprintf(expected, sizeof expected, "one of %s", list);
    if (guess)
        snprintf(fix, sizeof fix, "did you mean '%s'?", guess);
    else
        snprintf(fix, sizeof fix, "use one of the listed values");
    return fail_at(n, e, expected, fix);
}

int cfg_validate_option(const ast_cfg_node *n, ast_error *e)
{
    if (n->kind == AST_CFG_SCALAR) return 0;
    return fail_at(n, e, "a single value for this plugin option", "write 'option: value'");
}

static int check_plugin(const ast_cfg_node *n, ast_error *e)
{
    static const char *fix = "write a plugin name, or {name: <plugin>, <option>: <value>, ...}";
    if (n->kind == AST_CFG_SCALAR) return 0;
    if (n->kind != AST_CFG_MAP) return fail_at(n, e, "a plugin", fix);
    const ast_cfg_node *name = cfg_child(n, "name");
    if (!name) {
        ast_cfg_fail(e, n->file, n->line, n->col, n->path, "the plugin's 'name' is missing; %s", fix);
        return -1;
    }
    if (name->kind != AST_CFG_SCALAR) return fail_at(name, e, "a plugin name", fix);
    if (n->n_items - 1 > AST_MAX_PLUGIN_OPTS) {
        ast_cfg_fail(e, n->file, n->line, n->col, n->path, "%d options, more than the %d allowed; remove some",
                 n->n_items - 1, AST_MAX_PLUGIN_OPTS);
        return -1;
    }
    for (int i = 0; i < n->n_items; i++)
        if (cfg_validate_option(n->items[i], e) < 0) return -1;
    return 0;
}

static int check_plugins(const ast_cfg_node *n, ast_error *e)
{
    if (n->kind != AST_CFG_SEQ) return fail_at(n, e, "a list of plugins", "write e.g. [grad_norm]");
    for (int i = 0; i < n->n_items; i++)
        if (check_plugin(n->items[i], e) < 0) return -1;
    return 0;
}

int cfg_validate_node(const ast_cfg_node *n, const cfg_key *k, ast_error *e)
{
    int v;
    switch (k->type) {
    case CFG_MAP:
        if (n->kind != AST_CFG_MAP) return fail_at(n, e, "a mapping", "write its keys indented below it");
        return cfg_validate_map(n, e);
    case CFG_INT: return check_int(n, k, e);
    case CFG_FLOAT: return check_float(n, k, e);
    case CFG_BOOL:
        if (n->kind == AST_CFG_SCALAR && ast_yaml_bool(n->value, &v) == 0) return 0;
        return fail_at(n, e, "true or false", "write true or false");
    case CFG_STR:
        if (n->kind == AST_CFG_SCALAR || n->kind == AST_CFG_NULL) return 0;
        return fail_at(n, e, "a single value", "write 'key: value'");
    case CFG_ENUM: return check_enum(n, k, e);
    case CFG_ANY: return 0;
    case CFG_PLUGIN: return check_plugin(n, e);
    case CFG_PLUGINS: return check_plugins(n, e);
    }
    return 0;
}

int cfg_validate_map(const ast_cfg_node *map, ast_error *e)
{
    for (int i = 0; i < map->n_items; i++) {
        const ast_cfg_node *n = map->items[i];
        if (strchr(n->key, '.')) {
            ast_cfg_fail(e, n->file, n->key_line, n->key_col, n->path,
                     "a key cannot contain '.'; nest it as 'a:' then '  b: value' on the next line");
            return -1;
        }
        const cfg_key *k = cfg_schema_find(n->path);
        if (!k) {
            cfg_fail_unknown(e, n->file, n->key_line, n->key_col, map->path, n->key);
            return -1;
        }
        if (cfg_validate_node(n, k, e) < 0) return -1;
    }
    return 0;
}
