/* Overrides applied to the tree: the key path checked against the schema,
 * a mapping merged into the one there (Hydra), + and ~ checked against
 * what the config writes, and the new value validated where it will sit
 * before it goes in, so a failed edit leaves the config as it was. */
#include <stdlib.h>
#include <string.h>

#include "config_impl.h"

enum { MAX_DEPTH = 16 };

typedef struct target {
    char parts[MAX_DEPTH][128];
    int n;
    const cfg_key *key; /* of the whole path; NULL for a plugin option */
    char path[1024];    /* the parts joined by '.' */
    const char *written_as; /* the key path as the override has it */
    int col;            /* of the key path in the override */
} target;

static int fail_at(ast_error *e, int col, const char *path, const char *msg)
{
    ast_cfg_fail(e, CFG_OVERRIDE_FILE, 1, col, path, "%s", msg);
    return -1;
}

/* A key path is not parsed by libyaml, so nothing else stops bytes that
 * the dumper (and every JSON and YAML file of the run) cannot write. */
static int check_path_text(const char *path, int col, ast_error *e)
{
    long bad = ast_cfg_bad_text(path, strlen(path));
    if (bad < 0) return 0;
    char shown[512];
    unsigned char c = (unsigned char)path[bad];
    ast_cfg_escape(path, shown, sizeof shown);
    ast_cfg_fail(e, CFG_OVERRIDE_FILE, 1, col + (int)bad, shown,
                 "the key path is not valid UTF-8 text (%s 0x%02x at column %ld); write key names in UTF-8 "
                 "without control characters",
                 c < 0x20 || c == 0x7f ? "control character" : "byte", c, col + bad);
    return -1;
}

/* The next level of a path at p (col: its column) against the schema key
 * k of the levels before it; advances p. */
static int resolve_level(target *t, const char **p, int col, const cfg_key **k, ast_error *e)
{
    size_t len = strcspn(*p, ".");
    if (t->n == MAX_DEPTH || len == 0 || len >= sizeof t->parts[0] || !strcmp(*p + len, "."))
        return fail_at(e, col, t->written_as, "not a key path; write names separated by '.'");
    memcpy(t->parts[t->n], *p, len);
    *p += len + ((*p)[len] == '.');
    char parent[1024];
    snprintf(parent, sizeof parent, "%s", t->path);
    snprintf(t->path + strlen(t->path), sizeof t->path - strlen(t->path), "%s%s", t->n ? "." : "", t->parts[t->n]);
    if (*k && (*k)->type == CFG_PLUGIN) { /* a plugin option: the last level */
        *k = NULL;
        if (**p) return fail_at(e, col, t->path, "a plugin option takes a single value; remove the levels below it");
    } else if (t->n && (*k)->type != CFG_MAP) {
        return fail_at(e, col, parent, "has no keys below it; set it as a whole");
    } else if (!(*k = cfg_schema_find(t->path))) {
        cfg_fail_unknown(e, CFG_OVERRIDE_FILE, 1, col, parent, t->parts[t->n]);
        return -1;
    }
    t->n++;
    return 0;
}

/* Splits the path and checks every level against the schema. */
static int resolve(const char *path, int col, target *t, ast_error *e)
{
    memset(t, 0, sizeof *t);
    t->col = col;
    t->written_as = path;
    if (check_path_text(path, col, e) < 0) return -1;
    const cfg_key *k = NULL;
    for (const char *p = path; *p;) {
        int at = col + cfg_columns(path, (size_t)(p - path));
        if (resolve_level(t, &p, at, &k, e) < 0) return -1;
        if (!k) break;
    }
    if (!t->n) return fail_at(e, col, path, "empty key path; write e.g. training.epochs=10");
    t->key = k;
    return 0;
}

/* The node the config writes at the path, NULL if none. */
static ast_cfg_node *written(const ast_cfg *cfg, const target *t)
{
    ast_cfg_node *n = cfg->root;
    for (int i = 0; n && i < t->n; i++) n = cfg_child(n, t->parts[i]);
    return n;
}

/* ---- the value ------------------------------------------------------------------ */

/* Validates `value` where it will sit, its paths set by a stand-in parent
 * so that errors name the final key path. */
static int check_value(ast_cfg_node *value, const target *t, ast_error *e)
{
    ast_cfg_node *stand_in = cfg_node_new(AST_CFG_MAP, CFG_OVERRIDE_FILE, 1, 1);
    const char *dot = strrchr(t->path, '.');
    free((char *)stand_in->path);
    stand_in->path = cfg_copy_n(t->path, dot ? (size_t)(dot - t->path) : 0);
    cfg_node_attach(stand_in, t->parts[t->n - 1], value);
    int rc = t->key ? cfg_validate_node(value, t->key, e) : cfg_validate_option(value, e);
    cfg_node_detach(value);
    cfg_node_free(stand_in);
    return rc;
}

/* The name of a plugin written as `name` or {name: ..}, or NULL. */
static const char *plugin_name(const ast_cfg_node *n)
{
    if (n->kind == AST_CFG_SCALAR) return n->value;
    const ast_cfg_node *name = cfg_child(n, "name");
    return name && name->kind == AST_CFG_SCALAR ? name->value : NULL;
}

/* `attention: gated` as {name: gated}, so that options can join it. */
static ast_cfg_node *plugin_as_map(const ast_cfg_node *n)
{
    ast_cfg_node *map = cfg_node_new(AST_CFG_MAP, n->file, n->line, n->col);
    cfg_node_attach(map, "name", cfg_node_clone(n));
    return map;
}

/* Moves src's entries into dst, merging mapping into mapping. */
static void merge_into(ast_cfg_node *dst, ast_cfg_node *src)
{
    while (src->n_items) {
        ast_cfg_node *item = src->items[0];
        char *key = ast_xstrdup(item->key);
        cfg_node_detach(item);
        ast_cfg_node *there = cfg_child(dst, key);
        if (there && there->kind == AST_CFG_MAP && item->kind == AST_CFG_MAP) {
            merge_into(there, item);
            cfg_node_free(item);
        } else if (there) {
            cfg_node_replace(there, item);
        } else {
            cfg_node_attach(dst, key, item);
        }
        free(key);
    }
}

/* What goes at the path: Hydra merges a mapping into the mapping there
 * (data.loading={rotation: false} keeps expression_dropout); anything else
 * replaces it. A plugin given by name merges as {name: x}; a mapping that
 * names another plugin replaces it, as options belong to their plugin. */
static ast_cfg_node *merged(const ast_cfg_node *old, ast_cfg_node *value, const target *t)
{
    int plugin = t->key && t->key->type == CFG_PLUGIN;
    if (!old || value->kind != AST_CFG_MAP || !(old->kind == AST_CFG_MAP || (plugin && old->kind == AST_CFG_SCALAR)))
        return value;
    const ast_cfg_node *name = cfg_child(value, "name");
    const char *was = plugin ? plugin_name(old) : NULL;
    if (plugin && was && name && name->kind == AST_CFG_SCALAR && strcmp(was, name->value)) return value;
    ast_cfg_node *copy = old->kind == AST_CFG_SCALAR ? plugin_as_map(old) : cfg_node_clone(old);
    merge_into(copy, value);
    cfg_node_free(value);
    return copy;
}

/* Puts value at the path, creating the mappings on the way (and turning a
 * plugin given by name into a mapping for its option). */
static void apply(ast_cfg *cfg, const target *t, ast_cfg_node *value)
{
    ast_cfg_node *at = cfg->root;
    for (int i = 0; i < t->n - 1; i++) {
        ast_cfg_node *next = cfg_child(at, t->parts[i]);
        if (!next) {
            next = cfg_node_new(AST_CFG_MAP, CFG_OVERRIDE_FILE, 1, t->col);
            cfg_node_attach(at, t->parts[i], next);
        } else if (next->kind == AST_CFG_SCALAR) {
            ast_cfg_node *map = plugin_as_map(next);
            cfg_node_replace(next, map);
            next = map;
        }
        at = next;
    }
    ast_cfg_node *old = cfg_child(at, t->parts[t->n - 1]);
    if (old)
        cfg_node_replace(old, value);
    else
        cfg_node_attach(at, t->parts[t->n - 1], value);
}

/* ---- the operations -------------------------------------------------------------- */

/* +KEY=VALUE adds what the config leaves out (Hydra: or writes as null). */
static int fail_present(const target *t, const ast_cfg_node *old, ast_error *e)
{
    char got[256], msg[1024];
    snprintf(msg, sizeof msg,
             "the config already sets it (%s, at %s), and + only adds a key the config leaves out; write %s=VALUE "
             "or ++%s=VALUE to change it",
             cfg_describe(old, got, sizeof got), old->where, t->path, t->path);
    return fail_at(e, t->col, t->path, msg);
}

/* ~KEY=VALUE: does old hold the value? */
static int holds(const ast_cfg_node *old, const char *yaml, const cfg_place *place, const target *t, ast_error *e)
{
    ast_cfg_node *want = cfg_parse(yaml, strlen(yaml), CFG_OVERRIDE_FILE, t->path, place, e);
    if (!want) return 0;
    int same = cfg_same_value(old, want);
    if (!same) {
        char got[256], msg[1024];
        snprintf(msg, sizeof msg, "holds %s (at %s), not '%.200s', so it stays; write ~%s to delete it whatever it holds",
                 cfg_describe(old, got, sizeof got), old->where, yaml, t->path);
        fail_at(e, t->col, t->path, msg);
    }
    cfg_node_free(want);
    return same;
}

/* ~KEY and ~KEY=VALUE: the key goes, so it is at its default again. */
static int delete_key(ast_cfg *cfg, const target *t, const char *yaml, const cfg_place *place, ast_error *e)
{
    ast_cfg_node *old = written(cfg, t);
    if (!old) {
        char msg[512];
        const char *def = t->key ? t->key->def : NULL;
        snprintf(msg, sizeof msg, "the config does not set it, so there is nothing to delete%s%s%s",
                 def ? " (it is at its default, " : "", def ? def : "", def ? ")" : "");
        return fail_at(e, t->col, t->path, msg);
    }
    if (yaml && !holds(old, yaml, place, t, e)) return -1;
    if (!t->key && !strcmp(t->parts[t->n - 1], "name")) {
        char msg[512];
        snprintf(msg, sizeof msg, "a plugin needs its name; delete the whole plugin (~%s) or name another one (%s.name=NAME)",
                 t->parts[0], t->parts[0]);
        return fail_at(e, t->col, t->path, msg);
    }
    cfg_node_detach(old);
    cfg_node_free(old);
    return 0;
}

/* An option joins a plugin the config names: after `~ffn` the plugin is
 * chosen by the legacy switches (use_moe, use_gated_attention), which no
 * option can know, and a mapping of options alone has no plugin. */
static int check_plugin_named(const ast_cfg *cfg, const target *t, ast_error *e)
{
    ast_cfg_node *n = cfg->root;
    for (int i = 0; n && i < t->n - 1; i++) n = cfg_child(n, t->parts[i]);
    if (n) return 0;
    char plugin[1024];
    snprintf(plugin, sizeof plugin, "%.*s", (int)(strrchr(t->path, '.') - t->path), t->path);
    char msg[4200];
    snprintf(msg, sizeof msg, "%s names no plugin here; name it first (%s=NAME, or %s={name: NAME, %s: ...})", plugin,
             plugin, plugin, t->parts[t->n - 1]);
    return fail_at(e, t->col, t->path, msg);
}

int cfg_edit(ast_cfg *cfg, const cfg_override *o, const char *yaml, const cfg_place *place, ast_error *e)
{
    target t;
    if (resolve(o->key, o->key_col, &t, e) < 0) return -1;
    if (o->op == CFG_OP_DELETE) return delete_key(cfg, &t, yaml, place, e);
    if (!t.key && check_plugin_named(cfg, &t, e) < 0) return -1;
    ast_cfg_node *old = written(cfg, &t);
    if (o->op == CFG_OP_ADD && old && old->kind != AST_CFG_NULL) return fail_present(&t, old, e);
    ast_cfg_node *value = cfg_parse(yaml, strlen(yaml), CFG_OVERRIDE_FILE, t.path, place, e);
    if (!value) return -1;
    value = merged(old, value, &t);
    if (check_value(value, &t, e) < 0) {
        cfg_node_free(value);
        return -1;
    }
    apply(cfg, &t, value);
    return 0;
}

int ast_cfg_set(ast_cfg *cfg, const char *path, const char *yaml_value, ast_error *e)
{
    cfg_override o = {.op = CFG_OP_SET, .key = (char *)path, .key_col = 1, .value = yaml_value, .value_col = 1};
    return cfg_edit(cfg, &o, yaml_value, NULL, e);
}
