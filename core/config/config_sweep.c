/* Sweep overrides, Hydra's multirun syntax: KEY=a,b,c, KEY=range(...) and
 * KEY=choice(...) as the list of values `alphast-run sweep -m` and
 * alphast.grid cross (docs/config.md). */
#include <inttypes.h>
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

/* Does s start a call of FN, "FN(" ? */
static int calls(const char *s, const char *fn)
{
    size_t n = strlen(fn);
    return !strncmp(s, fn, n) && s[n] == '(';
}

/* FN(...) at s: the text inside the parentheses, which must close at the
 * end, and in *at its offset in s; NULL if s is no such call. */
static char *call_args(const char *s, const char *fn, size_t *at)
{
    const char *start = skip_blanks(s);
    if (!calls(start, fn)) return NULL;
    const char *open = start + strlen(fn) + 1, *close = strrchr(open, ')');
    if (!close || *skip_blanks(close + 1)) return NULL;
    *at = (size_t)(open - s);
    return cfg_copy_n(open, (size_t)(close - open));
}

int cfg_is_sweep(const char *value)
{
    size_t at;
    char *r = call_args(value, "range", &at), *c = call_args(value, "choice", &at);
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

/* The items of a,b,c (commas outside quotes and brackets), trimmed; col:
 * the list's column in the override. A sweep among them is refused, as
 * Hydra refuses it: splitting choice(b,c) at its comma gave the values
 * "choice(b" and "c)". */
static int split(const char *list, int col, ast_cfg_sweep *s, const where *w, ast_error *e)
{
    for (const char *p = list;;) {
        size_t len = cfg_hydra_item(p);
        const char *item = skip_blanks(p);
        if (calls(item, "choice") || calls(item, "range")) {
            where at = {w->key, col + cfg_columns(list, (size_t)(item - list))};
            return fail(e, &at, "a sweep inside a sweep ('%s'): sweeps do not nest; list every value in one sweep "
                        "(KEY=a,b,c or KEY=choice(a,b,c))", item);
        }
        add_value(s, trimmed(p, len));
        if (s->n > MAX_SWEEP_VALUES) return fail(e, w, "more than 100000 values in '%s'", list);
        if (!p[len]) break;
        p += len + 1;
    }
    for (int i = 0; s->n > 1 && i < s->n; i++)
        if (!*s->values[i]) return fail(e, w, "an empty value in the sweep '%s'; remove the extra ','", list);
    return 0;
}

/* An integer range's values, counted in integers (as doubles, 53 bits,
 * range(9223372036854775000, ...) printed numbers the user never wrote);
 * -1 when it has none or more than MAX_SWEEP_VALUES. Unsigned arithmetic:
 * the span of two int64 values may not fit in one. */
static int int_range(const int64_t a[3], ast_cfg_sweep *s)
{
    uint64_t span, step;
    if (a[2] > 0 && a[1] > a[0])
        span = (uint64_t)a[1] - (uint64_t)a[0], step = (uint64_t)a[2];
    else if (a[2] < 0 && a[1] < a[0])
        span = (uint64_t)a[0] - (uint64_t)a[1], step = 0 - (uint64_t)a[2];
    else
        return -1;
    uint64_t count = span / step + (span % step != 0);
    if (count > MAX_SWEEP_VALUES) return -1;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t v = a[2] > 0 ? (uint64_t)a[0] + i * step : (uint64_t)a[0] - i * step;
        char buf[32];
        snprintf(buf, sizeof buf, "%" PRId64, (int64_t)v);
        add_value(s, ast_xstrdup(buf));
    }
    return 0;
}

/* A range with a fractional bound or step: its values as doubles. */
static int float_range(const double a[3], ast_cfg_sweep *s)
{
    double count = ceil((a[1] - a[0]) / a[2]);
    if (!(count >= 1 && count <= MAX_SWEEP_VALUES)) return -1;
    for (long i = 0; i < (long)count; i++) {
        char buf[40];
        snprintf(buf, sizeof buf, "%.15g", a[0] + (double)i * a[2]);
        add_value(s, ast_xstrdup(buf));
    }
    return 0;
}

/* range(STOP), range(START, STOP) or range(START, STOP, STEP), STOP
 * excluded as in Python (and Hydra); integers unless a bound is not. */
static int range_values(const char *args, int col, ast_cfg_sweep *s, const where *w, ast_error *e)
{
    ast_cfg_sweep nums = {0};
    int64_t n[3] = {0, 0, 1};
    double x[3] = {0, 0, 1};
    int ints = 1, rc = split(args, col, &nums, w, e);
    if (rc == 0 && (nums.n > 3 || !*nums.values[0]))
        rc = fail(e, w, "range(%s) takes 1 to 3 numbers: range(STOP), range(START, STOP) or range(START, STOP, STEP)", args);
    for (int i = 0; rc == 0 && i < nums.n; i++) {
        if (ast_yaml_int(nums.values[i], &n[i]) == 0)
            x[i] = (double)n[i];
        else if (ast_yaml_float(nums.values[i], &x[i]) == 0 && isfinite(x[i]))
            ints = 0;
        else
            rc = fail(e, w, "range(): '%s' is not a number", nums.values[i]);
    }
    if (nums.n == 1) n[1] = n[0], n[0] = 0, x[1] = x[0], x[0] = 0;
    if (rc == 0 && (ints ? int_range(n, s) : float_range(x, s)) < 0)
        rc = fail(e, w, "range(%s) gives no values or more than 100000; check START, STOP and STEP", args);
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
    size_t at = 0;
    char *range = call_args(eq + 1, "range", &at), *choice = range ? NULL : call_args(eq + 1, "choice", &at);
    int col = w.col + cfg_columns(eq + 1, at);
    int rc = range ? range_values(range, col, out, &w, e) : split(choice ? choice : eq + 1, col, out, &w, e);
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
