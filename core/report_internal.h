/* The ablation report's internals: the sweep as read from disk, the
 * statistics per config, plots, tables and the document writers. */
#ifndef ALPHAST_REPORT_INTERNAL_H
#define ALPHAST_REPORT_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "alphast/report.h"
#include "strlist.h"

/* ---- the sweep on disk (report_load.c, report_run.c) ---------------------- */

typedef struct rp_series {
    int n, cap;
    double *x, *y;
} rp_series;

void rp_series_push(rp_series *s, double x, double y);
void rp_series_free(rp_series *s);

/* One monitored metric of one run. */
typedef struct rp_monitor {
    char *name;        /* "monitor/metric", or "train/grad_norm" */
    rp_series curve;   /* per step: the monitor's value over layers (layer -1), else the mean of the layers */
    rp_series overall; /* while reading: the layer -1 values */
} rp_monitor;

typedef struct rp_run {
    char *id, *config, *state, *dir, *error; /* error: why the ledger says it did not finish, if it says */
    long long seed;                         /* -1 when the ledger has none */
    int usable;                             /* done and summary.json readable */
    char note[256];                         /* why it is excluded, or what is missing */
    cJSON *summary, *eval;                  /* NULL when absent */
    rp_series train_loss, val_loss;         /* x = optimiser step */
    rp_monitor *mon;
    int n_mon;
} rp_run;

typedef struct rp_config {
    char *name;
    int *runs; /* indices of usable runs */
    int n_runs, n_ledger;
} rp_config;

typedef struct rp_sweep {
    char *dir, *name;
    rp_run *runs;
    int n_runs;
    rp_config *configs;
    int n_configs, baseline;
    int bad_ledger_lines;
    ast_strlist eval_keys; /* numeric keys of eval.json's "model" object ("a.b" when nested) */
    ast_strlist monitors;  /* monitored metric names, in order of appearance */
} rp_sweep;

int rp_sweep_load(rp_sweep *s, const char *dir, const char *baseline, ast_error *e);
void rp_sweep_free(rp_sweep *s);

/* Reads one run's directory into r (never fails: what is missing goes into r->note). */
void rp_run_read(rp_run *r, const char *sweep_dir);
void rp_run_free(rp_run *r);

/* A number at a dotted path ("model.knn_preservation") in a JSON object; NaN if absent. */
double rp_json_number(const cJSON *obj, const char *path);
cJSON *rp_json_read_file(const char *path);

/* ---- statistics per config (report_stats.c) ------------------------------- */

/* Where a per-run number comes from. */
typedef enum rp_source {
    RP_SUMMARY,      /* summary.json, and step_ms, peak_arena_mib, peak_rss_mib from it */
    RP_EVAL,         /* eval.json, the model's metrics */
    RP_EVAL_RANDOM,  /* eval.json, the same metrics of random coordinates */
    RP_MONITOR_LAST, /* a monitor metric's last value, averaged over layers */
} rp_source;

typedef struct rp_stat {
    int n;
    double mean, sd, min, max;
} rp_stat;

/* Values of one quantity over a config's usable runs (NaNs skipped); out
 * holds at least n_runs. Returns how many. */
int rp_values(const rp_sweep *s, int config, rp_source src, const char *key, double *out);
rp_stat rp_stat_of(const rp_sweep *s, int config, rp_source src, const char *key);

typedef struct rp_cmp {
    rp_stat a, base;
    double change_pct; /* (a - base) / |base| * 100 */
    double p;          /* Welch two-sided p; NaN with fewer than 2 seeds on either side */
} rp_cmp;

rp_cmp rp_compare(const rp_sweep *s, int config, rp_source src, const char *key);

/* "0.412 ± 0.010", "n/a"; "p = 0.003", "p < 0.001", "p n/a". */
const char *rp_fmt_stat(rp_stat st, char *buf, size_t n);
const char *rp_fmt_p(double p, char *buf, size_t n);
const char *rp_fmt_pct(double pct, char *buf, size_t n);

/* Human name of a metric key ("knn_preservation" -> "kNN preservation"). */
const char *rp_metric_label(const char *key);

/* ---- monitor warnings (report_warn.c) ------------------------------------- */

/* Monitors log each warning as a 0/1 metric named *_warning, judged with
 * the thresholds the run configured; the report reads those flags. */
int rp_is_warning_flag(const char *metric);

typedef struct rp_warning {
    const char *text; /* "expert collapse (...)" */
    int seeds, of;    /* fired in `seeds` of the `of` runs that log the flag */
    double first;     /* the earliest step it was set */
} rp_warning;

/* Whether warning flag `metric` fired in config c's runs (1) or not (0). */
int rp_warning_of(const rp_sweep *s, int config, const char *metric, rp_warning *w);

/* ---- curves over seeds (report_curves.c) ---------------------------------- */

/* Mean and min-max band over seeds, binned to at most max_points along x. */
typedef struct rp_band {
    int n;
    double *x, *mean, *lo, *hi;
} rp_band;

void rp_band_of(const rp_series *const *seeds, int n_seeds, int max_points, rp_band *b);
void rp_band_free(rp_band *b);

/* ---- SVG plots (report_svg.c) --------------------------------------------- */

typedef struct rp_line {
    const char *label;
    int color; /* index into the palette: the config's, so colours agree across plots */
    const rp_band *band;
} rp_line;

/* A line plot with shaded bands; standalone adds the xmlns a separate .svg
 * file needs (inline HTML SVG must not name a URL). Returns a malloc'd string. */
char *rp_svg_plot(const char *title, const char *xlabel, const char *ylabel, const rp_line *lines, int n_lines,
                  int standalone);

/* &, <, >, " escaped for HTML and SVG text. */
void rp_put_escaped(FILE *f, const char *s);

/* ---- tables and documents (report_doc.c) ---------------------------------- */

typedef struct rp_table {
    int n_cols, n_cells;
    char **cells; /* row-major; the first n_cols are the header */
} rp_table;

void rp_table_init(rp_table *t, int n_cols);
void rp_table_cell(rp_table *t, const char *fmt, ...) AST_PRINTF(2, 3);
void rp_table_free(rp_table *t);

typedef struct rp_figure {
    char *file;      /* report_<name>.svg, next to report.md */
    char *caption;
    char *svg;       /* inline, for the HTML */
    char *svg_file;  /* standalone, for the file */
} rp_figure;

/* One writer, two formats: the report's body is written once against this. */
typedef struct rp_doc {
    FILE *f;
    int html;
} rp_doc;

void rp_doc_begin(rp_doc *d, const char *title);
void rp_doc_end(rp_doc *d);
void rp_doc_heading(rp_doc *d, int level, const char *text);
void rp_doc_para(rp_doc *d, const char *fmt, ...) AST_PRINTF(2, 3);
void rp_doc_list(rp_doc *d, const ast_strlist *items);
void rp_doc_table(rp_doc *d, const rp_table *t);
void rp_doc_figure(rp_doc *d, const rp_figure *fig);

/* ---- the report (report_verdict.c, report_body.c, report.c) --------------- */

/* The verdict's sentences, derived from the numbers. */
void rp_verdict(const rp_sweep *s, ast_strlist *out);

typedef struct rp_figures {
    rp_figure *v;
    int n;
} rp_figures;

void rp_figures_make(const rp_sweep *s, rp_figures *f);
void rp_figures_free(rp_figures *f);
const rp_figure *rp_figure_find(const rp_figures *f, const char *file);

void rp_body(rp_doc *d, const rp_sweep *s, const rp_figures *figs);

#endif
