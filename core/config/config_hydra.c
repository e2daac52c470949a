/* Hydra's override grammar over YAML values (docs/config.md): the prefix
 * (+, ++, ~), key and value of one override, where a value's items end
 * (a,b is a sweep), and Hydra's {a:1}, which YAML would read as the key
 * "a:1". */
#include <stdlib.h>
#include <string.h>

#include "config_impl.h"

int cfg_columns(const char *s, size_t n)
{
    int cols = 0;
    for (size_t i = 0; i < n; i++) cols += ((unsigned char)s[i] & 0xc0) != 0x80;
    return cols;
}

/* ---- reading a value as Hydra's grammar does --------------------------------- */

/* A walk over a value that knows quotes, flow collections and where a
 * node may start (only there do '{', '[' and quotes open something, as in
 * YAML: "a{b" is plain text). */
typedef struct scan {
    char *out;         /* the YAML written so far, or NULL */
    size_t o;
    cfg_place *place;  /* where inserted spaces are noted (with out) */
    int line, col;     /* of the next output character, 0-based, in characters */
    int depth;         /* open flow collections */
    unsigned char map[AST_CFG_MAX_DEPTH], key[AST_CFG_MAX_DEPTH]; /* per level: a '{'; before its key's ':' */
    int node_start;    /* only blanks since a node could start */
    char quote;
} scan;

static void emit(scan *sc, char c)
{
    if (sc->out) sc->out[sc->o++] = c;
    if (c == '\n')
        sc->line++, sc->col = 0;
    else
        sc->col += ((unsigned char)c & 0xc0) != 0x80;
}

static void insert_space(scan *sc)
{
    if (!sc->out) return;
    cfg_place *p = sc->place;
    p->ins = ast_xrealloc(p->ins, (size_t)(p->n_ins + 1) * sizeof *p->ins);
    p->ins[p->n_ins++] = (cfg_ins){sc->o, sc->line, sc->col};
    emit(sc, ' ');
}

/* Levels past the config's nesting limit are not recorded: the parser
 * refuses such a value, naming the limit, once libyaml reads that deep.
 * So that it does, each ':' there counts as a key's ({a:{a:... would stop
 * libyaml with "unexpected ':'" at the first level past the limit). */
static int in_key(const scan *sc)
{
    int d = sc->depth - 1;
    return d >= AST_CFG_MAX_DEPTH || (d >= 0 && sc->map[d] && sc->key[d]);
}

static void set_key(scan *sc, int v)
{
    if (sc->depth > 0 && sc->depth <= AST_CFG_MAX_DEPTH) sc->key[sc->depth - 1] = (unsigned char)v;
}

static void open_flow(scan *sc, char c)
{
    if (sc->depth < AST_CFG_MAX_DEPTH) sc->map[sc->depth] = c == '{', sc->key[sc->depth] = 1;
    sc->depth++;
}

/* One character inside quotes; moves *p past an escape. */
static void quoted_char(scan *sc, const char **p)
{
    char c = **p;
    emit(sc, c);
    int doubled = sc->quote == '\'' && c == '\'' && (*p)[1] == '\'';
    if ((sc->quote == '"' && c == '\\' && (*p)[1]) || doubled) {
        emit(sc, *++*p);
    } else if (c == sc->quote) {
        sc->quote = 0;
    }
}

static int blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\0'; }

/* One character outside quotes; 1 at a comma outside every collection. */
static int plain_char(scan *sc, const char *p)
{
    char c = *p;
    if (blank(c)) {
        /* blanks leave a node's start where it was */
    } else if (sc->node_start && (c == '"' || c == '\'')) {
        sc->quote = c, sc->node_start = 0;
    } else if (sc->node_start && (c == '{' || c == '[')) {
        open_flow(sc, c);
    } else if (!sc->depth) {
        if (c == ',') return 1;
        sc->node_start = 0;
    } else if (c == ',') {
        set_key(sc, 1), sc->node_start = 1;
    } else if (c == '}' || c == ']') {
        sc->depth--, sc->node_start = 0;
    } else if (c == ':' && in_key(sc)) {
        set_key(sc, 0), sc->node_start = 1;
        emit(sc, c);
        if (!blank(p[1])) insert_space(sc);
        return 0;
    } else {
        sc->node_start = 0;
    }
    emit(sc, c);
    return 0;
}

/* The length of s's first item: up to its first comma outside quotes and
 * brackets (with `stop`), else all of it. With out, writes it as YAML. */
static size_t scan_value(const char *s, int stop, char *out, cfg_place *place)
{
    scan sc = {.out = out, .place = place, .node_start = 1};
    const char *p = s;
    for (; *p; p++) {
        if (sc.quote) {
            quoted_char(&sc, &p);
        } else if (plain_char(&sc, p)) { /* a comma between items */
            if (stop) break;
            emit(&sc, ',');
            sc.node_start = 1;
        }
    }
    if (out) out[sc.o] = '\0';
    return (size_t)(p - s);
}

size_t cfg_hydra_item(const char *s) { return scan_value(s, 1, NULL, NULL); }

char *cfg_hydra_yaml(const char *value, cfg_place *place)
{
    char *yaml = ast_xmalloc(2 * strlen(value) + 1); /* at most one space per character */
    scan_value(value, 0, yaml, place);
    return yaml;
}

char *cfg_copy_n(const char *s, size_t n)
{
    char *c = ast_xmalloc(n + 1);
    memcpy(c, s, n);
    c[n] = '\0';
    return c;
}

/* ---- one override ------------------------------------------------------------ */

static int fail_at(ast_error *e, int col, const char *key, const char *msg)
{
    char shown[256];
    ast_cfg_escape(key, shown, sizeof shown);
    ast_cfg_fail(e, CFG_OVERRIDE_FILE, 1, col, shown, "%s", msg);
    return -1;
}

/* A value with several items is a sweep, which an override cannot be. */
static int check_single(const cfg_override *o, ast_error *e)
{
    if (!cfg_is_sweep(o->value)) return 0;
    char shown[128], msg[512];
    ast_cfg_escape(o->value, shown, sizeof shown);
    snprintf(msg, sizeof msg,
             "'%s' is a sweep (several values), which runs with `alphast-run sweep -m` or alphast.grid "
             "(docs/config.md); for one value, quote it or write a list in brackets",
             shown);
    return fail_at(e, o->value_col, o->key, msg);
}

int cfg_override_parse(const char *text, cfg_override *o, ast_error *e)
{
    memset(o, 0, sizeof *o);
    size_t pre = !strncmp(text, "++", 2) ? 2 : text[0] == '+' || text[0] == '~';
    o->op = pre == 2 ? CFG_OP_FORCE : text[0] == '+' ? CFG_OP_ADD : text[0] == '~' ? CFG_OP_DELETE : CFG_OP_SET;
    const char *key = text + pre, *eq = strchr(key, '=');
    size_t n = eq ? (size_t)(eq - key) : strlen(key);
    o->key = cfg_copy_n(key, n);
    o->key_col = (int)pre + 1;
    int rc = 0;
    if (eq) {
        o->value = eq + 1;
        o->value_col = (int)pre + cfg_columns(key, n) + 2;
        rc = check_single(o, e);
    } else if (o->op != CFG_OP_DELETE) {
        rc = fail_at(e, (int)pre + cfg_columns(key, n) + 1, o->key,
                     "no value; write KEY=VALUE to set a key, +KEY=VALUE to add one, ++KEY=VALUE to add or set "
                     "it, ~KEY to delete it (e.g. training.epochs=10)");
    }
    if (rc < 0) {
        free(o->key);
        o->key = NULL;
    }
    return rc;
}

int ast_cfg_override(ast_cfg *cfg, const char *override, ast_error *e)
{
    cfg_override o;
    if (cfg_override_parse(override, &o, e) < 0) return -1;
    cfg_place place = {.col0 = o.value_col};
    char *yaml = o.value ? cfg_hydra_yaml(o.value, &place) : NULL;
    int rc = cfg_edit(cfg, &o, yaml, &place, e);
    free(yaml);
    free(place.ins);
    free(o.key);
    return rc;
}
