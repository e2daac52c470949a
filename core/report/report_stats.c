/* Numbers per config: a quantity's values over seeds, mean ± sd, how to
 * print them, and which way is better for a metric. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/stats.h"
#include "report_internal.h"

static double monitor_last(const rp_run *r, const char *name)
{
    for (int i = 0; i < r->n_mon; i++)
        if (!strcmp(r->mon[i].name, name) && r->mon[i].curve.n) return r->mon[i].curve.y[r->mon[i].curve.n - 1];
    return NAN;
}

/* Quantities the report derives from summary.json's raw ones. */
static double summary_value(const rp_run *r, const char *key)
{
    if (!strcmp(key, "step_ms")) return 1000.0 / rp_json_number(r->summary, "steps_per_second");
    if (!strcmp(key, "peak_arena_mib")) return rp_json_number(r->summary, "peak_arena_bytes") / 1048576.0;
    if (!strcmp(key, "peak_rss_mib")) return rp_json_number(r->summary, "peak_rss_bytes") / 1048576.0;
    return rp_json_number(r->summary, key);
}

static double run_value(const rp_run *r, rp_source src, const char *key)
{
    switch (src) {
    case RP_SUMMARY: return summary_value(r, key);
    case RP_EVAL: return rp_json_number(r->eval, key);
    case RP_MONITOR_LAST: return monitor_last(r, key);
    }
    return NAN;
}

rp_source rp_metric_at(const rp_task *t, const char *side, const char *key, char *path, size_t n)
{
    if (!t) return snprintf(path, n, "%s", key), RP_SUMMARY;
    if (!strcmp(side, "model")) snprintf(path, n, "%s.model.%s", t->name, key);
    else snprintf(path, n, "%s.baselines.%s.%s", t->name, side, key);
    return RP_EVAL;
}

int rp_values(const rp_sweep *s, int config, rp_source src, const char *key, double *out)
{
    const rp_config *c = &s->configs[config];
    int n = 0;
    for (int i = 0; i < c->n_runs; i++) {
        double v = run_value(&s->runs[c->runs[i]], src, key);
        if (isfinite(v)) out[n++] = v;
    }
    return n;
}

int rp_values_all(const rp_sweep *s, int protocol, rp_source src, const char *key, double *out)
{
    int n = 0;
    for (int c = 0; c < s->n_configs; c++)
        if (protocol < 0 || s->configs[c].protocol == protocol) n += rp_values(s, c, src, key, out + n);
    return n;
}

rp_stat rp_stat_values(const double *v, int n)
{
    rp_stat st = {.n = n, .mean = NAN, .sd = NAN, .min = NAN, .max = NAN};
    if (!n) return st;
    ast_mean_sd(v, n, &st.mean, &st.sd);
    st.min = st.max = v[0];
    for (int i = 1; i < n; i++) st.min = fmin(st.min, v[i]), st.max = fmax(st.max, v[i]);
    return st;
}

rp_stat rp_stat_of(const rp_sweep *s, int config, rp_source src, const char *key)
{
    double *v = ast_xmalloc((size_t)(s->configs[config].n_runs + 1) * sizeof *v);
    rp_stat st = rp_stat_values(v, rp_values(s, config, src, key, v));
    free(v);
    return st;
}

rp_stat rp_stat_all(const rp_sweep *s, int protocol, rp_source src, const char *key)
{
    double *v = ast_xmalloc((size_t)(s->n_runs + 1) * sizeof *v);
    rp_stat st = rp_stat_values(v, rp_values_all(s, protocol, src, key, v));
    free(v);
    return st;
}

/* Both numbers to the precision the spread supports: two significant
 * digits of the sd, at least three of the mean (an sd at rounding level
 * of the mean counts as zero). */
int rp_decimals(rp_stat st)
{
    if (!st.n) return 3;
    double mag = fabs(st.mean) > 0 ? floor(log10(fabs(st.mean))) : 0;
    int dec = (int)fmax(0, 2 - mag);
    if (st.n > 1 && st.sd > 1e-12 * fabs(st.mean)) dec = (int)fmax(dec, 1 - floor(log10(st.sd)));
    return dec > 12 ? 12 : dec;
}

const char *rp_fmt_stat(rp_stat st, char *buf, size_t n)
{
    if (!st.n) return snprintf(buf, n, "n/a"), buf;
    int dec = rp_decimals(st);
    if (st.n == 1) snprintf(buf, n, "%.*f", dec, st.mean);
    else snprintf(buf, n, "%.*f ± %.*f", dec, st.mean, dec, st.sd);
    return buf;
}

const char *rp_fmt_pnum(double p, char *buf, size_t n)
{
    if (isnan(p)) snprintf(buf, n, "n/a");
    else if (p < 0.001) snprintf(buf, n, "< 0.001");
    else snprintf(buf, n, "%.2g", p);
    return buf;
}

const char *rp_fmt_p(double p, char *buf, size_t n)
{
    char num[32];
    rp_fmt_pnum(p, num, sizeof num);
    snprintf(buf, n, "p%s%s", num[0] == '<' || isnan(p) ? " " : " = ", num);
    return buf;
}

const char *rp_fmt_diff(double d, int dec, char *buf, size_t n)
{
    if (!isfinite(d)) snprintf(buf, n, "n/a");
    else snprintf(buf, n, "%+.*f", dec, d);
    return buf;
}

const char *rp_fmt_ci(double lo, double hi, int dec, char *buf, size_t n)
{
    if (!isfinite(lo) || !isfinite(hi)) snprintf(buf, n, "n/a");
    else snprintf(buf, n, "[%+.*f, %+.*f]", dec, lo, dec, hi);
    return buf;
}

/* What eval.json's "metrics" says of key (its last dotted part), from the
 * first run that says anything; NULL when none does. */
static const cJSON *metric_def(const rp_sweep *s, const char *key, const char *field)
{
    const char *dot = strrchr(key, '.'), *k = dot ? dot + 1 : key;
    for (int r = 0; s && r < s->n_runs; r++) {
        const cJSON *def = cJSON_GetObjectItemCaseSensitive(s->runs[r].metric_defs, k);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(def, field);
        if (cJSON_IsString(v)) return v;
    }
    return NULL;
}

/* Names for what eval.json does not label: the training losses, the
 * gradient norm and the older eval.json's knn_preservation. */
const char *rp_metric_label(const rp_sweep *s, const char *key)
{
    static const char *const names[][2] = {
        {"best_val_loss", "validation loss (best)"},
        {"last_val_loss", "validation loss (last)"},
        {"last_train_loss", "training loss (last)"},
        {"knn_preservation", "kNN preservation"},
        {"train/grad_norm", "gradient norm (whole model)"},
    };
    const cJSON *label = metric_def(s, key, "label");
    if (label) return label->valuestring;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i][0], key)) return names[i][1];
    return key;
}

static int in(const char *key, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(key, list[i])) return 1;
    return 0;
}

/* The direction of a key eval.json does not declare: the training losses,
 * the report's own morans_i_abs_error, and every metric of an eval.json
 * written before "metrics" was (the rule those reports were made with). */
static int guessed_direction(const char *k)
{
    static const char *const higher[] = {"cosine", "spearman"};
    static const char *const lower[] = {"rmsd", "procrustes", "dist_mse", "mse", "mae"};
    size_t len = strlen(k);
    if (!strncmp(k, "knn_", 4) || !strncmp(k, "graph_", 6) || !strncmp(k, "pcc_", 4) || strstr(k, "agreement") ||
        (!strncmp(k, "dist_", 5) && (strstr(k, "pearson") || strstr(k, "spearman"))) ||
        in(k, higher, sizeof higher / sizeof *higher))
        return 1;
    if (in(k, lower, sizeof lower / sizeof *lower) || strstr(k, "loss") || (len > 6 && !strcmp(k + len - 6, "_error")))
        return -1;
    return 0;
}

int rp_metric_direction(const rp_sweep *s, const char *key)
{
    const cJSON *better = metric_def(s, key, "better");
    const char *dot = strrchr(key, '.');
    if (!better) return guessed_direction(dot ? dot + 1 : key);
    return !strcmp(better->valuestring, "higher") ? 1 : !strcmp(better->valuestring, "lower") ? -1 : 0;
}
