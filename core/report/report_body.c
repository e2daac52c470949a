/* The report's sections, written once for both formats. */
#include <math.h>
#include <string.h>

#include "report/stats.h"
#include "report_internal.h"

static int n_usable(const rp_sweep *s)
{
    int n = 0;
    for (int i = 0; i < s->n_runs; i++) n += s->runs[i].usable;
    return n;
}

/* The fewest seeds any config has: what the statistics can show rests on it. */
static int fewest_seeds(const rp_sweep *s)
{
    int n = s->n_configs ? s->configs[0].n_runs : 0;
    for (int c = 1; c < s->n_configs; c++) n = s->configs[c].n_runs < n ? s->configs[c].n_runs : n;
    return n;
}

/* What the numbers of a comparison are, and what the seeds allow. */
static void method_note(rp_doc *d, const rp_sweep *s)
{
    int seeds = fewest_seeds(s);
    if (s->family.tests)
        rp_doc_para(d, "For each difference of means: a 95%% percentile bootstrap interval (%d resamples of each "
                       "config's seeds, fixed seed), the two-sided Welch t-test p, the p after Holm's correction over "
                       "all %d tests in this report, and the minimum detectable difference (MDD: the true difference "
                       "one Welch test at %.2g would find with %.0f%% power, given the seeds' spread). Only differences "
                       "whose Holm p is below %.2g count as shown.",
                    RP_RESAMPLES, s->family.tests, RP_ALPHA, 100 * RP_POWER, RP_ALPHA);
    if (seeds == 1)
        rp_doc_para(d, "Some config has a single seed: with no spread to go by, its differences have no interval, "
                       "p-value or MDD.");
    else if (seeds > 1 && seeds < 6) /* below ~6 seeds the bootstrap's coarseness is worth saying */
        rp_doc_para(d, "With %d seeds a config has only %.0f distinct bootstrap resamples: its interval is coarse and "
                       "narrower than a t interval, and only large differences can pass the tests. A difference that "
                       "is not shown is not shown to be absent either: the MDD gives the size a test could have found.",
                    seeds, ast_bootstrap_distinct(seeds));
}

static void intro(rp_doc *d, const rp_sweep *s)
{
    rp_doc_para(d, "Sweep directory %s: %d runs of %d configs in the ledger, %d finished and used. "
                   "Values are mean ± sample standard deviation over seeds; every other config is compared with the "
                   "reference config %s.",
                s->dir, s->n_runs, s->n_configs, n_usable(s), s->configs[s->reference].name);
    if (s->n_configs > 1) method_note(d, s);
    if (s->bad_ledger_lines)
        rp_doc_para(d, "%d ledger lines could not be read (not JSON, or no run / config_name) and were skipped.",
                    s->bad_ledger_lines);
}

/* What each config is, before anything is said about it. */
static void configs_section(rp_doc *d, const rp_sweep *s)
{
    rp_table t;
    ast_strlist set = {0};
    char buf[1024];
    rp_table_init(&t, 2);
    rp_table_cell(&t, "config"), rp_table_cell(&t, "settings that set it apart");
    for (int c = 0; c < s->n_configs; c++) {
        int known = rp_config_settings(s, c, &set);
        rp_table_cell(&t, "%s%s", s->configs[c].name, c == s->reference ? " (reference)" : "");
        rp_table_cell(&t, "%s", known ? ast_strlist_join(&set, ", ", "none: as every other config", buf, sizeof buf)
                                      : "no config.yaml in its run directories");
        ast_strlist_free(&set);
    }
    rp_doc_heading(d, 2, "Configs");
    rp_doc_para(d, "Each config by the settings of its runs' config.yaml that not every config shares (the seed aside); "
                   "everything else is the same in all of them.");
    rp_doc_table(d, &t);
    rp_table_free(&t);
}

static int any_value(const rp_sweep *s, rp_source src, const char *key)
{
    for (int c = 0; c < s->n_configs; c++)
        if (rp_stat_of(s, c, src, key).n) return 1;
    return 0;
}

static void cost_table(rp_doc *d, const rp_sweep *s)
{
    int rss = any_value(s, RP_SUMMARY, "peak_rss_mib");
    const char *keys[] = {"parameters", "active_parameters", "step_ms", "peak_arena_mib", "seconds", "peak_rss_mib"};
    rp_table t;
    char buf[96];
    rp_table_init(&t, 7 + rss);
    rp_table_cell(&t, "config"), rp_table_cell(&t, "seeds used"), rp_table_cell(&t, "parameters");
    rp_table_cell(&t, "active parameters"), rp_table_cell(&t, "step time (ms)"), rp_table_cell(&t, "peak arena (MiB)");
    rp_table_cell(&t, "wall time (s)");
    if (rss) rp_table_cell(&t, "peak RSS (MiB)");
    for (int c = 0; c < s->n_configs; c++) {
        rp_table_cell(&t, "%s", s->configs[c].name);
        rp_table_cell(&t, "%d of %d", s->configs[c].n_runs, s->configs[c].n_ledger);
        for (int k = 0; k < 2; k++) /* fixed by the config: one number, not a spread */
            rp_table_cell(&t, "%.0f", rp_stat_of(s, c, RP_SUMMARY, keys[k]).mean);
        for (int k = 2; k < 5 + rss; k++)
            rp_table_cell(&t, "%s", rp_fmt_stat(rp_stat_of(s, c, RP_SUMMARY, keys[k]), buf, sizeof buf));
    }
    rp_doc_heading(d, 2, "Cost");
    rp_doc_para(d, "Parameters: all, and those one token uses (MoE: the router and its top-k experts). "
                   "Step time is 1 / steps_per_second of each run; peak arena is the step arena's high-water mark.");
    rp_doc_table(d, &t);
    rp_table_free(&t);
}

static void training_section(rp_doc *d, const rp_sweep *s)
{
    rp_doc_heading(d, 2, "Training losses");
    rp_doc_para(d, "From summary.json (lower is better).");
    rp_metric_tables(d, s, NULL);
}

static void task_section(rp_doc *d, const rp_sweep *s, const rp_task *t)
{
    char title[300];
    snprintf(title, sizeof title, "Task %s", t->name);
    rp_doc_heading(d, 2, title);
    rp_doc_para(d, "From eval.json on held-out cells. Baselines are scored on the same cells with an evaluation seed of "
                   "their own, so they are the same in every run of a held-out protocol; shown is their mean over "
                   "runs.%s",
                ast_strlist_find(&t->keys, "morans_i_abs_error") >= 0
                    ? " morans_i_abs_error: the mean over genes of |Moran's I on the placed cells - on the true ones|."
                    : "");
    if (s->protocols.n == 1) rp_doc_para(d, "Held out by %s (docs/evaluation.md, Protocol).", s->protocols.v[0]);
    if (s->protocols.n > 1)
        rp_doc_para(d, "The runs hold out cells by %d protocols, which decide which method wins: a table per protocol, "
                       "each beside the baselines scored on its cells. The differences below compare configs with "
                       "the reference across protocols as well, on different cells.", s->protocols.n);
    rp_metric_tables(d, s, t);
    rp_sampler_tables(d, s, t);
}

static void monitor_cell(rp_table *t, const rp_sweep *s, int c, const char *metric)
{
    char buf[96];
    rp_warning w;
    if (!rp_is_warning_flag(metric))
        rp_table_cell(t, "%s", rp_fmt_stat(rp_stat_of(s, c, RP_MONITOR_LAST, metric), buf, sizeof buf));
    else if (rp_warning_of(s, c, metric, &w) || w.of)
        rp_table_cell(t, "fired in %d of %d seeds", w.seeds, w.of);
    else
        rp_table_cell(t, "n/a");
}

static void monitors(rp_doc *d, const rp_sweep *s, const rp_figures *figs)
{
    rp_doc_heading(d, 2, "Monitors");
    if (!s->monitors.n) {
        rp_doc_para(d, "No run logged monitor metrics.");
        return;
    }
    rp_table t;
    rp_table_init(&t, 1 + s->n_configs);
    rp_table_cell(&t, "metric");
    for (int c = 0; c < s->n_configs; c++) rp_table_cell(&t, "%s", s->configs[c].name);
    for (int m = 0; m < s->monitors.n; m++) {
        rp_table_cell(&t, "%s", rp_metric_label(s, s->monitors.v[m]));
        for (int c = 0; c < s->n_configs; c++) monitor_cell(&t, s, c, s->monitors.v[m]);
    }
    rp_doc_para(d, "Last logged value of each metric (the monitor's value over layers, else the mean of the layers), "
                   "then mean ± sd over seeds; for the *_warning flags, in how many seeds the monitor set it.");
    rp_doc_table(d, &t);
    rp_table_free(&t);
    char buf[2048];
    if (s->repeats.n)
        rp_doc_para(d, "Shown once: %s.", ast_strlist_join(&s->repeats, "; ", "", buf, sizeof buf));
    if (figs->not_drawn.n)
        rp_doc_para(d, "Not plotted: %s.", ast_strlist_join(&figs->not_drawn, "; ", "", buf, sizeof buf));
    const rp_figure *routing = rp_figure_find(figs, "report_routing.svg");
    if (routing) rp_doc_figure(d, routing);
    for (int i = 0; i < figs->n; i++)
        if (!strncmp(figs->v[i].file, "report_monitor_", 15)) rp_doc_figure(d, &figs->v[i]);
}

static void run_tables(rp_doc *d, const rp_sweep *s)
{
    rp_table all, out;
    rp_table_init(&all, 7);
    rp_table_init(&out, 5);
    const char *head[] = {"run", "config", "seed", "state"};
    for (int i = 0; i < 4; i++) rp_table_cell(&all, "%s", head[i]), rp_table_cell(&out, "%s", head[i]);
    rp_table_cell(&all, "steps"), rp_table_cell(&all, "best validation loss"), rp_table_cell(&all, "notes");
    rp_table_cell(&out, "reason");
    int n_out = 0;
    for (int i = 0; i < s->n_runs; i++) {
        const rp_run *r = &s->runs[i];
        rp_table *t = r->usable ? &all : &out;
        rp_table_cell(t, "%s", r->id), rp_table_cell(t, "%s", r->config);
        if (r->seed >= 0) rp_table_cell(t, "%lld", r->seed);
        else rp_table_cell(t, "?");
        rp_table_cell(t, "%s", r->state);
        if (r->usable) {
            rp_table_cell(t, "%.0f", rp_json_number(r->summary, "steps"));
            rp_table_cell(t, "%.4g", rp_json_number(r->summary, "best_val_loss"));
        }
        rp_table_cell(t, "%s", r->note);
        n_out += !r->usable;
    }
    rp_doc_heading(d, 2, "Runs left out");
    if (n_out) rp_doc_table(d, &out);
    else rp_doc_para(d, "None: every run in the ledger finished.");
    rp_doc_heading(d, 2, "Runs used");
    rp_doc_table(d, &all);
    rp_table_free(&all);
    rp_table_free(&out);
}

void rp_body(rp_doc *d, const rp_sweep *s, const rp_figures *figs)
{
    ast_strlist verdict = {0};
    char headline[4096];
    rp_headline(s, headline, sizeof headline);
    rp_doc_lead(d, "Verdict:", headline);
    intro(d, s);
    configs_section(d, s);
    rp_verdict(s, &verdict);
    rp_doc_heading(d, 2, "Verdict");
    rp_doc_list(d, &verdict);
    ast_strlist_free(&verdict);
    const rp_figure *key = rp_figure_find(figs, "report_key_metrics.svg");
    if (key) rp_doc_figure(d, key);
    const rp_figure *placement = rp_figure_find(figs, "report_placement.svg");
    if (placement) {
        rp_doc_heading(d, 2, "Placements");
        rp_doc_figure(d, placement);
    }
    cost_table(d, s);
    training_section(d, s);
    for (int t = 0; t < s->n_tasks; t++) task_section(d, s, &s->tasks[t]);
    rp_doc_heading(d, 2, "Loss curves");
    const char *curves[] = {"report_loss.svg", "report_val_loss.svg", "report_lr.svg"};
    for (int i = 0; i < 3; i++)
        if (rp_figure_find(figs, curves[i])) rp_doc_figure(d, rp_figure_find(figs, curves[i]));
    monitors(d, s, figs);
    run_tables(d, s);
    rp_provenance_section(d, s);
}
