/* Where the configs stand against the baselines, per task: the best config
 * by its mean over seeds against the best baseline by its mean over runs,
 * on the task's primary metric (and its second), with the bootstrap
 * interval of the difference. Said always, win or lose: a model that does
 * not beat a simple baseline on the same cells is the finding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report_internal.h"

int rp_best_config(const rp_sweep *s, rp_source src, const char *key)
{
    int dir = rp_metric_direction(s, key) < 0 ? -1 : 1, best = -1;
    double best_mean = 0.0;
    for (int c = 0; c < s->n_configs; c++) {
        rp_stat st = rp_stat_of(s, c, src, key);
        if (st.n && (best < 0 || dir * (st.mean - best_mean) > 0)) best = c, best_mean = st.mean;
    }
    return best;
}

int rp_best_baseline(const rp_sweep *s, int protocol, const rp_task *t, const char *metric, double *value)
{
    char path[600];
    int dir = rp_metric_direction(s, metric) < 0 ? -1 : 1, best = -1;
    for (int b = 0; b < t->baselines.n; b++) {
        rp_metric_at(t, t->baselines.v[b], metric, path, sizeof path);
        rp_stat st = rp_stat_all(s, protocol, RP_EVAL, path);
        if (st.n && (best < 0 || dir * (st.mean - *value) > 0)) best = b, *value = st.mean;
    }
    return best;
}

/* The difference of config c from baseline b, and its interval: the
 * config's seeds resampled against the baseline's values over runs. */
static double against(const rp_sweep *s, const rp_task *t, int c, int b, const char *metric, double *lo, double *hi)
{
    char path[600];
    double *x = ast_xmalloc((size_t)(s->n_runs + 1) * sizeof *x), *y = ast_xmalloc((size_t)(s->n_runs + 1) * sizeof *y);
    int nx = rp_values(s, c, rp_metric_at(t, "model", metric, path, sizeof path), path, x);
    rp_metric_at(t, t->baselines.v[b], metric, path, sizeof path);
    int ny = rp_values_all(s, s->configs[c].protocol, RP_EVAL, path, y);
    rp_diff_ci(x, nx, y, ny, lo, hi);
    double d = rp_stat_values(x, nx).mean - rp_stat_values(y, ny).mean;
    free(x), free(y);
    return d;
}

int rp_standing_of(const rp_sweep *s, const rp_task *t, const char *metric, char *text, size_t n)
{
    char path[600], st_buf[96], base_buf[32], diff[48], ci[96], span[200];
    rp_source src = rp_metric_at(t, "model", metric, path, sizeof path);
    int c = rp_best_config(s, src, path), dir = rp_metric_direction(s, metric) < 0 ? -1 : 1;
    if (c < 0) return 0;
    rp_stat st = rp_stat_of(s, c, src, path);
    double base = 0.0, lo, hi;
    int b = rp_best_baseline(s, s->configs[c].protocol, t, metric, &base), dec = rp_decimals(st);
    const char *name = s->configs[c].name;
    rp_fmt_stat(st, st_buf, sizeof st_buf);
    if (b < 0) {
        snprintf(text, n, "%s — best config %s: %s %s; eval.json has no baseline to set it against.", t->name, name,
                 metric, st_buf);
        return 1;
    }
    double d = against(s, t, c, b, metric, &lo, &hi);
    snprintf(base_buf, sizeof base_buf, "%.*f", dec, base);
    rp_fmt_diff(d, dec, diff, sizeof diff);
    if (isnan(lo)) snprintf(span, sizeof span, "(difference %s; one seed, so no interval)", diff);
    else snprintf(span, sizeof span, "(difference %s, 95%% CI %s)", diff, rp_fmt_ci(lo, hi, dec, ci, sizeof ci));
    const char *bname = t->baselines.v[b];
    double near_zero = dir > 0 ? lo : hi; /* the end of the interval on the side of no difference */
    const char *note = isnan(lo) || dir * near_zero > 0 ? "" : "; the interval reaches 0, so it is not shown to be better";
    if (dir * d > 0)
        snprintf(text, n, "%s — best config %s: %s %s vs best baseline %s %s %s%s.", t->name, name, metric, st_buf,
                 bname, base_buf, span, note);
    else
        snprintf(text, n, "%s — no config beats the best baseline %s on %s (%s): the best config, %s, has %s %s.",
                 t->name, bname, metric, base_buf, name, st_buf, span);
    return 1;
}

static void standing_sentence(const rp_sweep *s, const rp_task *t, const char *metric, ast_strlist *out)
{
    char text[1024];
    if (rp_standing_of(s, t, metric, text, sizeof text)) ast_strlist_push(out, text);
}

void rp_standing(const rp_sweep *s, ast_strlist *out)
{
    int any = 0;
    for (int t = 0; t < s->n_tasks; t++) {
        const rp_task *task = &s->tasks[t];
        if (!task->primary) continue;
        standing_sentence(s, task, task->primary, out);
        if (task->second) standing_sentence(s, task, task->second, out);
        any = 1;
    }
    if (!any) ast_strlist_push(out, "No run has an evaluation with a primary metric (eval.json), so nothing says where "
                                    "the configs stand against the baselines.");
}
