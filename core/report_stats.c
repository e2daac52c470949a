/* Numbers per config: a quantity's values over seeds, mean ± sd, and the
 * comparison with the baseline config (change and Welch p-value). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alphast/stats.h"
#include "report_internal.h"

static double monitor_last(const rp_run *r, const char *name)
{
    for (int i = 0; i < r->n_mon; i++)
        if (!strcmp(r->mon[i].name, name) && r->mon[i].curve.n) return r->mon[i].curve.y[r->mon[i].curve.n - 1];
    return NAN;
}

static double eval_value(const rp_run *r, const char *side, const char *key)
{
    char path[600];
    snprintf(path, sizeof path, "%s.%s", side, key);
    double v = rp_json_number(r->eval, path);
    /* an eval.json without a "model" object holds the model's metrics at the top */
    if (isnan(v) && !strcmp(side, "model") && !cJSON_GetObjectItemCaseSensitive(r->eval, "model"))
        v = rp_json_number(r->eval, key);
    return v;
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
    case RP_EVAL: return eval_value(r, "model", key);
    case RP_EVAL_RANDOM: return eval_value(r, "random", key);
    case RP_MONITOR_LAST: return monitor_last(r, key);
    }
    return NAN;
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

static rp_stat stat_of(const double *v, int n)
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
    rp_stat st = stat_of(v, rp_values(s, config, src, key, v));
    free(v);
    return st;
}

rp_cmp rp_compare(const rp_sweep *s, int config, rp_source src, const char *key)
{
    double *a = ast_xmalloc((size_t)(s->configs[config].n_runs + 1) * sizeof *a);
    double *b = ast_xmalloc((size_t)(s->configs[s->baseline].n_runs + 1) * sizeof *b);
    int na = rp_values(s, config, src, key, a), nb = rp_values(s, s->baseline, src, key, b);
    rp_cmp c = {.a = stat_of(a, na), .base = stat_of(b, nb), .p = NAN};
    c.change_pct = 100.0 * (c.a.mean - c.base.mean) / fabs(c.base.mean);
    ast_welch w;
    if (ast_welch_test(a, na, b, nb, &w) == 0) c.p = w.p;
    free(a), free(b);
    return c;
}

/* Both numbers to the precision the spread supports: two significant
 * digits of the sd, at least three of the mean (an sd at rounding level
 * of the mean counts as zero). */
const char *rp_fmt_stat(rp_stat st, char *buf, size_t n)
{
    if (!st.n) return snprintf(buf, n, "n/a"), buf;
    double mag = fabs(st.mean) > 0 ? floor(log10(fabs(st.mean))) : 0;
    int dec = (int)fmax(0, 2 - mag);
    if (st.n > 1 && st.sd > 1e-12 * fabs(st.mean)) dec = (int)fmax(dec, 1 - floor(log10(st.sd)));
    if (dec > 12) dec = 12;
    if (st.n == 1) snprintf(buf, n, "%.*f", dec, st.mean);
    else snprintf(buf, n, "%.*f ± %.*f", dec, st.mean, dec, st.sd);
    return buf;
}

const char *rp_fmt_p(double p, char *buf, size_t n)
{
    if (isnan(p)) snprintf(buf, n, "p n/a");
    else if (p < 0.001) snprintf(buf, n, "p < 0.001");
    else snprintf(buf, n, "p = %.2g", p);
    return buf;
}

const char *rp_fmt_pct(double pct, char *buf, size_t n)
{
    if (!isfinite(pct)) snprintf(buf, n, "n/a");
    else snprintf(buf, n, "%+.1f%%", pct);
    return buf;
}

const char *rp_metric_label(const char *key)
{
    static const char *const names[][2] = {
        {"best_val_loss", "validation loss (best)"},
        {"last_val_loss", "validation loss (last)"},
        {"last_train_loss", "training loss (last)"},
        {"knn_preservation", "kNN preservation"},
        {"dist_pearson", "distance correlation (Pearson)"},
        {"dist_spearman", "distance correlation (Spearman)"},
        {"procrustes", "Procrustes disparity"},
        {"train/grad_norm", "gradient norm (whole model)"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i][0], key)) return names[i][1];
    return key;
}
