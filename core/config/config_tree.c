/* The config tree: libyaml's event stream into nodes that keep their key
 * path and file position, loading, and lookup by dotted path. */
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_impl.h"

void ast_cfg_fail(ast_error *e, const char *file, int line, int col, const char *path, const char *fmt, ...)
{
    char msg[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (path && *path)
        ast_error_set(e, "%s:%d:%d: %s: %s", file, line, col, path, msg);
    else
        ast_error_set(e, "%s:%d:%d: %s", file, line, col, msg);
}

/* ---- nodes ------------------------------------------------------------------ */

ast_cfg_node *cfg_node_new(ast_cfg_kind kind, const char *file, int line, int col)
{
    ast_cfg_node *n = ast_xcalloc(1, sizeof *n);
    char where[512];
    snprintf(where, sizeof where, "%s:%d:%d", file, line, col);
    n->kind = kind;
    n->file = file;
    n->line = n->key_line = line;
    n->col = n->key_col = col;
    n->where = ast_xstrdup(where);
    n->path = ast_xstrdup("");
    return n;
}

static int index_in_parent(const ast_cfg_node *n)
{
    for (int i = 0; i < n->parent->n_items; i++)
        if (n->parent->items[i] == n) return i;
    AST_ASSERT(0, "config node %s is not among its parent's items", n->path);
}

/* Paths are derived, so they follow a subtree that moves (ast_cfg_set). */
static void set_paths(ast_cfg_node *n)
{
    const ast_cfg_node *p = n->parent;
    char path[1024];
    if (n->key)
        snprintf(path, sizeof path, "%s%s%s", p->path, *p->path ? "." : "", n->key);
    else
        snprintf(path, sizeof path, "%s[%d]", p->path, index_in_parent(n));
    free((char *)n->path);
    n->path = ast_xstrdup(path);
    for (int i = 0; i < n->n_items; i++) set_paths(n->items[i]);
}

void cfg_node_attach(ast_cfg_node *parent, const char *key, ast_cfg_node *child)
{
    AST_ASSERT((parent->kind == AST_CFG_MAP) == (key != NULL), "key %s under a %d node", key, parent->kind);
    parent->items = ast_xrealloc(parent->items, (size_t)(parent->n_items + 1) * sizeof *parent->items);
    parent->items[parent->n_items++] = child;
    child->parent = parent;
    child->key = key ? ast_xstrdup(key) : NULL;
    set_paths(child);
}

ast_cfg_node *cfg_node_clone(const ast_cfg_node *n)
{
    ast_cfg_node *c = cfg_node_new(n->kind, n->file, n->line, n->col);
    c->key_line = n->key_line;
    c->key_col = n->key_col;
    if (n->value) c->value = ast_xstrdup(n->value);
    for (int i = 0; i < n->n_items; i++) cfg_node_attach(c, n->items[i]->key, cfg_node_clone(n->items[i]));
    return c;
}

void cfg_node_replace(ast_cfg_node *old, ast_cfg_node *child)
{
    ast_cfg_node *parent = old->parent;
    int i = index_in_parent(old);
    parent->items[i] = child;
    child->parent = parent;
    child->key = old->key ? ast_xstrdup(old->key) : NULL;
    child->key_line = old->key_line;
    child->key_col = old->key_col;
    set_paths(child);
    old->parent = NULL;
    cfg_node_free(old);
}

void cfg_node_detach(ast_cfg_node *child)
{
    ast_cfg_node *parent = child->parent;
    int i = index_in_parent(child);
    memmove(parent->items + i, parent->items + i + 1, (size_t)(parent->n_items - i - 1) * sizeof *parent->items);
    parent->n_items--;
    child->parent = NULL;
    free((char *)child->key);
    child->key = NULL;
}

void cfg_node_free(ast_cfg_node *n)
{
    if (!n) return;
    for (int i = 0; i < n->n_items; i++) cfg_node_free(n->items[i]);
    free(n->items);
    free((char *)n->key);
    free((char *)n->path);
    free((char *)n->value);
    free((char *)n->where);
    free(n);
}

ast_cfg_node *cfg_child(const ast_cfg_node *map, const char *key)
{
    if (map->kind != AST_CFG_MAP) return NULL;
    for (int i = 0; i < map->n_items; i++)
        if (!strcmp(map->items[i]->key, key)) return map->items[i];
    return NULL;
}

/* ---- parsing -------------------------------------------------------------------- */

typedef struct parser {
    yaml_parser_t yp;
    const char *file;
    const char *base; /* key path of the document's root, for messages */
    const char *text; /* the input, to place reader errors */
    size_t len;
    int depth;        /* collections open around the current node, counting the base path's levels */
    const cfg_place *place; /* NULL: the text is the file */
    ast_error *e;
} parser;

/* The spaces cfg_hydra_yaml put in before byte `at` of the text, on line
 * `line` only (-1: on any line). */
static int inserted_before(const parser *ps, size_t at, int line)
{
    int n = 0;
    for (int i = 0; ps->place && i < ps->place->n_ins; i++)
        n += ps->place->ins[i].byte < at && (line < 0 || ps->place->ins[i].line == line);
    return n;
}

/* The user's 1-based column of 0-based (line, col) of the text, given in
 * characters, or in bytes at byte offset `at`: inserted spaces do not
 * count, and an override's first line starts at its value's column. */
static int column(const parser *ps, int line, int col, size_t at)
{
    const cfg_place *p = ps->place;
    int shift = 0;
    if (at != (size_t)-1)
        shift = inserted_before(ps, at, line);
    else
        for (int i = 0; p && i < p->n_ins; i++) shift += p->ins[i].line == line && p->ins[i].col < col;
    return col + 1 - shift + (p && line == 0 ? p->col0 - 1 : 0);
}

/* libyaml's reader refuses bad bytes before any token exists, so its
 * problem_mark is empty: the line and column come from the byte offset. */
static void fail_reader(parser *ps, const char *path)
{
    const yaml_parser_t *y = &ps->yp;
    size_t at = y->problem_offset < ps->len ? y->problem_offset : ps->len;
    int line = 0, col = 0;
    for (size_t i = 0; i < at; i++, col++)
        if (ps->text[i] == '\n') line++, col = -1;
    col = column(ps, line, col, at);
    at -= (size_t)inserted_before(ps, at, -1);
    line++;
    int utf8 = y->problem && strstr(y->problem, "UTF-8");
    const char *fix = !utf8 ? "remove the character or write it as an escape in a double-quoted string"
                      : strcmp(ps->file, CFG_OVERRIDE_FILE) ? "the text is not valid UTF-8: save the file as UTF-8"
                                                            : "the value is not valid UTF-8: write it in UTF-8";
    ast_cfg_fail(ps->e, ps->file, line, col, path, "%s (%s0x%02x at byte %zu); %s",
                 y->problem ? y->problem : "unreadable input", utf8 ? "byte " : "character ",
                 (unsigned)y->problem_value, at, fix);
}

static int next_event(parser *ps, yaml_event_t *ev, const char *path)
{
    if (yaml_parser_parse(&ps->yp, ev)) return 0;
    if (!*path) path = ps->base;
    const yaml_parser_t *y = &ps->yp;
    if (y->error == YAML_READER_ERROR) {
        fail_reader(ps, path);
        return -1;
    }
    int line = (int)y->problem_mark.line;
    ast_cfg_fail(ps->e, ps->file, line + 1, column(ps, line, (int)y->problem_mark.column, (size_t)-1), path,
             "YAML syntax error: %s%s%s; check the indentation, the ': ' after each key and the quotes",
             y->problem ? y->problem : "unreadable input", y->context ? " " : "",
             y->context ? y->context : "");
    return -1;
}

static int line_of(const yaml_event_t *ev) { return (int)ev->start_mark.line + 1; }
static int col_of(const parser *ps, const yaml_event_t *ev)
{
    return column(ps, (int)ev->start_mark.line, (int)ev->start_mark.column, (size_t)-1);
}

int cfg_text_is_null(const char *v)
{
    return !*v || !strcmp(v, "~") || !strcmp(v, "null") || !strcmp(v, "Null") || !strcmp(v, "NULL");
}

/* Quoted, the same text is a string. */
static int is_null(const yaml_event_t *ev)
{
    return ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && cfg_text_is_null((const char *)ev->data.scalar.value);
}

static int parse_items(parser *ps, ast_cfg_node *n);

/* Each level is a C stack frame of parse_node and parse_items (and later
 * of the validator and the dumper): YAML nested 30,000 deep overflowed the
 * stack, so nesting stops at AST_CFG_MAX_DEPTH with a located error. */
static int parse_collection(parser *ps, ast_cfg_node *n)
{
    if (ps->depth >= AST_CFG_MAX_DEPTH) {
        ast_cfg_fail(ps->e, ps->file, n->line, n->col, "",
                     "nesting deeper than %d levels; a config needs a few levels (plugin options one or two "
                     "more): check for unclosed brackets or flatten the value",
                     AST_CFG_MAX_DEPTH);
        return -1;
    }
    ps->depth++;
    int rc = parse_items(ps, n);
    ps->depth--;
    return rc;
}

/* Builds the node that starts with `ev` under parent (NULL: the root) and
 * reads the rest of it. */
static ast_cfg_node *parse_node(parser *ps, yaml_event_t *ev, ast_cfg_node *parent, const char *key,
                                const char *path_for_errors)
{
    ast_cfg_node *n;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        n = cfg_node_new(is_null(ev) ? AST_CFG_NULL : AST_CFG_SCALAR, ps->file, line_of(ev), col_of(ps, ev));
        if (n->kind == AST_CFG_SCALAR) n->value = ast_xstrdup((const char *)ev->data.scalar.value);
        break;
    case YAML_MAPPING_START_EVENT:
    case YAML_SEQUENCE_START_EVENT:
        n = cfg_node_new(ev->type == YAML_MAPPING_START_EVENT ? AST_CFG_MAP : AST_CFG_SEQ, ps->file,
                         line_of(ev), col_of(ps, ev));
        break;
    case YAML_ALIAS_EVENT:
        ast_cfg_fail(ps->e, ps->file, line_of(ev), col_of(ps, ev), path_for_errors,
                 "YAML aliases (*%s) are not supported; write the value out", ev->data.alias.anchor);
        return NULL;
    default:
        AST_ASSERT(0, "libyaml event %d where a node starts", ev->type);
    }
    if (parent) {
        cfg_node_attach(parent, key, n);
    } else {
        free((char *)n->path);
        n->path = ast_xstrdup(ps->base);
    }
    if ((n->kind == AST_CFG_MAP || n->kind == AST_CFG_SEQ) && parse_collection(ps, n) < 0) {
        if (!parent) cfg_node_free(n);
        return NULL;
    }
    return n;
}

static int fail_key(parser *ps, const ast_cfg_node *map, const yaml_event_t *ev, const char *what)
{
    ast_cfg_fail(ps->e, ps->file, line_of(ev), col_of(ps, ev), map->path,
             "%s; write keys as plain names (key: value)", what);
    return -1;
}

static int parse_map_entry(parser *ps, ast_cfg_node *map, yaml_event_t *kev)
{
    if (kev->type != YAML_SCALAR_EVENT) return fail_key(ps, map, kev, "a key must be a single name");
    const char *key = (const char *)kev->data.scalar.value;
    const ast_cfg_node *first = cfg_child(map, key);
    if (first) {
        ast_cfg_fail(ps->e, ps->file, line_of(kev), col_of(ps, kev), first->path,
                 "duplicate key (first given at line %d, column %d); remove one of the two", first->key_line,
                 first->key_col);
        return -1;
    }
    yaml_event_t vev;
    if (next_event(ps, &vev, map->path) < 0) return -1;
    ast_cfg_node *v = parse_node(ps, &vev, map, key, map->path);
    yaml_event_delete(&vev);
    if (!v) return -1;
    v->key_line = line_of(kev);
    v->key_col = col_of(ps, kev);
    return 0;
}

static int parse_items(parser *ps, ast_cfg_node *n)
{
    yaml_event_type_t end = n->kind == AST_CFG_MAP ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
    for (;;) {
        yaml_event_t ev;
        if (next_event(ps, &ev, n->path) < 0) return -1;
        int rc = 0;
        if (ev.type != end)
            rc = n->kind == AST_CFG_MAP ? parse_map_entry(ps, n, &ev)
                                        : (parse_node(ps, &ev, n, NULL, n->path) ? 0 : -1);
        int done = ev.type == end;
        yaml_event_delete(&ev);
        if (rc < 0) return -1;
        if (done) return 0;
    }
}

/* Reads events up to and including the first of type `want`. */
static int skip_to(parser *ps, yaml_event_type_t want, yaml_event_t *ev)
{
    do {
        if (next_event(ps, ev, "") < 0) return -1;
        if (ev->type == want || ev->type == YAML_STREAM_END_EVENT) return 0;
        yaml_event_delete(ev);
    } while (1);
}

static ast_cfg_node *parse_document(parser *ps)
{
    yaml_event_t ev;
    if (skip_to(ps, YAML_DOCUMENT_START_EVENT, &ev) < 0) return NULL;
    if (ev.type == YAML_STREAM_END_EVENT) { /* empty text: a config without keys, or an override's null (KEY=) */
        ast_cfg_node *n = cfg_node_new(*ps->base ? AST_CFG_NULL : AST_CFG_MAP, ps->file, 1, col_of(ps, &ev));
        yaml_event_delete(&ev);
        free((char *)n->path);
        n->path = ast_xstrdup(ps->base);
        return n;
    }
    yaml_event_delete(&ev);
    if (next_event(ps, &ev, "") < 0) return NULL;
    ast_cfg_node *root = parse_node(ps, &ev, NULL, NULL, ps->base);
    yaml_event_delete(&ev);
    if (!root) return NULL;
    if (skip_to(ps, YAML_DOCUMENT_START_EVENT, &ev) < 0) goto fail;
    int second = ev.type == YAML_DOCUMENT_START_EVENT;
    if (second)
        ast_cfg_fail(ps->e, ps->file, line_of(&ev), col_of(ps, &ev), ps->base,
                 "a second YAML document (---); keep one document per config");
    yaml_event_delete(&ev);
    if (!second) return root;
fail:
    cfg_node_free(root);
    return NULL;
}

/* The levels of a key path ("training.scheduler" is 2, "" is 0): an
 * override's value sits that deep in the config. */
static int path_depth(const char *path)
{
    int n = *path ? 1 : 0;
    for (const char *p = path; *p; p++) n += *p == '.' || *p == '[';
    return n;
}

ast_cfg_node *cfg_parse(const char *text, size_t len, const char *file, const char *path, const cfg_place *place,
                        ast_error *e)
{
    parser ps = {.file = file, .base = path, .text = text, .len = len, .depth = path_depth(path), .place = place, .e = e};
    AST_ASSERT(yaml_parser_initialize(&ps.yp), "libyaml parser initialisation failed");
    yaml_parser_set_input_string(&ps.yp, (const unsigned char *)text, len);
    ast_cfg_node *root = parse_document(&ps);
    yaml_parser_delete(&ps.yp);
    return root;
}

/* ---- loading -------------------------------------------------------------------- */

ast_cfg *ast_cfg_load_string(const char *text, const char *name, ast_error *e)
{
    ast_cfg *cfg = ast_xcalloc(1, sizeof *cfg);
    cfg->name = ast_xstrdup(name);
    cfg->root = cfg_parse(text, strlen(text), cfg->name, "", NULL, e);
    if (!cfg->root) goto fail;
    if (cfg->root->kind != AST_CFG_MAP) {
        ast_cfg_fail(e, cfg->name, cfg->root->line, cfg->root->col, "",
                 "the config must be a mapping of keys; write 'key: value' lines");
        goto fail;
    }
    if (cfg_validate_map(cfg->root, e) < 0) goto fail;
    return cfg;
fail:
    ast_cfg_free(cfg);
    return NULL;
}

static char *read_file(const char *path, ast_error *e)
{
    FILE *f = ast_fopen_regular(path, e);
    if (!f) return NULL;
    size_t cap = 4096, len = 0, got;
    char *text = ast_xmalloc(cap);
    while ((got = fread(text + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) text = ast_xrealloc(text, cap *= 2);
    }
    int failed = ferror(f);
    fclose(f);
    text[len] = '\0';
    if (failed || strlen(text) != len) {
        ast_error_set(e, "%s: cannot read the config (%s); it must be a YAML text file", path,
                      failed ? "read error" : "it contains NUL bytes");
        free(text);
        return NULL;
    }
    return text;
}

ast_cfg *ast_cfg_load_file(const char *path, ast_error *e)
{
    char *text = read_file(path, e);
    if (!text) return NULL;
    ast_cfg *cfg = ast_cfg_load_string(text, path, e);
    free(text);
    return cfg;
}

void ast_cfg_free(ast_cfg *cfg)
{
    if (!cfg) return;
    cfg_node_free(cfg->root);
    free(cfg->name);
    free(cfg);
}

const ast_cfg_node *ast_cfg_get(const ast_cfg *cfg, const char *path)
{
    const ast_cfg_node *n = cfg->root;
    char part[256];
    while (n && *path) {
        size_t len = strcspn(path, ".");
        if (len >= sizeof part) return NULL; /* no key is that long */
        memcpy(part, path, len);
        part[len] = '\0';
        n = cfg_child(n, part);
        path += len + (path[len] == '.');
    }
    return n;
}
