/* The report's plots: the key metrics as a dot per seed with each
 * config's mean and interval against the baselines; training and
 * validation loss, the learning rate and each monitored metric over
 * optimiser steps, one line per config (mean over its seeds) with the
 * min-max band and each seed thin (the validation loss with each seed's
 * best epoch marked), leaving out lines that are zero throughout; and
 * routing by diffusion time. Each with its numbers as CSV. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

enum { MAX_POINTS = 200 }; /* per line: enough for the shape, small files */

typedef const rp_series *(*series_fn)(const rp_run *r, const char *key);

static const rp_series *train_loss(const rp_run *r, const char *key) { return &r->train_loss; }
static const rp_series *val_loss(const rp_run *r, const char *key) { return &r->val_loss; }
static const rp_series *learning_rate(const rp_run *r, const char *key) { return &r->lr; }

static const rp_series *monitor_curve(const rp_run *r, const char *key)
{
    for (int i = 0; i < r->n_mon; i++)
        if (!strcmp(r->mon[i].name, key)) return &r->mon[i].curve;
    return NULL;
}

/* What one config's line points into. */
typedef struct curves {
    rp_band band, *seeds;
    long long *seed;
    double *best_x, *best_y;
    int n; /* seeds */
} curves;

/* Config c's band over the seeds that have the curve, each seed's own and,
 * with mark_best, each seed's lowest point; 0 when no seed has it. */
static int config_curves(const rp_sweep *s, int c, series_fn pick, const char *key, int mark_best, curves *cv,
                         rp_line *line)
{
    const rp_config *cf = &s->configs[c];
    const rp_series **seeds = ast_xmalloc((size_t)(cf->n_runs + 1) * sizeof *seeds);
    int k = 0;
    memset(cv, 0, sizeof *cv);
    cv->seeds = ast_xcalloc((size_t)cf->n_runs + 1, sizeof *cv->seeds);
    cv->seed = ast_xcalloc((size_t)cf->n_runs + 1, sizeof *cv->seed);
    cv->best_x = ast_xcalloc((size_t)cf->n_runs + 1, sizeof *cv->best_x);
    cv->best_y = ast_xcalloc((size_t)cf->n_runs + 1, sizeof *cv->best_y);
    for (int i = 0; i < cf->n_runs; i++) {
        const rp_run *r = &s->runs[cf->runs[i]];
        const rp_series *ser = pick(r, key);
        if (!ser || !ser->n) continue;
        int best = rp_series_argmin(ser);
        rp_band_of(&ser, 1, MAX_POINTS, &cv->seeds[k]);
        cv->seed[k] = r->seed, cv->best_x[k] = ser->x[best], cv->best_y[k] = ser->y[best];
        seeds[k++] = ser;
    }
    cv->n = k;
    if (k) rp_band_of(seeds, k, MAX_POINTS, &cv->band);
    *line = (rp_line){cf->name, c, &cv->band, cv->seeds, cv->seed, mark_best ? cv->best_x : NULL,
                      mark_best ? cv->best_y : NULL, k};
    free(seeds);
    return k > 0;
}

static void curves_free(curves *cv)
{
    rp_band_free(&cv->band);
    for (int k = 0; k < cv->n; k++) rp_band_free(&cv->seeds[k]);
    free(cv->seeds), free(cv->seed), free(cv->best_x), free(cv->best_y);
}

static void push(rp_figures *f, const char *file, const char *caption, char *svg, char *svg_file, char *csv)
{
    f->v = ast_xrealloc(f->v, (size_t)(f->n + 1) * sizeof *f->v);
    f->v[f->n++] = (rp_figure){ast_xstrdup(file), ast_xstrdup(caption), svg, svg_file, csv};
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

/* A line plot of one curve per config; mark_best rings each seed's lowest point. */
static void add_figure(rp_figures *f, const rp_sweep *s, series_fn pick, const char *key, int mark_best,
                       const char *file, const char *title, const char *caption)
{
    curves *cv = ast_xcalloc((size_t)s->n_configs, sizeof *cv);
    rp_line *lines = ast_xcalloc((size_t)s->n_configs, sizeof *lines);
    ast_strlist zero = {0};
    int n = 0;
    for (int c = 0; c < s->n_configs; c++) {
        if (config_curves(s, c, pick, key, mark_best, &cv[n], &lines[n])) n++;
        else curves_free(&cv[n]);
    }
    int drawn = drop_zero_lines(lines, n, &zero);
    char text[1200], names[400];
    ast_strlist_join(&zero, ", ", "", names, sizeof names);
    if (drawn) {
        snprintf(text, sizeof text, "%s%s%s%s", caption, zero.n ? " Zero throughout, so not drawn: " : "", names,
                 zero.n ? "." : "");
        push(f, file, text, rp_svg_plot(title, title, lines, drawn, 0), rp_svg_plot(title, title, lines, drawn, 1),
             rp_csv_plot(lines, drawn));
    } else if (n) {
        snprintf(text, sizeof text, "%s (zero throughout in every run)", title);
        ast_strlist_push(&f->not_drawn, text);
    }
    for (int i = 0; i < n; i++) curves_free(&cv[i]);
    ast_strlist_free(&zero);
    free(cv), free(lines);
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
    int dir = rp_metric_direction(s, k->metric);
    k->cols = ast_xcalloc((size_t)s->n_configs, sizeof *k->cols);
    k->lines = ast_xcalloc((size_t)(t ? t->baselines.n : 0) + 1, sizeof *k->lines);
    k->v = ast_xcalloc((size_t)s->n_runs + 1, sizeof *k->v);
    snprintf(k->title, sizeof k->title, "%s%s%s%s", t ? t->name : "", t ? ": " : "", rp_metric_label(s, k->metric),
             dir > 0 ? ", higher is better" : dir < 0 ? ", lower is better" : "");
    *p = (rp_panel){k->title, rp_metric_label(s, k->metric), k->cols, 0, k->lines, 0};
    p->n_cols = dot_columns(s, rp_metric_at(t, "model", k->metric, path, sizeof path), path, k->v, k->cols);
    for (int b = 0; t && b < t->baselines.n; b++) {
        rp_metric_at(t, t->baselines.v[b], k->metric, path, sizeof path);
        rp_stat st = rp_stat_all(s, s->configs[s->reference].protocol, RP_EVAL, path); /* the reference's cells */
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
             rp_svg_panels(panels, n, 0), rp_svg_panels(panels, n, 1), rp_csv_panels(panels, n));
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
             rp_svg_routing(g, n, 0), rp_svg_routing(g, n, 1), rp_csv_routing(g, n));
    rp_routing_grids_free(g, n);
}

static void add_placement(rp_figures *f, const rp_sweep *s)
{
    rp_placement *p;
    ast_strlist labels = {0}, notes = {0};
    char caption[3000], text[2000];
    int n = rp_placements_read(s, &p, &labels, &notes);
    ast_strlist_join(&notes, "; ", "", text, sizeof text);
    snprintf(caption, sizeof caption, "Where the model put the cells: per config (its first seed with a placement.csv) "
             "the first held-out set of the test split, the true positions (left) and the placed ones (right), rotated "
             "or reflected onto the truth as the rmsd metric aligns them but not scaled, both panels on one scale; "
             "%s.%s%s", labels.n ? "coloured by the data's cell type" : "the data has no cell type column, so uncoloured",
             notes.n ? " " : "", text);
    if (n)
        push(f, "report_placement.svg", caption, rp_svg_placement(p, n, &labels, 0), rp_svg_placement(p, n, &labels, 1),
             rp_csv_placement(p, n, &labels));
    rp_placements_free(p, n);
    free(p);
    ast_strlist_free(&labels);
    ast_strlist_free(&notes);
}

void rp_figures_make(const rp_sweep *s, rp_figures *f)
{
    char file[300], caption[600];
    memset(f, 0, sizeof *f);
    add_key_metrics(f, s);
    add_placement(f, s);
    add_figure(f, s, train_loss, NULL, 0, "report_loss.svg", "training loss",
               "Training loss per step: mean over seeds (thick), each seed thin, shaded from the lowest to the highest "
               "seed.");
    add_figure(f, s, val_loss, NULL, 1, "report_val_loss.svg", "validation loss",
               "Validation loss after each epoch: mean over seeds (thick), each seed thin, shaded from the lowest to the "
               "highest seed. A ring marks each seed's lowest validation loss: the epoch whose weights were kept "
               "(best.safetensors) and evaluated; a ring at the first epoch means the runs got worse from there on.");
    add_figure(f, s, learning_rate, NULL, 0, "report_lr.svg", "learning rate",
               "Learning rate per step, as the trainer logged it: the schedule each run trained with.");
    for (int m = 0; m < s->monitors.n; m++) {
        const char *metric = s->monitors.v[m];
        /* flags are in the verdict; dotted names are breakdowns that the table lists without a plot each */
        if (rp_is_warning_flag(metric) || strchr(metric, '.')) continue;
        figure_file("monitor", metric, file, sizeof file);
        snprintf(caption, sizeof caption, "%s per step, over layers: mean over seeds (thick), each seed thin, shaded "
                 "min-max.",
                 rp_metric_label(s, metric));
        add_figure(f, s, monitor_curve, metric, 0, file, rp_metric_label(s, metric), caption);
    }
    add_routing(f, s);
}

void rp_figures_free(rp_figures *f)
{
    for (int i = 0; i < f->n; i++)
        free(f->v[i].file), free(f->v[i].caption), free(f->v[i].svg), free(f->v[i].svg_file), free(f->v[i].csv);
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
