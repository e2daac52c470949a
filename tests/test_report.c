/* alphast-run report on a sweep directory the test writes itself: two
 * configs x 3 seeds plus a failed and an unfinished run. The report's
 * cells and verdict must follow the runs' files — change one run's
 * numbers and the corresponding cell and sentence change. */
#define _XOPEN_SOURCE 700 /* nftw */
#include <criterion/criterion.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alphast/report.h"

typedef struct fake_run {
    const char *id, *config;
    int seed;
    double val, knn, entropy_min; /* best validation loss, kNN preservation, lowest logged entropy */
} fake_run;

/* Baseline val {0.50, 0.52, 0.54}, Gated {0.40, 0.42, 0.44}: both sd 0.02. */
static const fake_run runs[6] = {
    {"Baseline-01", "Baseline", 1, 0.50, 0.60, 0.8}, {"Baseline-02", "Baseline", 2, 0.52, 0.62, 0.8},
    {"Baseline-03", "Baseline", 3, 0.54, 0.64, 0.8}, {"Gated-01", "Gated", 1, 0.40, 0.61, 0.8},
    {"Gated-02", "Gated", 2, 0.42, 0.63, 0.8},       {"Gated-03", "Gated", 3, 0.44, 0.65, 0.3},
};

static void write_file(const char *path, const char *fmt, ...)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "cannot write %s", path);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s was not written", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = calloc((size_t)n + 1, 1);
    cr_assert(fread(text, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    return text;
}

static void write_summary(const char *sweep, const fake_run *r, double val)
{
    char path[512];
    snprintf(path, sizeof path, "%s/runs/%s/summary.json", sweep, r->id);
    int moe = !strcmp(r->config, "Gated"); /* the Gated runs stand in for a bigger model */
    write_file(path,
               "{\"steps\": 20, \"best_val_loss\": %.9g, \"last_val_loss\": %.9g, \"last_train_loss\": 0.45,"
               " \"seconds\": 10, \"steps_per_second\": %g, \"parameters\": %d, \"active_parameters\": %d,"
               " \"peak_arena_bytes\": 2097152, \"stop_reason\": \"epochs\"}\n",
               val, val + 0.01, moe ? 4.0 : 5.0, moe ? 300 : 200, moe ? 250 : 200);
}

static void write_eval(const char *sweep, const fake_run *r, double knn)
{
    char path[512];
    snprintf(path, sizeof path, "%s/runs/%s/eval.json", sweep, r->id);
    write_file(path,
               "{\"model\": {\"knn_preservation\": %.9g, \"procrustes\": 0.3, \"extra\": {\"k5\": 1}},"
               " \"random\": {\"knn_preservation\": 0.05, \"procrustes\": 0.99}, \"note\": \"held-out\"}\n",
               knn);
}

static void monitor_line(FILE *f, int step, const char *monitor, const char *metric, int layer, double v)
{
    fprintf(f, "{\"step\":%d,\"epoch\":%d,\"monitor\":\"%s\",\"metric\":\"%s\",\"layer\":%d,\"value\":%g}\n", step,
            (step - 1) / 10, monitor, metric, layer, v);
}

/* Loss lines per step and epoch, and monitor lines every 10 steps as
 * docs/monitors.md describes them: the expert entropy per layer and over
 * layers (-1) with its collapse flag (set when entropy_min < 0.5, which
 * appears at step 10), a per-layer-only gate mean, and a dotted breakdown. */
static void write_metrics(const char *sweep, const fake_run *r, double entropy_min)
{
    char path[512];
    snprintf(path, sizeof path, "%s/runs/%s/metrics.jsonl", sweep, r->id);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int step = 1; step <= 20; step++) {
        fprintf(f, "{\"kind\":\"train\",\"step\":%d,\"epoch\":%d,\"loss\":%g,\"grad_norm\":1.5,\"lr\":0.001}\n", step,
                (step - 1) / 10, 1.0 / step + r->seed * 0.01);
        if (step % 10) continue;
        fprintf(f, "{\"kind\":\"epoch\",\"step\":%d,\"epoch\":%d,\"train_loss\":0.5,\"val_loss\":%g}\n", step,
                step / 10 - 1, r->val + 0.1 / step);
        double low = step == 10 ? entropy_min : 0.8;
        monitor_line(f, step, "expert_load", "expert_entropy_normalized", 0, low);
        monitor_line(f, step, "expert_load", "expert_entropy_normalized", 1, 0.9);
        /* the monitor's own value over layers wins over the report's mean of the layers */
        monitor_line(f, step, "expert_load", "expert_entropy_normalized", -1, step == 10 ? low : 0.86);
        monitor_line(f, step, "expert_load", "expert_collapse_warning", -1, step == 10 && low < 0.5);
        monitor_line(f, step, "gate_activation", "activation_mean", 0, 0.6);
        monitor_line(f, step, "gate_activation", "activation_mean", 1, 0.7);
        monitor_line(f, step, "time_conditioning", "t0.expert1.share", 0, 0.25);
    }
    fputs("{\"kind\":\"train\",\"step\":21,\"loss\":", f); /* torn by a crash */
    fclose(f);
}

static char sweep_dir[64]; /* the test's sweep, removed after it */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) { return remove(path); }

static void remove_sweep(void)
{
    if (sweep_dir[0]) nftw(sweep_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(report, .fini = remove_sweep);

static char *make_sweep(void)
{
    char *dir = sweep_dir, path[512];
    remove_sweep(); /* one sweep per test at a time */
    strcpy(dir, "/tmp/alphast-report-XXXXXX");
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/runs", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/ledger.jsonl", dir);
    FILE *ledger = fopen(path, "w");
    cr_assert(ledger);
    for (int i = 0; i < 6; i++) {
        const fake_run *r = &runs[i];
        snprintf(path, sizeof path, "%s/runs/%s", dir, r->id);
        mkdir(path, 0777);
        write_summary(dir, r, r->val);
        write_eval(dir, r, r->knn);
        write_metrics(dir, r, r->entropy_min);
        /* the last line of a run wins: running, then done */
        fprintf(ledger, "{\"run\":\"%s\",\"config_name\":\"%s\",\"seed\":%d,\"state\":\"running\",\"dir\":\"runs/%s\"}\n",
                r->id, r->config, r->seed, r->id);
        if (i == 0) /* one run directory given as an absolute path */
            fprintf(ledger, "{\"run\":\"%s\",\"config_name\":\"%s\",\"seed\":%d,\"state\":\"done\",\"dir\":\"%s/runs/%s\"}\n",
                    r->id, r->config, r->seed, dir, r->id);
        else
            fprintf(ledger, "{\"run\":\"%s\",\"config_name\":\"%s\",\"seed\":%d,\"state\":\"done\",\"dir\":\"runs/%s\"}\n",
                    r->id, r->config, r->seed, r->id);
    }
    fputs("{\"run\":\"Gated-04\",\"config_name\":\"Gated\",\"seed\":4,\"state\":\"failed\",\"dir\":\"runs/Gated-04\","
          "\"exit\":1,\"reason\":\"step 12: the loss is not finite\"}\n",
          ledger);
    fputs("{\"run\":\"Baseline-04\",\"config_name\":\"Baseline\",\"seed\":4,\"state\":\"running\",\"dir\":\"runs/Baseline-04\"}\n",
          ledger);
    fputs("{\"run\":\"Baseline-05\",\"config_name\":\"Baseline\",\"seed\":5,\"state\":\"failed\",\"dir\":\"runs/Baseline-05\","
          "\"signal\":9}\n",
          ledger);
    fclose(ledger);
    return dir;
}

static char *report_md(const char *sweep, const char *baseline)
{
    ast_error e = {""};
    ast_report_opts o = {NULL, baseline};
    cr_assert(ast_report_write(sweep, &o, &e) == 0, "%s", e.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/report.md", sweep);
    return slurp(path);
}

/* Cell `col` (0 = the row label) of the Markdown table row starting with label. */
static char *cell(const char *md, const char *label, int col)
{
    static char out[256];
    char start[128];
    snprintf(start, sizeof start, "\n| %s |", label);
    const char *p = strstr(md, start);
    cr_assert(p, "no table row '%s' in the report", label);
    p++;
    for (int i = 0; i <= col; i++) {
        p = strchr(p, '|');
        cr_assert(p, "row '%s' has no column %d", label, col);
        p++;
    }
    while (*p == ' ') p++;
    size_t n = strcspn(p, "|");
    while (n && p[n - 1] == ' ') n--;
    snprintf(out, sizeof out, "%.*s", (int)n, p);
    return out;
}

/* The two-sided p of Student's t with 4 degrees of freedom, from its closed form. */
static double p_df4(double t)
{
    double u = fabs(t) / sqrt(1 + t * t / 4);
    return 1 - 0.75 * u * (1 - t * t / (12 * (1 + t * t / 4)));
}

Test(report, mean_sd_and_welch_p_from_the_runs)
{
    char *md = report_md(make_sweep(), NULL);
    /* Baseline 0.50, 0.52, 0.54: mean 0.52, sd 0.02 */
    cr_assert_str_eq(cell(md, "validation loss (best)", 1), "0.520 ± 0.020");
    /* Gated 0.40, 0.42, 0.44: change -0.1/0.52 = -19.2%; equal n and sd give df = 4 and
     * t = -0.1 / sqrt(2 * 0.02^2 / 3) = -6.1237, p = 0.0036 */
    char want[128];
    snprintf(want, sizeof want, "0.420 ± 0.020 (-19.2%%, p = %.2g)", p_df4(-0.1 / sqrt(2 * 0.0004 / 3)));
    cr_assert_str_eq(want, "0.420 ± 0.020 (-19.2%, p = 0.0036)");
    cr_assert_str_eq(cell(md, "validation loss (best)", 2), want);
    /* kNN: 0.61..0.65 vs 0.60..0.64, t = 0.01 / 0.01633, df 4 */
    snprintf(want, sizeof want, "0.630 ± 0.020 (+1.6%%, p = %.2g)", p_df4(0.01 / sqrt(2 * 0.0004 / 3)));
    cr_assert_str_eq(cell(md, "kNN preservation", 2), want);
    cr_assert_str_eq(cell(md, "kNN preservation", 3), "0.0500 ± 0.0000", "random coordinates column");
    cr_assert_str_eq(cell(md, "extra.k5", 1), "1.00 ± 0.00", "nested eval keys are read");
    /* cost: 1000 / steps_per_second; 300 vs 200 parameters */
    cr_assert_str_eq(cell(md, "Gated", 2), "300");
    cr_assert_str_eq(cell(md, "Gated", 3), "250");
    cr_assert_str_eq(cell(md, "Gated", 4), "250 ± 0");
    cr_assert_str_eq(cell(md, "Baseline", 1), "3 of 5");
    cr_assert(strstr(md, "Gated has the lowest validation loss (0.420 ± 0.020, -19.2% vs Baseline, p = 0.0036, 3 seeds); "
                         "the difference is significant at p < 0.05"), "%s", md);
    cr_assert(strstr(md, "Gated vs Baseline: significantly lower validation loss (best) (-19.2%, p = 0.0036); "
                         "not distinguishable (p >= 0.05): kNN preservation (p = 0.57)"), "%s", md);
    cr_assert(strstr(md, "Gated has 1.50× the parameters of Baseline (1.25× active per token) and 1.25× its step time."));
    free(md);
}

Test(report, a_changed_run_changes_its_cell_and_the_verdict)
{
    char *sweep = make_sweep();
    char *before = report_md(sweep, NULL);
    cr_assert(strstr(before, "Gated has the lowest validation loss"));
    free(before);

    /* Gated seed 2: kNN 0.63 -> 0.93 (mean 0.73, sd sqrt((0.12^2 + 0.2^2 + 0.08^2) / 2) = 0.174) */
    write_eval(sweep, &runs[4], 0.93);
    /* and its best validation loss 0.42 -> 0.90: Gated mean 0.58, sd 0.278, +11.5% vs Baseline */
    write_summary(sweep, &runs[4], 0.90);
    char *after = report_md(sweep, NULL);
    cr_assert(!strncmp(cell(after, "kNN preservation", 2), "0.730 ± 0.174 (+17.7%, p = ", 27), "%s",
              cell(after, "kNN preservation", 2));
    cr_assert(!strncmp(cell(after, "validation loss (best)", 2), "0.580 ± 0.278 (+11.5%, p = ", 27));
    cr_assert(strstr(after, "Baseline has the lowest validation loss (0.520 ± 0.020, 3 seeds)."), "%s", after);
    cr_assert(!strstr(after, "Gated has the lowest validation loss"));
    cr_assert(strstr(after, "Gated vs Baseline: not distinguishable (p >= 0.05): validation loss (best) (p = "));
    free(after);
}

/* The layout `alphast-run train` writes: per task, then per modality. */
Test(report, reads_the_nested_eval_json_that_training_writes)
{
    char *sweep = make_sweep();
    char path[512];
    snprintf(path, sizeof path, "%s/runs/%s/eval.json", sweep, runs[4].id);
    write_file(path, "{\"split\": \"test\", \"sets\": 16, \"tasks\": {\"expr_to_pos\": {"
                     "\"model\": {\"positions\": {\"knn_preservation\": 0.93, \"procrustes\": 0.3}},"
                     " \"random\": {\"positions\": {\"knn_preservation\": 0.05}}}}}\n");
    char *md = report_md(sweep, NULL);
    cr_assert(!strncmp(cell(md, "kNN preservation", 2), "0.730 ± 0.174 (+17.7%, p = ", 27), "%s",
              cell(md, "kNN preservation", 2));
    cr_assert(!strstr(md, "| sets |"), "bookkeeping numbers are not metrics");
    free(md);
}

Test(report, monitor_summaries_and_warnings_follow_the_logged_values)
{
    char *sweep = make_sweep();
    char *md = report_md(sweep, NULL);
    cr_assert(strstr(md, "Monitor warning, Gated: expert collapse (mean normalised expert entropy below the collapse "
                         "threshold, 0.5 by default) in 1 of 3 seeds, first at step 10."), "%s", md);
    cr_assert(!strstr(md, "Monitor warning, Baseline"));
    cr_assert_str_eq(cell(md, "expert_load/expert_collapse_warning", 1), "fired in 0 of 3 seeds");
    cr_assert_str_eq(cell(md, "expert_load/expert_collapse_warning", 2), "fired in 1 of 3 seeds");
    /* last value: the layer -1 value 0.86, not the layers' mean 0.85 */
    cr_assert_str_eq(cell(md, "expert_load/expert_entropy_normalized", 1), "0.860 ± 0.000");
    /* per-layer only: the mean of 0.6 and 0.7 */
    cr_assert_str_eq(cell(md, "gate_activation/activation_mean", 2), "0.650 ± 0.000");
    cr_assert_str_eq(cell(md, "time_conditioning/t0.expert1.share", 1), "0.250 ± 0.000");
    cr_assert_str_eq(cell(md, "gradient norm (whole model)", 2), "1.50 ± 0.00");
    free(md);

    write_metrics(sweep, &runs[5], 0.7);
    md = report_md(sweep, NULL);
    cr_assert(strstr(md, "No monitor warning fired."));
    cr_assert_str_eq(cell(md, "expert_load/expert_collapse_warning", 2), "fired in 0 of 3 seeds");
    free(md);
}

Test(report, failed_and_unfinished_runs_are_listed)
{
    char *md = report_md(make_sweep(), NULL);
    cr_assert_str_eq(cell(md, "Gated-04", 3), "failed");
    cr_assert_str_eq(cell(md, "Gated-04", 4), "step 12: the loss is not finite");
    cr_assert_str_eq(cell(md, "Baseline-04", 4), "did not finish");
    cr_assert_str_eq(cell(md, "Baseline-05", 4), "killed by signal 9");
    cr_assert(strstr(md, "Left out: 3 of 9 runs, Gated-04 (failed), Baseline-04 (running), Baseline-05 (failed); "
                         "see Runs left out."), "%s", md);
    /* the torn last line of metrics.jsonl is noted, the rest of the run used */
    cr_assert_str_eq(cell(md, "Gated-01", 6), "unreadable lines in metrics.jsonl skipped");
    free(md);
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p += strlen(what)) n++;
    return n;
}

Test(report, html_is_self_contained_and_svgs_sit_next_to_the_markdown)
{
    char *sweep = make_sweep(), path[512];
    free(report_md(sweep, NULL));
    snprintf(path, sizeof path, "%s/report.html", sweep);
    char *html = slurp(path);
    cr_assert(!strncmp(html, "<!DOCTYPE html>", 15));
    cr_assert(strstr(html, "</html>\n") && html[strlen(html) - 1] == '\n');
    /* loss, validation loss, gradient norm, entropy, gate mean: no plot for flags or breakdowns */
    cr_assert_eq(count(html, "<svg"), 5);
    cr_assert_eq(count(html, "</svg>"), 5);
    cr_assert_eq(count(html, "<table>"), count(html, "</table>"));
    cr_assert_eq(count(html, "<tr>"), count(html, "</tr>"));
    cr_assert(!strstr(html, "http") && !strstr(html, "<script") && !strstr(html, "src=") && !strstr(html, "href="));
    cr_assert(strstr(html, "Gated has the lowest validation loss"), "the HTML has the same verdict");
    cr_assert(strstr(html, "<td>0.420 ± 0.020 (-19.2%, p = 0.0036)</td>"));
    free(html);

    const char *svgs[] = {"report_loss.svg", "report_val_loss.svg", "report_monitor_train_grad_norm.svg",
                          "report_monitor_expert_load_expert_entropy_normalized.svg",
                          "report_monitor_gate_activation_activation_mean.svg"};
    char *md = report_md(sweep, NULL);
    for (int i = 0; i < 5; i++) {
        snprintf(path, sizeof path, "%s/%s", sweep, svgs[i]);
        char *svg = slurp(path);
        cr_assert(!strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39), "%s is a standalone SVG", svgs[i]);
        cr_assert_eq(count(svg, "<polyline"), 2, "%s: a line per config", svgs[i]);
        free(svg);
        char ref[128];
        snprintf(ref, sizeof ref, "](%s)", svgs[i]);
        cr_assert(strstr(md, ref), "report.md shows %s", svgs[i]);
    }
    free(md);
}

Test(report, baseline_and_out_options)
{
    char *sweep = make_sweep(), out[600], path[700];
    snprintf(out, sizeof out, "%s/elsewhere", sweep);
    ast_error e = {""};
    ast_report_opts o = {out, "Gated"};
    cr_assert(ast_report_write(sweep, &o, &e) == 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = slurp(path);
    /* against Gated: Baseline is +23.8% (0.1 / 0.42) with the same p */
    cr_assert_str_eq(cell(md, "validation loss (best)", 2), "0.520 ± 0.020 (+23.8%, p = 0.0036)");
    free(md);
    snprintf(path, sizeof path, "%s/report.md", sweep);
    cr_assert(fopen(path, "r") == NULL, "--out leaves the sweep directory alone");
}

Test(report, bad_input_is_a_clear_error)
{
    ast_error e = {""};
    ast_report_opts o = {NULL, "Nope"};
    cr_assert(ast_report_write(make_sweep(), &o, &e) < 0);
    cr_assert(strstr(e.msg, "no config named 'Nope'") && strstr(e.msg, "Baseline, Gated"), "%s", e.msg);
    cr_assert(ast_report_write("/nonexistent/sweep", NULL, &e) < 0);
    cr_assert(strstr(e.msg, "/nonexistent/sweep/ledger.jsonl: cannot open"), "%s", e.msg);

    char *sweep = make_sweep(), path[512];
    snprintf(path, sizeof path, "%s/ledger.jsonl", sweep);
    write_file(path, "not json\n\n");
    cr_assert(ast_report_write(sweep, NULL, &e) < 0);
    cr_assert(strstr(e.msg, "no runs in the ledger"), "%s", e.msg);
}

/* Exit status of `alphast-run ARGS`, its stderr into err. */
static int run_cli(const char *args, char *err, size_t n)
{
    char cmd[1024], errfile[] = "/tmp/alphast-report-err-XXXXXX";
    close(mkstemp(errfile));
    snprintf(cmd, sizeof cmd, "%s/alphast-run %s >/dev/null 2>%s", ALPHAST_BUILD_DIR, args, errfile);
    int st = system(cmd);
    FILE *f = fopen(errfile, "r");
    size_t got = f ? fread(err, 1, n - 1, f) : 0;
    err[got] = '\0';
    if (f) fclose(f);
    remove(errfile);
    cr_assert(WIFEXITED(st), "%s did not exit", cmd);
    return WEXITSTATUS(st);
}

Test(report, the_report_command)
{
    char *sweep = make_sweep(), args[256], err[4096], path[512];
    snprintf(args, sizeof args, "report %s --baseline Gated", sweep);
    cr_assert_eq(run_cli(args, err, sizeof err), 0, "%s", err);
    snprintf(path, sizeof path, "%s/report.html", sweep);
    free(slurp(path));
    cr_assert_eq(run_cli("report", err, sizeof err), 2, "no SWEEP_DIR is a usage error");
    cr_assert(strstr(err, "give the sweep directory"), "%s", err);
    cr_assert_eq(run_cli("report /nonexistent/sweep", err, sizeof err), 1);
    cr_assert(strstr(err, "/nonexistent/sweep/ledger.jsonl: cannot open"), "%s", err);
}
