/* The ablation report's internals: the sweep as read from disk, the
 * statistics per config, plots, tables and the document writers. */
#ifndef ALPHAST_REPORT_INTERNAL_H
#define ALPHAST_REPORT_INTERNAL_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "report/report.h"
#include "base/strlist.h"

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

/* Routing by diffusion time as one run logged it: time_conditioning's
 * t<bucket>.expert<e>.share per layer, of the last epoch it logged. */
typedef struct rp_route {
    int layer, bucket, expert;
    double share;
} rp_route;

typedef struct rp_routes {
    double step; /* of the values */
    rp_route *v;
    int n, cap;
} rp_routes;

/* Takes a metrics line's value into r when the metric is a routing
 * breakdown (t<q>.expert<e>.share; the token counts beside them are
 * dropped: the shares say the same per bucket) and returns 1; else 0. */
int rp_routing_line(rp_routes *r, const char *metric, int layer, double step, double value);

typedef struct rp_run {
    char *id, *config, *state, *dir, *error; /* error: why the ledger says it did not finish, if it says */
    long long seed;                         /* -1 when the ledger has none */
    int usable;                             /* done and summary.json readable */
    char note[256];                         /* why it is excluded, or what is missing */
    cJSON *summary;                         /* NULL when absent */
    cJSON *eval;                            /* eval.json's tasks in the report's form (rp_eval_tasks); NULL when absent */
    cJSON *metric_defs;                     /* eval.json's "metrics": {key: {"better", "label"}}; NULL in older files */
    rp_series train_loss, val_loss, lr;     /* x = optimiser step */
    rp_monitor *mon;
    int n_mon;
    rp_routes routes;
    ast_strlist settings; /* config.yaml as "key=value" leaves (report_configs.c); empty when absent */
    char *protocol;       /* summary.json's held-out protocol in words (rp_protocol_text); NULL when absent */
} rp_run;

typedef struct rp_config {
    char *name;
    int *runs; /* indices of usable runs */
    int n_runs, n_ledger;
    int protocol; /* its runs' held-out protocol, an index into rp_sweep.protocols; -1 when unknown */
} rp_config;

/* One task of the evaluation (expr_to_pos, pos_to_expr, joint) over the
 * sweep's runs: the union of what the runs report, in order of appearance. */
typedef struct rp_task {
    char *name;
    ast_strlist keys;      /* the model's metrics */
    ast_strlist baselines; /* names under "baselines" */
    ast_strlist steps;     /* by_steps' step counts, ascending */
    int uncertainty;       /* some run reports "uncertainty" */
    const char *primary;   /* the metric the verdict ranks by (in keys), NULL if none */
    const char *second;    /* a second one the verdict also gives, NULL if none */
} rp_task;

typedef struct rp_cmp rp_cmp;

/* Every test the report makes: each config but the reference against the
 * reference on each training loss and each task's metrics (report_family.c). */
typedef struct rp_family {
    rp_cmp *v;
    int n;
    int tests; /* comparisons with a p-value: the m of Holm's correction */
} rp_family;

typedef struct rp_sweep {
    char *dir, *name;
    rp_run *runs;
    int n_runs;
    rp_config *configs;
    int n_configs, reference; /* the config the others are compared with */
    int bad_ledger_lines;
    rp_task *tasks;
    int n_tasks;
    ast_strlist monitors; /* monitored metric names, in order of appearance, each series once */
    ast_strlist repeats;  /* "a (the same values as b)": series left out of monitors as repeats */
    rp_family family;
    ast_strlist protocols; /* the held-out protocols of the configs, in order of appearance */
} rp_sweep;

int rp_sweep_load(rp_sweep *s, const char *dir, const char *reference, ast_error *e);
void rp_sweep_free(rp_sweep *s);

/* The path of `file` in run r's directory: the ledger's dir, taken
 * relative to the sweep directory unless absolute. */
void rp_run_file(const rp_run *r, const char *sweep_dir, const char *file, char *buf, size_t n);

/* Reads one run's directory into r (never fails: what is missing goes into r->note). */
void rp_run_read(rp_run *r, const char *sweep_dir);
void rp_run_free(rp_run *r);

/* A number at a dotted path ("model.knn_k10") in a JSON object, booleans
 * as 0 and 1; NaN if absent. */
double rp_json_number(const cJSON *obj, const char *path);
cJSON *rp_json_read_file(const char *path);

/* eval.json (consumed) in the report's form: {task: {"model": {metric: x},
 * "baselines": {name: {metric: x}}, "uncertainty": {..}, "by_steps": {..}}},
 * modality groups flattened and the per-gene Moran's I summarised as
 * morans_i_abs_error. The older layout's "random" becomes the one
 * baseline. NULL for NULL or a file with no tasks. */
cJSON *rp_eval_tasks(cJSON *eval, cJSON **metric_defs);
/* A held-out protocol object (summary.json's and eval.json's "protocol") in
 * words: "blocks, split seed 0, val 0.1 test 0.1"; NULL when p is none. */
char *rp_protocol_text(const cJSON *p);

/* Drops from s->monitors each series that repeats another one's values
 * (grad_norm/total_grad_norm is the trainer's own grad_norm every 10
 * steps), noting it in s->repeats (report_repeats.c). */
void rp_drop_repeats(rp_sweep *s);

/* ---- what the configs are (report_configs.c) ------------------------------ */

/* The leaves of a run's config.yaml as "key=value" ("attention=gated",
 * "ffn.num_experts=4", "monitors=[grad_norm, time_conditioning]"); a
 * plugin's {name: x, ...} gives "attention=x" beside its options. Nothing
 * when the file is missing or does not load. */
void rp_read_settings(const char *path, ast_strlist *out);
/* The settings that set config c apart: those all its runs share and not
 * every other config has. 0 when none of its runs has a config.yaml. */
int rp_config_settings(const rp_sweep *s, int c, ast_strlist *out);
/* The settings all of the n runs (indices into s->runs) that have a
 * config.yaml share. 0 when none has one. */
int rp_common_settings(const rp_sweep *s, const int *runs, int n, ast_strlist *out);


/* ---- statistics per config (report_stats.c) ------------------------------- */

/* Where a per-run number comes from. */
typedef enum rp_source {
    RP_SUMMARY,      /* summary.json, and step_ms, peak_arena_mib, peak_rss_mib from it */
    RP_EVAL,         /* a path into the run's eval tasks ("expr_to_pos.model.knn_k10") */
    RP_MONITOR_LAST, /* a monitor metric's last value, averaged over layers */
} rp_source;

/* Where `key` of `side` ("model" or a baseline's name) of task t is: its
 * path into the eval tasks; t NULL: the key itself, in summary.json. */
rp_source rp_metric_at(const rp_task *t, const char *side, const char *key, char *path, size_t n);

typedef struct rp_stat {
    int n;
    double mean, sd, min, max;
} rp_stat;

/* Values of one quantity over a config's usable runs (NaNs skipped); out
 * holds at least n_runs. Returns how many. */
int rp_values(const rp_sweep *s, int config, rp_source src, const char *key, double *out);
/* The same over every usable run of the sweep; out holds s->n_runs. */
/* protocol: only the configs of s->protocols.v[protocol]; -1: every config. Baselines are
 * scored on the cells a protocol holds out, so they are pooled within one protocol only. */
int rp_values_all(const rp_sweep *s, int protocol, rp_source src, const char *key, double *out);
rp_stat rp_stat_of(const rp_sweep *s, int config, rp_source src, const char *key);
/* How many of a config's usable runs (*runs) the uncertainty measures of
 * `task` judge `judgement` ("overconfident" or "underconfident": the
 * booleans eval.json's uncertainty holds, alphast/uncertainty.h). */
int rp_judged_runs(const rp_sweep *s, int config, const char *task, const char *judgement, int *runs);
rp_stat rp_stat_all(const rp_sweep *s, int protocol, rp_source src, const char *key);
rp_stat rp_stat_values(const double *v, int n);

/* Decimals to print a mean at (and differences of such means): three
 * significant digits of the mean, two of the sd. */
int rp_decimals(rp_stat st);
/* "0.412 ± 0.010", "n/a"; "p = 0.003", "p < 0.001", "p n/a"; the same
 * without "p" for a table ("0.003"); "+0.031"; "[-0.010, +0.052]". */
const char *rp_fmt_stat(rp_stat st, char *buf, size_t n);
const char *rp_fmt_p(double p, char *buf, size_t n);
const char *rp_fmt_pnum(double p, char *buf, size_t n);
const char *rp_fmt_diff(double d, int dec, char *buf, size_t n);
const char *rp_fmt_ci(double lo, double hi, int dec, char *buf, size_t n);

/* Human name of a metric key ("best_val_loss" -> "validation loss (best)"):
 * the label eval.json gives it, else the report's own for the training
 * losses and older files, else the key. */
const char *rp_metric_label(const rp_sweep *s, const char *key);

/* +1 when higher is better, -1 when lower is, 0 when the report does not
 * know (or it is "closer_to_truth"); a dotted key is judged by its last
 * part. What eval.json's "metrics" says (the first run that says), else
 * a guess from the name (training losses, files from before "metrics"). */
int rp_metric_direction(const rp_sweep *s, const char *key);

/* ---- comparisons with the reference config (report_family.c) -------------- */

enum { RP_RESAMPLES = 10000 }; /* bootstrap resamples per interval */
#define RP_ALPHA 0.05           /* test level, family-wise after Holm */
#define RP_POWER 0.8            /* the power the MDD is quoted at */

/* The training losses every config is compared on (summary.json). */
enum { RP_N_LOSS_KEYS = 3 };
extern const char *const rp_loss_keys[RP_N_LOSS_KEYS];

struct rp_cmp {
    int config;           /* compared with s->reference */
    rp_source src;
    char *key;            /* the quantity (RP_EVAL: its path) */
    const char *metric;   /* its metric name */
    const rp_task *task;  /* NULL for the training losses */
    rp_stat a, ref;
    double diff, lo, hi;  /* mean a - mean ref and its 95% bootstrap interval; NaN with < 2 seeds a side */
    double p, p_holm;     /* Welch's two-sided p and Holm's over the family; NaN with < 2 seeds a side */
    double mdd;           /* minimum detectable difference at RP_ALPHA and RP_POWER */
};

/* 95% percentile bootstrap interval of mean(a) - mean(b) (RP_RESAMPLES,
 * a fixed seed); NaN unless na >= 2 and nb >= 1. */
void rp_diff_ci(const double *a, int na, const double *b, int nb, double *lo, double *hi);

void rp_family_make(rp_sweep *s);
void rp_family_free(rp_family *f);
/* The comparison of config c on a quantity; NULL for the reference. */
const rp_cmp *rp_family_find(const rp_sweep *s, int config, rp_source src, const char *key);
/* Whether the comparison's difference survives Holm's correction. */
int rp_survives(const rp_cmp *c);
/* Decimals for its difference, interval and MDD: the finer of its two means'. */
int rp_cmp_decimals(const rp_cmp *c);

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
/* The index of the series' first lowest value (the epoch whose validation
 * loss kept best.safetensors: a later equal one does not replace it), or -1. */
int rp_series_argmin(const rp_series *s);

/* ---- axes (report_axis.c) ------------------------------------------------- */

typedef struct rp_axes {
    double x0, x1, y0, y1;           /* the data range shown */
    double left, right, top, bottom; /* the plot area, in pixels */
    int log_y;                       /* y on a log10 scale */
} rp_axes;

/* Whether values in [lo, hi] are drawn on a log scale: all positive and
 * spanning two decades or more, where a linear axis would flatten all but
 * the largest into its bottom strip. */
int rp_wants_log(double lo, double hi);
/* y0, y1 and log_y for values in [lo, hi]: padded by 5% (of the decades
 * on a log scale), widened when flat, 0..1 when there are none. */
void rp_axes_fit_y(rp_axes *a, double lo, double hi);
double rp_px(const rp_axes *a, double x);
double rp_py(const rp_axes *a, double y);
/* The frame, a y grid with its numbers (an x grid too when x_ticks) and
 * the axis labels; the y label says when the scale is logarithmic. */
void rp_axes_draw(FILE *f, const rp_axes *a, int x_ticks, const char *xlabel, const char *ylabel);

/* ---- SVG plots (report_svg.c, report_dots.c, report_heatmap.c) ------------ */

enum { RP_FONT = 13 }; /* px: the size of the page's small print, so the plots read like the tables */

/* The config palette, colour-vision-safe; index by config so colours agree across plots. */
const char *rp_colour(int index);
/* <svg> w x h with its style and a white background, into f from
 * open_memstream(out, ..); it scales down to narrower pages. standalone
 * adds the xmlns a separate .svg file needs (inline HTML SVG must not name
 * a URL). rp_svg_close closes both and returns *out. */
void rp_svg_open(FILE *f, int w, int h, int standalone);
char *rp_svg_close(FILE *f, char **out);
void rp_svg_text(FILE *f, const char *attrs, const char *text);
/* &, <, >, " escaped for HTML and SVG text. */
void rp_put_escaped(FILE *f, const char *s);

/* One config's line: the mean over its seeds with the min-max band, and
 * each seed's own curve (binned alike) drawn thin beside it. */
typedef struct rp_line {
    const char *label;
    int color; /* index into the palette: the config's, so colours agree across plots */
    const rp_band *band;
    const rp_band *seeds;   /* [n_seeds] one seed each */
    const long long *seed;  /* [n_seeds] their seeds, as the ledger has them */
    const double *best_x, *best_y; /* [n_seeds] each seed's lowest point, marked; NULL: not marked */
    int n_seeds;
} rp_line;

/* A line plot with shaded bands over steps; a log y axis when the bands
 * span two decades. Returns a malloc'd string. */
char *rp_svg_plot(const char *title, const char *ylabel, const rp_line *lines, int n_lines, int standalone);
/* The plotted numbers as CSV (config,series,step,value; series "mean",
 * "min", "max", "seed S" and "best, seed S"). Returns a malloc'd string. */
char *rp_csv_plot(const rp_line *lines, int n_lines);

/* One column of a dot panel: a config's values over seeds. */
typedef struct rp_dots {
    const char *label;
    int color;
    const double *v;
    int n;
} rp_dots;

/* A horizontal reference line across a dot panel: a baseline's value. */
typedef struct rp_hline {
    const char *label;
    double y;
} rp_hline;

/* One metric: a dot per seed and per config its mean with the 95% t
 * interval, dashed lines for the baselines labelled at the right. */
typedef struct rp_panel {
    const char *title, *ylabel;
    const rp_dots *cols;
    int n_cols;
    const rp_hline *lines;
    int n_lines;
} rp_panel;

/* The mean's 95% confidence interval over n seeds (Student t, n - 1 df);
 * NaN with fewer than 2. */
void rp_mean_interval(const double *v, int n, double *lo, double *hi);
/* The panel in the box (x, y, w, h) of the SVG being written. */
void rp_dots_panel(FILE *f, const rp_panel *p, double x, double y, double w, double h);
/* Panels side by side, as many to a row as fit. Returns a malloc'd string. */
char *rp_svg_panels(const rp_panel *panels, int n, int standalone);
/* Their numbers as CSV (panel,series,kind,value; kind "seed", "mean",
 * "ci_low", "ci_high" or "baseline"). Returns a malloc'd string. */
char *rp_csv_panels(const rp_panel *panels, int n);

/* ---- routing by diffusion time (report_routing.c, report_heatmap.c) ------- */

/* The routing of one config: per run (seed), layer, expert and bucket of
 * diffusion time, the expert's share of the bucket's tokens in the last
 * epoch the run logged (time_conditioning's t<q>.expert<e>.share); NaN
 * where a run logged none. */
typedef struct rp_routing_grid {
    const char *config;
    int color;
    int runs, layers, experts, buckets;
    long long *seed; /* per run */
    double *share;   /* [((run * layers + layer) * experts + expert) * buckets + bucket] */
} rp_routing_grid;

/* The grids of the configs whose runs logged routing; returns how many. */
int rp_routing_grids(const rp_sweep *s, rp_routing_grid **out);
void rp_routing_grids_free(rp_routing_grid *g, int n);
double rp_routing_share(const rp_routing_grid *g, int run, int layer, int expert, int bucket);
/* Heatmaps: per config a row of seeds by a column of layers, each experts
 * x buckets, coloured by the share against an even split. */
char *rp_svg_routing(const rp_routing_grid *g, int n, int standalone);
/* The shares as CSV (config,seed,layer,expert,bucket,share). Returns a malloc'd string. */
char *rp_csv_routing(const rp_routing_grid *g, int n);

/* ---- placements (report_placement.c) -------------------------------------- */

/* One held-out set as a run placed it (its placement.csv, set 0): true and
 * placed x, y per cell, and its label's index into the labels shared by
 * all placements (-1: none), so a label has one colour in every panel. */
typedef struct rp_placement {
    const char *config, *run;
    long long seed;
    int n, cap;
    int left_out; /* cells of the set past the most drawn */
    char **cell;
    double *tx, *ty, *px, *py;
    int *label;
} rp_placement;

/* The placement of each config's first seed that has a readable
 * placement.csv; files that cannot be read are named in `notes`. Returns
 * how many. */
int rp_placements_read(const rp_sweep *s, rp_placement **out, ast_strlist *labels, ast_strlist *notes);
void rp_placements_free(rp_placement *p, int n);
/* Per config a row: the true positions beside the placed ones, on the
 * same scale, coloured by label. */
char *rp_svg_placement(const rp_placement *p, int n, const ast_strlist *labels, int standalone);
/* The drawn points as CSV (config,run,seed,cell,label,true_x,true_y,placed_x,placed_y). */
char *rp_csv_placement(const rp_placement *p, int n, const ast_strlist *labels);

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
    char *csv;       /* the plotted numbers, into report_<name>.csv beside it */
} rp_figure;

/* "report_x.svg" -> "report_x.csv" into buf. */
const char *rp_figure_csv_file(const rp_figure *fig, char *buf, size_t n);

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
/* A paragraph that opens with a bold label ("Verdict: ..."). */
void rp_doc_lead(rp_doc *d, const char *label, const char *text);

/* ---- config and provenance of each run (report_provenance.c) -------------- */

/* The settings every used run shares, then per run its own settings, data
 * file, and the key/values of its provenance.json when it has one. */
void rp_provenance_section(rp_doc *d, const rp_sweep *s);

/* ---- the report (report_verdict.c, report_body.c, report.c) --------------- */

/* The verdict's sentences, derived from the numbers (report_verdict.c),
 * and those on where the configs stand against the baselines
 * (report_standing.c). */
void rp_verdict(const rp_sweep *s, ast_strlist *out);
void rp_standing(const rp_sweep *s, ast_strlist *out);
/* Where the best config stands against the best baseline of task t on
 * `metric`, into text; 0 when no config has the metric. */
int rp_standing_of(const rp_sweep *s, const rp_task *t, const char *metric, char *text, size_t n);
/* The verdict in one line, for the top of the report: the standing on the
 * first task's primary metric, whether any config differs from the
 * reference after Holm's correction, and the warnings, if any. */
void rp_headline(const rp_sweep *s, char *text, size_t n);

/* The best config on a metric by its mean over seeds (direction-aware), or
 * -1; the best baseline of task t likewise, its mean over runs in *value. */
int rp_best_config(const rp_sweep *s, rp_source src, const char *key);
int rp_best_baseline(const rp_sweep *s, int protocol, const rp_task *t, const char *metric, double *value);

/* The tables of one group of metrics: the training losses (t NULL) or a
 * task's (report_tables.c), and a task's sampler tables. */
void rp_metric_tables(rp_doc *d, const rp_sweep *s, const rp_task *t);
void rp_sampler_tables(rp_doc *d, const rp_sweep *s, const rp_task *t);

typedef struct rp_figures {
    rp_figure *v;
    int n;
    ast_strlist not_drawn; /* "name (zero throughout)": series left out of the plots */
} rp_figures;

void rp_figures_make(const rp_sweep *s, rp_figures *f);
void rp_figures_free(rp_figures *f);
const rp_figure *rp_figure_find(const rp_figures *f, const char *file);

void rp_body(rp_doc *d, const rp_sweep *s, const rp_figures *figs);

#endif
