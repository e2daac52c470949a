/* The report's plots: the key metrics as a dot per seed with each
 * config's mean and interval against the baselines; training and
 * validation loss and each monitored metric over optimiser steps, one line
 * per config (mean over its seeds) with the min-max band, leaving out
 * lines that are zero throughout; and routing by diffusion time. */
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

/* Zero at every step and in every seed: a flat line on the axis, better said in words. */
static int all_zero(const rp_band *b)
{
    for (int i = 0; i < b->n; i++)
        if (b->lo[i] != 0 || b->hi[i] != 0) return 0;
    return 1;
}

/* Drops the lines that are zero throughout, naming them in `zero`; returns how many are left. */
static int drop_zero_lines(rp_line *lines, int n, ast_strlist *zero)
{
    int kept = 0;
    for (int i = 0; i < n; i++)
        if (all_zero(lines[i].band)) ast_strlist_push(zero, lines[i].label);
        else lines[kept++] = lines[i];
    return kept;
}

static void add_figure(rp_figures *f, const rp_sweep *s, series_fn pick, const char *key, const char *file,
                       const char *title, const char *caption)
{
    rp_band *bands = ast_xcalloc((size_t)s->n_configs, sizeof *bands);
    rp_line *lines = ast_xcalloc((size_t)s->n_configs, sizeof *lines);
    ast_strlist zero = {0};
    int n = config_lines(s, pick, key, bands, lines), drawn = drop_zero_lines(lines, n, &zero);
    char text[1200], names[400];
    ast_strlist_join(&zero, ", ", "", names, sizeof names);
    if (drawn) {
        snprintf(text, sizeof text, "%s%s%s%s", caption, zero.n ? " Zero throughout, so not drawn: " : "", names,
                 zero.n ? "." : "");
        push(f, file, text, rp_svg_plot(title, title, lines, drawn, 0), rp_svg_plot(title, title, lines, drawn, 1));
    } else if (n) {
        snprintf(text, sizeof text, "%s (zero throughout in every run)", title);
        ast_strlist_push(&f->not_drawn, text);
    }
    for (int i = 0; i < n; i++) rp_band_free(&bands[i]);
    ast_strlist_free(&zero);
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

/* What one key metric's panel shows, and the storage it points into. */
typedef struct key_panel {
    const rp_task *task; /* NULL: a training loss */
    const char *metric;
    char title[300];
    rp_dots *cols;
    rp_hline *lines;
    double *v;
} key_panel;

/* Fills p from k->task and k->metric; returns whether any config has the metric. */
static int fill_panel(rp_panel *p, key_panel *k, const rp_sweep *s)
{
    char path[600];
    const rp_task *t = k->task;
    int dir = rp_metric_direction(k->metric);
    k->cols = ast_xcalloc((size_t)s->n_configs, sizeof *k->cols);
    k->lines = ast_xcalloc((size_t)(t ? t->baselines.n : 0) + 1, sizeof *k->lines);
    k->v = ast_xcalloc((size_t)s->n_runs + 1, sizeof *k->v);
    snprintf(k->title, sizeof k->title, "%s%s%s%s", t ? t->name : "", t ? ": " : "", rp_metric_label(k->metric),
             dir > 0 ? ", higher is better" : dir < 0 ? ", lower is better" : "");
    *p = (rp_panel){k->title, rp_metric_label(k->metric), k->cols, 0, k->lines, 0};
    p->n_cols = dot_columns(s, rp_metric_at(t, "model", k->metric, path, sizeof path), path, k->v, k->cols);
    for (int b = 0; t && b < t->baselines.n; b++) {
        rp_metric_at(t, t->baselines.v[b], k->metric, path, sizeof path);
        rp_stat st = rp_stat_all(s, RP_EVAL, path);
        if (st.n) k->lines[p->n_lines++] = (rp_hline){t->baselines.v[b], st.mean};
    }
    return p->n_cols > 0;
}

/* The best validation loss and each task's primary and second metric, in one figure. */
static void add_key_metrics(rp_figures *f, const rp_sweep *s)
{
    key_panel *k = ast_xcalloc((size_t)2 * s->n_tasks + 1, sizeof *k);
    rp_panel *panels = ast_xcalloc((size_t)2 * s->n_tasks + 1, sizeof *panels);
    int n_keys = 0, n = 0;
    k[n_keys++] = (key_panel){.metric = "best_val_loss"};
    for (int t = 0; t < s->n_tasks; t++) {
        if (s->tasks[t].primary) k[n_keys++] = (key_panel){.task = &s->tasks[t], .metric = s->tasks[t].primary};
        if (s->tasks[t].second) k[n_keys++] = (key_panel){.task = &s->tasks[t], .metric = s->tasks[t].second};
    }
    for (int i = 0; i < n_keys; i++) n += fill_panel(&panels[n], &k[i], s);
    if (n)
        push(f, "report_key_metrics.svg",
             "Key metrics per config: a dot per seed; beside them the mean (bar) and its 95% confidence interval "
             "(Student t over the seeds; none with one seed). Dashed: the evaluation's baselines, mean over runs.",
             rp_svg_panels(panels, n, 0), rp_svg_panels(panels, n, 1));
    for (int i = 0; i < n_keys; i++) free(k[i].cols), free(k[i].lines), free(k[i].v);
    free(k), free(panels);
}

static void add_routing(rp_figures *f, const rp_sweep *s)
{
    rp_routing_grid *g;
    int n = rp_routing_grids(s, &g);
    if (n)
        push(f, "report_routing.svg",
             "Routing by diffusion time: each MoE layer's experts (rows e0, e1, ...) and buckets of diffusion time t "
             "(columns), the expert's share of the bucket's tokens in the last epoch, per seed and layer. White is an "
             "even split; orange, more than even, blue, less. A row that changes colour across t is an expert used "
             "more at some diffusion times than at others. Expert numbers are not comparable across seeds or layers: "
             "each learns its own.",
             rp_svg_routing(g, n, 0), rp_svg_routing(g, n, 1));
    rp_routing_grids_free(g, n);
}

void rp_figures_make(const rp_sweep *s, rp_figures *f)
{
    char file[300], caption[600];
    memset(f, 0, sizeof *f);
    add_key_metrics(f, s);
    add_figure(f, s, train_loss, NULL, "report_loss.svg", "training loss",
               "Training loss per step: mean over seeds, shaded from the lowest to the highest seed.");
    add_figure(f, s, val_loss, NULL, "report_val_loss.svg", "validation loss",
               "Validation loss after each epoch: mean over seeds, shaded from the lowest to the highest seed.");
    for (int m = 0; m < s->monitors.n; m++) {
        const char *metric = s->monitors.v[m];
        /* flags are in the verdict; dotted names are breakdowns that the table lists without a plot each */
        if (rp_is_warning_flag(metric) || strchr(metric, '.')) continue;
        figure_file("monitor", metric, file, sizeof file);
        snprintf(caption, sizeof caption, "%s per step, over layers: mean over seeds, shaded min-max.",
                 rp_metric_label(metric));
        add_figure(f, s, monitor_curve, metric, file, rp_metric_label(metric), caption);
    }
    add_routing(f, s);
}

void rp_figures_free(rp_figures *f)
{
    for (int i = 0; i < f->n; i++) free(f->v[i].file), free(f->v[i].caption), free(f->v[i].svg), free(f->v[i].svg_file);
    free(f->v);
    ast_strlist_free(&f->not_drawn);
    memset(f, 0, sizeof *f);
}

const rp_figure *rp_figure_find(const rp_figures *f, const char *file)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->v[i].file, file)) return &f->v[i];
    return NULL;
}
