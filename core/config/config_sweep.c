/* Sweep overrides, Hydra's multirun syntax: KEY=a,b,c, KEY=range(...) and
 * KEY=choice(...) as the list of values `alphast-run sweep -m` and
 * alphast.grid cross (docs/config.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config_impl.h"

enum { MAX_SWEEP_VALUES = 100000 };

static const char *skip_blanks(const char *s) { return s + strspn(s, " \t"); }

/* s without its leading and trailing blanks, the first n bytes of it. */
static char *trimmed(const char *s, size_t n)
{
    const char *b = skip_blanks(s);
    n -= (size_t)(b - s);
    while (n && (b[n - 1] == ' ' || b[n - 1] == '\t')) n--;
    return cfg_copy_n(b, n);
}

/* FN(...) at s: the text inside the parentheses, which must close at the
 * end; NULL if s is no such call. */
static char *call_args(const char *s, const char *fn)
{
    s = skip_blanks(s);
    size_t n = strlen(fn);
    if (strncmp(s, fn, n) || s[n] != '(') return NULL;
    const char *open = s + n + 1, *close = strrchr(open, ')');
    if (!close || *skip_blanks(close + 1)) return NULL;
    return cfg_copy_n(open, (size_t)(close - open));
}

int cfg_is_sweep(const char *value)
{
    char *r = call_args(value, "range"), *c = call_args(value, "choice");
    int sweep = r || c || value[cfg_hydra_item(value)] == ',';
    free(r);
    free(c);
    return sweep;
}

static void add_value(ast_cfg_sweep *s, char *v)
{
    s->values = ast_xrealloc(s->values, (size_t)(s->n + 1) * sizeof *s->values);
    s->values[s->n++] = v;
}

typedef struct where {
    const char *key;
    int col; /* of the value in the override */
} where;

static int fail(ast_error *e, const where *w, const char *msg, const char *text)
{
    char key[256], shown[128], full[512];
    ast_cfg_escape(w->key, key, sizeof key);
    ast_cfg_escape(text, shown, sizeof shown);
    snprintf(full, sizeof full, msg, shown);
    ast_cfg_fail(e, CFG_OVERRIDE_FILE, 1, w->col, key, "%s", full);
    return -1;
}

/* The items of a,b,c (commas outside quotes and brackets), trimmed. */
static int split(const char *list, ast_cfg_sweep *s, const where *w, ast_error *e)
{
    for (const char *p = list;;) {
        size_t len = cfg_hydra_item(p);
        add_value(s, trimmed(p, len));
        if (s->n > MAX_SWEEP_VALUES) return fail(e, w, "more than 100000 values in '%s'", list);
        if (!p[len]) break;
        p += len + 1;
    }
    for (int i = 0; s->n > 1 && i < s->n; i++)
        if (!*s->values[i]) return fail(e, w, "an empty value in the sweep '%s'; remove the extra ','", list);
    return 0;
}

/* range(STOP), range(START, STOP) or range(START, STOP, STEP), STOP
 * excluded as in Python (and Hydra); integers unless a bound is not. */
static int range_values(const char *args, ast_cfg_sweep *s, const where *w, ast_error *e)
{
    ast_cfg_sweep nums = {0};
    double a[3] = {0, 0, 1};
    int ints = 1, rc = split(args, &nums, w, e);
    if (rc == 0 && (nums.n > 3 || !*nums.values[0]))
        rc = fail(e, w, "range(%s) takes 1 to 3 numbers: range(STOP), range(START, STOP) or range(START, STOP, STEP)", args);
    for (int i = 0; rc == 0 && i < nums.n; i++) {
        int64_t v;
        if (ast_yaml_int(nums.values[i], &v) == 0)
            a[i] = (double)v;
        else if (ast_yaml_float(nums.values[i], &a[i]) == 0 && isfinite(a[i]))
            ints = 0;
        else
            rc = fail(e, w, "range(): '%s' is not a number", nums.values[i]);
    }
    if (nums.n == 1) a[1] = a[0], a[0] = 0;
    double count = rc ? 0 : ceil((a[1] - a[0]) / a[2]);
    if (rc == 0 && !(count >= 1 && count <= MAX_SWEEP_VALUES))
        rc = fail(e, w, "range(%s) gives no values or more than 100000; check START, STOP and STEP", args);
    for (long i = 0; rc == 0 && i < (long)count; i++) {
        char buf[40];
        double v = a[0] + (double)i * a[2];
        snprintf(buf, sizeof buf, ints ? "%.0f" : "%.15g", v);
        add_value(s, ast_xstrdup(buf));
    }
    ast_cfg_sweep_free(&nums);
    return rc;
}

int ast_cfg_sweep_parse(const char *override, ast_cfg_sweep *out, ast_error *e)
{
    memset(out, 0, sizeof *out);
    const char *eq = strchr(override, '=');
    if (!eq && override[0] == '~') { /* a deletion, the same in every point */
        out->key = ast_xstrdup(override);
        return 0;
    }
    out->key = cfg_copy_n(override, eq ? (size_t)(eq - override) : strlen(override));
    where w = {out->key, cfg_columns(override, strlen(out->key)) + 2};
    if (!eq || eq == override) {
        w = (where){"", 1};
        fail(e, &w, "'%s' is not a sweep; write KEY=V1,V2,... (e.g. attention=linear,gated), KEY=range(1,4) or "
                    "KEY=choice(a,b)", override);
        ast_cfg_sweep_free(out);
        return -1;
    }
    char *range = call_args(eq + 1, "range"), *choice = call_args(eq + 1, "choice");
    int rc = range ? range_values(range, out, &w, e) : split(choice ? choice : eq + 1, out, &w, e);
    free(range);
    free(choice);
    if (rc < 0) ast_cfg_sweep_free(out);
    return rc;
}

void ast_cfg_sweep_free(ast_cfg_sweep *s)
{
    for (int i = 0; i < s->n; i++) free(s->values[i]);
    free(s->values);
    free(s->key);
    memset(s, 0, sizeof *s);
}
