/* Plugin options: YAML scalars checked against the plugin's declarative
 * table (type, range, choices), with defaults for the ones not given. */
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "plugin_internal.h"

/* Index of t among "a|b|c", or -1. */
static int choice_index(const char *choices, const char *t)
{
    size_t lt = strlen(t);
    int i = 0;
    for (const char *p = choices; p; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == lt && !strncmp(p, t, len)) return i;
        p = bar ? bar + 1 : NULL;
    }
    return -1;
}

static int in_range(const ast_option_spec *s, double x, const char *t, char *why, size_t n)
{
    if (s->min > s->max || (x >= s->min && x <= s->max)) return 1;
    snprintf(why, n, "must be in [%.10g, %.10g], got %s", s->min, s->max, t);
    return 0;
}

static void choices_list(const char *choices, char *buf, size_t n)
{
    size_t j = 0;
    for (const char *p = choices; *p && j + 3 < n; p++) {
        if (*p == '|') {
            buf[j++] = ',';
            buf[j++] = ' ';
        } else {
            buf[j++] = *p;
        }
    }
    buf[j] = '\0';
}

int ast_option_parse(const ast_option_spec *s, const char *t, ast_optval *out, char *why, size_t n)
{
    char list[512];
    int flag;
    *out = (ast_optval){0};
    switch (s->type) {
    case AST_OPT_BOOL:
        if (!ast_yaml_bool(t, &flag)) return out->i = flag, out->f = flag, 1;
        snprintf(why, n, "expected a boolean (true/false, yes/no, on/off), got '%s'", t);
        return 0;
    case AST_OPT_INT:
        if (ast_yaml_int(t, &out->i)) {
            snprintf(why, n, "expected an integer, got '%s'", t);
            return 0;
        }
        out->f = (double)out->i;
        return in_range(s, out->f, t, why, n);
    case AST_OPT_FLOAT:
        if (ast_yaml_float(t, &out->f)) {
            snprintf(why, n, "expected a number (like 0.5 or 1e-4), got '%s'", t);
            return 0;
        }
        return in_range(s, out->f, t, why, n);
    case AST_OPT_ENUM:
        out->i = choice_index(s->choices, t);
        out->s = t;
        if (out->i >= 0) return 1;
        choices_list(s->choices, list, sizeof list);
        snprintf(why, n, "must be one of %s; got '%s'", list, t);
        return 0;
    case AST_OPT_STRING:
        out->s = t;
        return 1;
    }
    snprintf(why, n, "has an unknown type %d", (int)s->type);
    return 0;
}

static const char *where_of(const ast_optsrc *o) { return o->where ? o->where : "options"; }

static int find_option(const ast_plugin_desc *d, const char *key)
{
    for (int i = 0; i < d->n_options; i++)
        if (!strcmp(d->options[i].name, key)) return i;
    return -1;
}

static void unknown_option(const ast_plugin *p, const ast_optsrc *o, ast_error *e)
{
    const ast_plugin_desc *d = &p->desc;
    ast_strlist names = {0};
    char list[512];
    for (int i = 0; i < d->n_options; i++) ast_strlist_push(&names, d->options[i].name);
    const char *near = ast_did_you_mean(o->key, (const char *const *)names.v, names.n);
    if (near)
        ast_error_set(e, "%s: %s plugin '%s' has no option '%s' (did you mean '%s'?)", where_of(o), ast_kind_name(p->kind),
                      p->name, o->key, near);
    else
        ast_error_set(e, "%s: %s plugin '%s' has no option '%s' (its options: %s)", where_of(o), ast_kind_name(p->kind),
                      p->name, o->key, ast_strlist_join(&names, ", ", "none", list, sizeof list));
    ast_strlist_free(&names);
}

/* Index of the option set, or -1 with e set. given_at[k] is the src entry
 * that set option k so far (-1: none). */
static int apply_option(const ast_plugin *p, const ast_optsrc *src, int j, const int *given_at, ast_optval *out,
                        ast_error *e)
{
    const ast_optsrc *o = &src[j];
    char why[768];
    AST_ASSERT(o->key && o->value, "option %d has no key or value", j);
    int k = find_option(&p->desc, o->key);
    if (k < 0) {
        unknown_option(p, o, e);
        return -1;
    }
    if (given_at[k] >= 0) {
        ast_error_set(e, "%s: option '%s' of %s plugin '%s' is already given at %s; keep one", where_of(o), o->key,
                      ast_kind_name(p->kind), p->name, where_of(&src[given_at[k]]));
        return -1;
    }
    if (!ast_option_parse(&p->desc.options[k], o->value, &out[k], why, sizeof why)) {
        ast_error_set(e, "%s: option '%s' of %s plugin '%s' %s", where_of(o), o->key, ast_kind_name(p->kind), p->name, why);
        return -1;
    }
    return k;
}

int ast_plugin_options(const ast_plugin *p, const ast_optsrc *src, int n_src, ast_optval *out, ast_error *e)
{
    const ast_plugin_desc *d = &p->desc;
    int ok = 1, *given_at = ast_xmalloc((size_t)(d->n_options + 1) * sizeof *given_at);
    char why[768];
    for (int i = 0; i < d->n_options; i++) {
        given_at[i] = -1;
        /* Defaults were checked when the plugin was loaded. */
        ok = ast_option_parse(&d->options[i], d->options[i].def, &out[i], why, sizeof why);
        AST_ASSERT(ok, "default of option %s: %s", d->options[i].name, why);
    }
    for (int j = 0; j < n_src && ok; j++) {
        int k = apply_option(p, src, j, given_at, out, e);
        ok = k >= 0;
        if (ok) given_at[k] = j;
    }
    free(given_at);
    return ok;
}
