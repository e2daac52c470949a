/* Reading values (with the schema's defaults), plugins, and Hydra-style
 * overrides that keep the tree valid. */
#include <stdlib.h>
#include <string.h>

#include "config_impl.h"

enum { MAX_DEPTH = 16 };

/* ---- getters ------------------------------------------------------------------ */

/* The text of a scalar key: written, else the default; NULL for null. */
static const char *leaf_text(const ast_cfg *cfg, const char *path, cfg_type type)
{
    const cfg_key *k = cfg_schema_find(path);
    AST_ASSERT(k && (k->type == type || (type == CFG_STR && k->type == CFG_ENUM)),
               "config key %s is not a schema key of type %d", path, type);
    const ast_cfg_node *n = ast_cfg_get(cfg, path);
    if (n) return n->kind == AST_CFG_SCALAR ? n->value : NULL;
    return k->def && strcmp(k->def, "null") ? k->def : NULL;
}

int64_t ast_cfg_int(const ast_cfg *cfg, const char *path)
{
    int64_t v;
    const char *text = leaf_text(cfg, path, CFG_INT);
    AST_ASSERT(text && ast_yaml_int(text, &v) == 0, "config key %s has no integer value", path);
    return v;
}

double ast_cfg_float(const ast_cfg *cfg, const char *path)
{
    double v;
    const char *text = leaf_text(cfg, path, CFG_FLOAT);
    AST_ASSERT(text && ast_yaml_float(text, &v) == 0, "config key %s has no number value", path);
    return v;
}

int ast_cfg_bool(const ast_cfg *cfg, const char *path)
{
    int v;
    const char *text = leaf_text(cfg, path, CFG_BOOL);
    AST_ASSERT(text && ast_yaml_bool(text, &v) == 0, "config key %s has no boolean value", path);
    return v;
}

const char *ast_cfg_str(const ast_cfg *cfg, const char *path) { return leaf_text(cfg, path, CFG_STR); }
const char *ast_cfg_name(const ast_cfg *cfg) { return cfg->name; }

void ast_cfg_plugin_of(const ast_cfg_node *n, ast_cfg_plugin *out)
{
    memset(out, 0, sizeof *out);
    if (n->kind == AST_CFG_SCALAR) {
        out->name = n->value;
        out->where = n->where;
        return;
    }
    AST_ASSERT(n->kind == AST_CFG_MAP, "%s is not a validated plugin node", n->path);
    for (int i = 0; i < n->n_items; i++) {
        const ast_cfg_node *item = n->items[i];
        if (!strcmp(item->key, "name")) {
            out->name = item->value;
            out->where = item->where;
        } else {
            out->opts[out->n_opts++] = (ast_optsrc){item->key, item->value, item->where};
        }
    }
}

/* ---- text from outside YAML ------------------------------------------------ */

/* The length of the UTF-8 sequence that starts s (n bytes left), 0 if it
 * is not one: overlong forms, surrogates and code points past U+10FFFF
 * are refused as libyaml refuses them. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (!len || c > 0xf4 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xf0 && s[1] < 0x90)) return 0; /* overlong */
    if ((c == 0xed && s[1] > 0x9f) || (c == 0xf4 && s[1] > 0x8f)) return 0; /* surrogate, > U+10FFFF */
    return len;
}

long ast_cfg_bad_text(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_len(u + i, n - i);
        if (!len || u[i] < 0x20 || u[i] == 0x7f) return (long)i;
        i += len;
    }
    return -1;
}

void ast_cfg_escape(const char *s, char *out, size_t size)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), k = 0;
    for (size_t i = 0; i < n && size > 8;) {
        size_t len = utf8_len(u + i, n - i);
        int plain = len > 1 || (len == 1 && u[i] >= 0x20 && u[i] != 0x7f);
        if (k + (plain ? len : 4) + 4 > size) {
            memcpy(out + k, "...", 3), k += 3;
            break;
        }
        if (plain)
            memcpy(out + k, s + i, len), k += len, i += len;
        else
            k += (size_t)snprintf(out + k, size - k, "\\x%02x", u[i]), i++;
    }
    if (size) out[size > 8 ? k : 0] = '\0';
}

/* ---- overrides ------------------------------------------------------------------ */

typedef struct target {
    char parts[MAX_DEPTH][128];
    int n;
    const cfg_key *key; /* of the whole path; NULL for a plugin option */
} target;

static int fail_override(ast_error *e, const char *path, const char *msg)
{
    ast_cfg_fail(e, CFG_OVERRIDE_FILE, 1, 1, path, "%s", msg);
    return -1;
}

/* A key path is not parsed by libyaml, so nothing else stops bytes that
 * the dumper (and every JSON and YAML file of the run) cannot write. */
static int check_path_text(const char *path, ast_error *e)
{
    long bad = ast_cfg_bad_text(path, strlen(path));
    if (bad < 0) return 0;
    char shown[512];
    unsigned char c = (unsigned char)path[bad];
    ast_cfg_escape(path, shown, sizeof shown);
    ast_cfg_fail(e, CFG_OVERRIDE_FILE, 1, (int)bad + 1, shown,
                 "the key path is not valid UTF-8 text (%s 0x%02x at column %ld); write key names in UTF-8 "
                 "without control characters",
                 c < 0x20 || c == 0x7f ? "control character" : "byte", c, bad + 1);
    return -1;
}

/* Splits the path and checks every level against the schema. */
static int resolve(const char *path, target *t, ast_error *e)
{
    char prefix[1024] = "";
    const cfg_key *k = NULL;
    memset(t, 0, sizeof *t);
    if (check_path_text(path, e) < 0) return -1;
    for (const char *p = path; *p; t->n++) {
        size_t len = strcspn(p, ".");
        if (t->n == MAX_DEPTH || len == 0 || len >= sizeof t->parts[0])
            return fail_override(e, path, "not a key path; write names separated by '.'");
        memcpy(t->parts[t->n], p, len);
        p += len + (p[len] == '.');
        if (k && k->type == CFG_PLUGIN) { /* a plugin option: the last level */
            k = NULL;
            if (*p) return fail_override(e, path, "a plugin option takes a single value; remove the levels below it");
            t->n++;
            break;
        }
        if (t->n && k->type != CFG_MAP)
            return fail_override(e, prefix, "has no keys below it; set it as a whole");
        char parent[1024];
        snprintf(parent, sizeof parent, "%s", prefix);
        snprintf(prefix + strlen(prefix), sizeof prefix - strlen(prefix), "%s%s", t->n ? "." : "", t->parts[t->n]);
        if (!(k = cfg_schema_find(prefix))) {
            cfg_fail_unknown(e, CFG_OVERRIDE_FILE, 1, 1, parent, t->parts[t->n]);
            return -1;
        }
    }
    if (!t->n) return fail_override(e, path, "empty key path; write e.g. training.epochs=10");
    t->key = k;
    return 0;
}

/* Validates `value` where it will sit, its paths set by a stand-in parent
 * so that errors name the final key path. */
static int check_value(ast_cfg_node *value, const target *t, ast_error *e)
{
    ast_cfg_node *stand_in = cfg_node_new(AST_CFG_MAP, CFG_OVERRIDE_FILE, 1, 1);
    char parent[1024] = "";
    for (int i = 0; i < t->n - 1; i++)
        snprintf(parent + strlen(parent), sizeof parent - strlen(parent), "%s%s", i ? "." : "", t->parts[i]);
    free((char *)stand_in->path);
    stand_in->path = ast_xstrdup(parent);
    cfg_node_attach(stand_in, t->parts[t->n - 1], value);
    int rc = t->key ? cfg_validate_node(value, t->key, e) : cfg_validate_option(value, e);
    cfg_node_detach(value);
    cfg_node_free(stand_in);
    return rc;
}

/* `attention: gated` becomes {name: gated} so that options can join it. */
static ast_cfg_node *plugin_as_map(ast_cfg_node *n)
{
    ast_cfg_node *map = cfg_node_new(AST_CFG_MAP, n->file, n->line, n->col);
    ast_cfg_node *name = cfg_node_new(AST_CFG_SCALAR, n->file, n->line, n->col);
    name->value = ast_xstrdup(n->value);
    cfg_node_replace(n, map);
    cfg_node_attach(map, "name", name);
    return map;
}

static void apply(ast_cfg *cfg, const target *t, ast_cfg_node *value)
{
    ast_cfg_node *at = cfg->root;
    for (int i = 0; i < t->n - 1; i++) {
        ast_cfg_node *next = cfg_child(at, t->parts[i]);
        if (!next) {
            next = cfg_node_new(AST_CFG_MAP, CFG_OVERRIDE_FILE, 1, 1);
            cfg_node_attach(at, t->parts[i], next);
        } else if (next->kind == AST_CFG_SCALAR) {
            next = plugin_as_map(next);
        }
        at = next;
    }
    ast_cfg_node *old = cfg_child(at, t->parts[t->n - 1]);
    if (old)
        cfg_node_replace(old, value);
    else
        cfg_node_attach(at, t->parts[t->n - 1], value);
}

int ast_cfg_set(ast_cfg *cfg, const char *path, const char *yaml_value, ast_error *e)
{
    target t;
    if (resolve(path, &t, e) < 0) return -1;
    ast_cfg_node *value = cfg_parse(yaml_value, strlen(yaml_value), CFG_OVERRIDE_FILE, path, e);
    if (!value) return -1;
    if (check_value(value, &t, e) < 0) {
        cfg_node_free(value);
        return -1;
    }
    apply(cfg, &t, value);
    return 0;
}

int ast_cfg_override(ast_cfg *cfg, const char *assignment, ast_error *e)
{
    const char *eq = strchr(assignment, '=');
    if (!eq) {
        ast_error_set(e, "%s: '%s' is not an override; write KEY.PATH=VALUE, e.g. training.epochs=10",
                      CFG_OVERRIDE_FILE, assignment);
        return -1;
    }
    char *path = ast_xstrdup(assignment);
    path[eq - assignment] = '\0';
    int rc = ast_cfg_set(cfg, path, eq + 1, e);
    free(path);
    return rc;
}
