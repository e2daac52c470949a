/* Reading values (with the schema's defaults) and plugins, and checking
 * text that does not come through libyaml. */
#include <string.h>

#include "config_impl.h"

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

/* ast_cfg_bad_text also stops at control characters, which are text here. */
int ast_utf8_text(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++) {
        long bad = ast_cfg_bad_text(s + i, n - i);
        if (bad < 0) return 1;
        i += (size_t)bad;
        if ((unsigned char)s[i] >= 0x20 && s[i] != 0x7f) return 0;
    }
    return 1;
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
