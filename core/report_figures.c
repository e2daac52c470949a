/* The report's plots: training and validation loss, and each monitored
 * metric, over optimiser steps; one line per config (mean over its seeds)
 * with the min-max band. */
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

static void add_figure(rp_figures *f, const rp_sweep *s, series_fn pick, const char *key, const char *file,
                       const char *title, const char *caption)
{
    rp_band *bands = ast_xcalloc((size_t)s->n_configs, sizeof *bands);
    rp_line *lines = ast_xcalloc((size_t)s->n_configs, sizeof *lines);
    int n = config_lines(s, pick, key, bands, lines);
    if (n) {
        f->v = ast_xrealloc(f->v, (size_t)(f->n + 1) * sizeof *f->v);
        f->v[f->n++] = (rp_figure){ast_xstrdup(file), ast_xstrdup(caption),
                                   rp_svg_plot(title, "optimiser step", title, lines, n, 0),
                                   rp_svg_plot(title, "optimiser step", title, lines, n, 1)};
    }
    for (int i = 0; i < n; i++) rp_band_free(&bands[i]);
    free(bands), free(lines);
}

/* "moe/expert entropy" -> "report_monitor_moe_expert_entropy.svg" */
static void monitor_file(const char *metric, char *buf, size_t n)
{
    int used = snprintf(buf, n, "report_monitor_");
    for (const char *p = metric; *p && (size_t)used + 5 < n; p++) buf[used++] = isalnum((unsigned char)*p) ? *p : '_';
    snprintf(buf + used, n - (size_t)used, ".svg");
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
        monitor_file(metric, file, sizeof file);
        snprintf(caption, sizeof caption, "%s per step, over layers: mean over seeds, shaded min-max.",
                 rp_metric_label(metric));
        add_figure(f, s, monitor_curve, metric, file, rp_metric_label(metric), caption);
    }
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
