/* The report's plots: training and validation loss, and each monitored
 * metric, over optimiser steps, one line per config (mean over its seeds)
 * with the min-max band; and per task its primary metric as a dot per
 * seed against the baselines. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

enum { MAX_POINTS = 200 }; /* per line: enough for the shape, small files */

typedef const rp_series *(*series_fn)(const rp_run *r, const char *key);

static const rp_series *train_loss(const rp_run *r, const char *key) { return &r->train_loss; }
static const rp_series *val_loss(const rp_run *r, const char *key) { return &r->val_loss; }

static const rp_series *monitor_curve(const rp_run *r, const char *key)
{
    for (int i = 0; i < r->n_mon; i++)
        if (!strcmp(r->mon[i].name, key)) return &r->mon[i].curve;
    return NULL;
}

/* The bands of every config that has the curve; returns how many lines. */
static int config_lines(const rp_sweep *s, series_fn pick, const char *key, rp_band *bands, rp_line *lines)
{
    int n = 0;
    const rp_series **seeds = ast_xmalloc((size_t)(s->n_runs + 1) * sizeof *seeds);
    for (int c = 0; c < s->n_configs; c++) {
        int k = 0;
        for (int i = 0; i < s->configs[c].n_runs; i++) {
            const rp_series *ser = pick(&s->runs[s->configs[c].runs[i]], key);
            if (ser && ser->n) seeds[k++] = ser;
        }
        if (!k) continue;
        rp_band_of(seeds, k, MAX_POINTS, &bands[n]);
        lines[n] = (rp_line){s->configs[c].name, c, &bands[n]};
        n++;
    }
    free(seeds);
    return n;
}

static void push(rp_figures *f, const char *file, const char *caption, char *svg, char *svg_file)
{
    f->v = ast_xrealloc(f->v, (size_t)(f->n + 1) * sizeof *f->v);
    f->v[f->n++] = (rp_figure){ast_xstrdup(file), ast_xstrdup(caption), svg, svg_file};
}

static void add_figure(rp_figures *f, const rp_sweep *s, series_fn pick, const char *key, const char *file,
                       const char *title, const char *caption)
{
    rp_band *bands = ast_xcalloc((size_t)s->n_configs, sizeof *bands);
    rp_line *lines = ast_xcalloc((size_t)s->n_configs, sizeof *lines);
    int n = config_lines(s, pick, key, bands, lines);
    if (n)
        push(f, file, caption, rp_svg_plot(title, "optimiser step", title, lines, n, 0),
             rp_svg_plot(title, "optimiser step", title, lines, n, 1));
    for (int i = 0; i < n; i++) rp_band_free(&bands[i]);
    free(bands), free(lines);
}

/* ("monitor", "moe/expert entropy") -> "report_monitor_moe_expert_entropy.svg" */
static void figure_file(const char *kind, const char *name, char *buf, size_t n)
{
    int used = snprintf(buf, n, "report_%s_", kind);
    for (const char *p = name; *p && (size_t)used + 5 < n; p++) buf[used++] = isalnum((unsigned char)*p) ? *p : '_';
    snprintf(buf + used, n - (size_t)used, ".svg");
}

/* The columns: each config's values over seeds (into v, which holds them all). */
static int dot_columns(const rp_sweep *s, rp_source src, const char *key, double *v, rp_dots *cols)
{
    int n = 0, used = 0;
    for (int c = 0; c < s->n_configs; c++) {
        int k = rp_values(s, c, src, key, v + used);
        if (k) cols[n++] = (rp_dots){s->configs[c].name, c, v + used, k};
        used += k;
    }
    return n;
}

static void add_dots(rp_figures *f, const rp_sweep *s, const rp_task *t)
{
    char path[600], file[300], title[300], caption[700];
    double *v = ast_xmalloc((size_t)(s->n_runs + 1) * sizeof *v);
    rp_dots *cols = ast_xcalloc((size_t)s->n_configs, sizeof *cols);
    rp_hline *lines = ast_xcalloc((size_t)t->baselines.n + 1, sizeof *lines);
    int n_cols = dot_columns(s, rp_metric_at(t, "model", t->primary, path, sizeof path), path, v, cols), n_lines = 0;
    for (int b = 0; b < t->baselines.n; b++) {
        rp_metric_at(t, t->baselines.v[b], t->primary, path, sizeof path);
        rp_stat st = rp_stat_all(s, RP_EVAL, path);
        if (st.n) lines[n_lines++] = (rp_hline){t->baselines.v[b], st.mean};
    }
    figure_file(t->name, t->primary, file, sizeof file);
    snprintf(title, sizeof title, "%s: %s", t->name, t->primary);
    snprintf(caption, sizeof caption,
             "%s on %s (%s is better): a dot per seed, a bar at each config's mean; dashed, the baselines (mean over "
             "runs).", t->primary, t->name, rp_metric_direction(t->primary) < 0 ? "lower" : "higher");
    if (n_cols)
        push(f, file, caption, rp_svg_dots(title, t->primary, cols, n_cols, lines, n_lines, 0),
             rp_svg_dots(title, t->primary, cols, n_cols, lines, n_lines, 1));
    free(v), free(cols), free(lines);
}

void rp_figures_make(const rp_sweep *s, rp_figures *f)
{
    char file[300], caption[600];
    memset(f, 0, sizeof *f);
    add_figure(f, s, train_loss, NULL, "report_loss.svg", "training loss",
               "Training loss per step: mean over seeds, shaded from the lowest to the highest seed.");
    add_figure(f, s, val_loss, NULL, "report_val_loss.svg", "validation loss",
               "Validation loss after each epoch: mean over seeds, shaded from the lowest to the highest seed.");
    for (int m = 0; m < s->monitors.n; m++) {
        const char *metric = s->monitors.v[m];
        /* flags are in the verdict; dotted names are breakdowns (per time
         * bucket and expert) that the table lists without a plot each */
        if (rp_is_warning_flag(metric) || strchr(metric, '.')) continue;
        figure_file("monitor", metric, file, sizeof file);
        snprintf(caption, sizeof caption, "%s per step, over layers: mean over seeds, shaded min-max.",
                 rp_metric_label(metric));
        add_figure(f, s, monitor_curve, metric, file, rp_metric_label(metric), caption);
    }
    for (int t = 0; t < s->n_tasks; t++)
        if (s->tasks[t].primary) add_dots(f, s, &s->tasks[t]);
}

void rp_figures_free(rp_figures *f)
{
    for (int i = 0; i < f->n; i++) free(f->v[i].file), free(f->v[i].caption), free(f->v[i].svg), free(f->v[i].svg_file);
    free(f->v);
    memset(f, 0, sizeof *f);
}

const rp_figure *rp_figure_find(const rp_figures *f, const char *file)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->v[i].file, file)) return &f->v[i];
    return NULL;
}

const rp_figure *rp_task_figure(const rp_figures *f, const rp_task *t)
{
    char file[300];
    if (!t->primary) return NULL;
    figure_file(t->name, t->primary, file, sizeof file);
    return rp_figure_find(f, file);
}
