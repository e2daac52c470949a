/* alphast-run report on a sweep directory the test writes itself: two
 * configs x 3 seeds plus a failed and an unfinished run, each with the
 * eval.json training writes (two tasks, baselines, diversity, score by
 * step count). The report's cells and verdict must follow the runs' files
 * — change one run's numbers and the corresponding cell and sentence
 * change — and its statistics must match values worked out by hand. */
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

#include "report/report.h"
#include "report/report_internal.h"
#include "test_files.h"

typedef struct fake_run {
    const char *id, *config;
    int seed;
    double val, knn, drs, pcc, entropy_min; /* best validation loss, knn_k10, dist_row_spearman, pcc_gene, lowest entropy */
} fake_run;

/* Every varying number has sd 0.02 over 3 seeds in both configs, so each
 * Welch test has df = 4 exactly and its p the closed form p_df4 below.
 * Gated - Baseline: validation losses -0.10 (p 0.0036), knn_k10 +0.01
 * (p 0.57), dist_row_spearman +0.05 (p 0.0375: below 0.05 before Holm's
 * correction, not after), pcc_gene +0.01 (p 0.57). */
static const fake_run runs[6] = {
    {"Baseline-01", "Baseline", 1, 0.50, 0.60, 0.50, 0.10, 0.8}, {"Baseline-02", "Baseline", 2, 0.52, 0.62, 0.52, 0.12, 0.8},
    {"Baseline-03", "Baseline", 3, 0.54, 0.64, 0.54, 0.14, 0.8}, {"Gated-01", "Gated", 1, 0.40, 0.61, 0.55, 0.11, 0.8},
    {"Gated-02", "Gated", 2, 0.42, 0.63, 0.57, 0.13, 0.8},       {"Gated-03", "Gated", 3, 0.44, 0.65, 0.59, 0.15, 0.3},
};

/* The baselines' knn_k10 on expr_to_pos: isomap above every config unless a test lowers it. */
static double isomap_knn = 0.70;

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


/* summary.json's held-out protocol object, when a test sets one. */
static const char *summary_protocol = NULL;

static void write_summary(const char *sweep, const fake_run *r, double val)
{
    char path[512];
    snprintf(path, sizeof path, "%s/runs/%s/summary.json", sweep, r->id);
    int moe = !strcmp(r->config, "Gated"); /* the Gated runs stand in for a bigger model */
    write_file(path,
               "{\"steps\": 20, \"best_val_loss\": %.9g, \"last_val_loss\": %.9g, \"last_train_loss\": 0.45,"
               " \"seconds\": 10, \"steps_per_second\": %g, \"parameters\": %d, \"active_parameters\": %d,"
               " \"peak_arena_bytes\": 2097152, \"stop_reason\": \"epochs\"%s%s}\n",
               val, val + 0.01, moe ? 4.0 : 5.0, moe ? 300 : 200, moe ? 250 : 200,
               summary_protocol ? ", \"protocol\": " : "", summary_protocol ? summary_protocol : "");
}

/* eval.json as `alphast-run train` writes it: per task the model, the
 * baselines on the same cells, the best of them, and for positions the
 * uncertainty of its samples and the score by sampler step count. Moran's I: the
 * model is off the truth by 0.2 and 0.05 (mean |error| 0.125), and a gene
 * name with a dot in it must not be read as a path. */
static void write_eval_judged(const char *sweep, const fake_run *r, double knn, int overconfident)
{
    char path[512];
    snprintf(path, sizeof path, "%s/runs/%s/eval.json", sweep, r->id);
    write_file(path,
               "{\"protocol\": \"region\", \"split\": \"test\", \"eval_seed\": 7, \"sets\": 3, \"cells\": 400,"
               " \"num_steps\": 50, \"morans_i_true\": {\"GeneA\": 0.4, \"Gene.B\": 0.5}, \"tasks\": {"
               "\"expr_to_pos\": {"
               "\"model\": {\"positions\": {\"knn_k10\": %.9g, \"dist_row_spearman\": %.9g, \"rmsd\": 1.1},"
               " \"morans_i\": {\"GeneA\": 0.2, \"Gene.B\": 0.45}},"
               " \"baselines\": {\"random\": {\"positions\": {\"knn_k10\": 0.02, \"dist_row_spearman\": 0.0,"
               " \"rmsd\": 3.0}, \"morans_i\": {\"GeneA\": 0.0, \"Gene.B\": 0.0}},"
               " \"expression_isomap\": {\"positions\": {\"knn_k10\": %.9g, \"dist_row_spearman\": 0.45, \"rmsd\": 1.5},"
               " \"morans_i\": {\"GeneA\": 0.3, \"Gene.B\": 0.5}}},"
               " \"best_baseline\": {\"name\": \"expression_isomap\", \"metric\": \"knn_k10\", \"value\": %.9g},"
               " \"uncertainty\": {\"samples\": 4, \"spread\": 0.3, \"skill\": 0.4, \"spread_skill\": %g,"
               " \"energy_score\": 0.25, \"coverage\": %g, \"coverage_nominal\": 0.8, \"judgement\": \"%s\","
               " \"overconfident\": %s, \"underconfident\": false,"
               " \"definitions\": {\"spread\": \"RMS distance\"}},"
               " \"by_steps\": {\"10\": {\"knn_k10\": %.9g}, \"1\": {\"knn_k10\": %.9g}, \"50\": {\"knn_k10\": %.9g}}},"
               "\"pos_to_expr\": {\"model\": {\"expression\": {\"mse\": 1.0, \"pcc_gene\": %.9g}},"
               " \"baselines\": {\"random\": {\"expression\": {\"mse\": 2.0, \"pcc_gene\": 0.0}},"
               " \"mean_profile\": {\"expression\": {\"mse\": 1.2, \"pcc_gene\": 0.05}},"
               " \"spatial_knn\": {\"expression\": {\"mse\": 0.9, \"pcc_gene\": 0.2}}}}}}\n",
               knn, r->drs, isomap_knn, isomap_knn, overconfident ? 0.01 : 0.9, overconfident ? 0.05 : 0.75,
               overconfident ? "overconfident" : "calibrated", overconfident ? "true" : "false", knn - 0.05,
               knn - 0.2, knn, r->pcc);
}

static void write_eval(const char *sweep, const fake_run *r, double knn) { write_eval_judged(sweep, r, knn, 0); }

static void monitor_line(FILE *f, int step, const char *monitor, const char *metric, int layer, double v)
{
    fprintf(f, "{\"step\":%d,\"epoch\":%d,\"monitor\":\"%s\",\"metric\":\"%s\",\"layer\":%d,\"value\":%g}\n", step,
            (step - 1) / 10, monitor, metric, layer, v);
}

/* Routing as time_conditioning logs it at each epoch's end: per layer,
 * bucket of diffusion time and expert the share of the bucket's tokens
 * (with the token counts beside them). At step 10 an even split; at step
 * 20, the last epoch, expert e takes 0.7 of bucket e's tokens. */
static void routing_lines(FILE *f, int step)
{
    char metric[64];
    for (int layer = 0; layer < 2; layer++)
        for (int q = 0; q < 2; q++)
            for (int e = 0; e < 2; e++) {
                snprintf(metric, sizeof metric, "t%d.expert%d.tokens", q, e);
                monitor_line(f, step, "time_conditioning", metric, layer, 100);
                snprintf(metric, sizeof metric, "t%d.expert%d.share", q, e);
                monitor_line(f, step, "time_conditioning", metric, layer, step < 20 ? 0.5 : e == q ? 0.7 : 0.3);
            }
}

/* The trainer's gradient norm: from 50 at step 1 to 0.46 at step 20, over two decades. */
static double grad_norm(int step) { return 1.0 / 3 + 50.0 / (step * step); }

/* Loss lines per step and epoch, and monitor lines every 10 steps as
 * docs/monitors.md describes them: the expert entropy per layer and over
 * layers (-1) with its collapse flag (set when entropy_min < 0.5, which
 * appears at step 10), a per-layer-only gate mean, the grad_norm monitor's
 * total (the trainer's grad_norm again, to 9 digits instead of 6), a count
 * of dropped tokens that stays 0, an aux loss that is 0 for Baseline, and
 * for Gated the routing by diffusion time. */
static void write_metrics(const char *sweep, const fake_run *r, double entropy_min)
{
    char path[512];
    int moe = !strcmp(r->config, "Gated");
    snprintf(path, sizeof path, "%s/runs/%s/metrics.jsonl", sweep, r->id);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    for (int step = 1; step <= 20; step++) {
        fprintf(f, "{\"kind\":\"train\",\"step\":%d,\"epoch\":%d,\"loss\":%g,\"grad_norm\":%g,\"lr\":0.001}\n", step,
                (step - 1) / 10, 1.0 / step + r->seed * 0.01, grad_norm(step));
        if (step % 10) continue;
        fprintf(f, "{\"kind\":\"epoch\",\"step\":%d,\"epoch\":%d,\"train_loss\":0.5,\"val_loss\":%g,\"val_knn_k10\":%g}\n",
                step, step / 10 - 1, r->val + 0.1 / step, 0.2 + 0.01 * step);
        double low = step == 10 ? entropy_min : 0.8;
        monitor_line(f, step, "expert_load", "expert_entropy_normalized", 0, low);
        monitor_line(f, step, "expert_load", "expert_entropy_normalized", 1, 0.9);
        /* the monitor's own value over layers wins over the report's mean of the layers */
        monitor_line(f, step, "expert_load", "expert_entropy_normalized", -1, step == 10 ? low : 0.86);
        monitor_line(f, step, "expert_load", "expert_collapse_warning", -1, step == 10 && low < 0.5);
        monitor_line(f, step, "expert_load", "dropped_tokens", -1, 0);
        monitor_line(f, step, "expert_load", "avg_aux_loss", -1, moe ? 0.01 + 0.001 * step : 0);
        monitor_line(f, step, "gate_activation", "activation_mean", 0, 0.6);
        monitor_line(f, step, "gate_activation", "activation_mean", 1, 0.7);
        fprintf(f, "{\"step\":%d,\"epoch\":%d,\"monitor\":\"grad_norm\",\"metric\":\"total_grad_norm\",\"layer\":-1,"
                   "\"value\":%.9g}\n", step, (step - 1) / 10, grad_norm(step));
        if (moe) routing_lines(f, step);
    }
    fputs("{\"kind\":\"train\",\"step\":21,\"loss\":", f); /* torn by a crash */
    fclose(f);
}

/* config.yaml as training resolves it: Baseline and Gated differ in their
 * attention and monitors, and their seeds differ run to run. */
static void write_config(const char *sweep, const fake_run *r)
{
    char path[512];
    snprintf(path, sizeof path, "%s/runs/%s/config.yaml", sweep, r->id);
    int gated = !strcmp(r->config, "Gated");
    write_file(path, "seed:\n  value: %d\ntraining:\n  epochs: 2\nattention: %s\nffn: dense\n"
                     "monitors:\n- expert_load\n- grad_norm\n%s", r->seed,
               gated ? "{name: gated, gate_type: headwise}" : "linear", gated ? "- time_conditioning\n" : "");
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
        write_config(dir, r);
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

static char *report_md(const char *sweep, const char *reference)
{
    ast_error e = {""};
    ast_report_opts o = {NULL, reference};
    cr_assert(ast_report_write(sweep, &o, &e) == 0, "%s", e.msg);
    char path[512];
    snprintf(path, sizeof path, "%s/report.md", sweep);
    return test_slurp(path);
}

/* Cell `col` (0 = the row label) of the first Markdown table row after
 * `from` that starts with label ("metric | config" for a row of differences). */
static char *cell_after(const char *md, const char *from, const char *label, int col)
{
    static char out[256];
    char start[128];
    snprintf(start, sizeof start, "\n| %s |", label);
    const char *p = strstr(md, from);
    cr_assert(p, "no '%s' in the report", from);
    p = strstr(p, start);
    cr_assert(p, "no table row '%s' after '%s' in the report", label, from);
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

static char *cell(const char *md, const char *label, int col) { return cell_after(md, "", label, col); }

/* The two-sided p of Student's t with 4 degrees of freedom, from its closed form. */
static double p_df4(double t)
{
    double u = fabs(t) / sqrt(1 + t * t / 4);
    return 1 - 0.75 * u * (1 - t * t / (12 * (1 + t * t / 4)));
}

/* Equal sd 0.02 over 3 seeds a side: se = sqrt(2 * 0.02^2 / 3) = 0.01633. */
static double p_of(double diff) { return p_df4(diff / sqrt(2 * 0.0004 / 3)); }

static char *fmt(const char *f, double x)
{
    static char buf[4][64];
    static int next;
    char *b = buf[next++ % 4];
    snprintf(b, 64, f, x);
    return b;
}

/* P(D < x) and P(D <= x) for the bootstrap difference D = mean(a*) - mean(b*)
 * of 3 seeds a side: all 27 x 27 equally likely index triples. */
static void exact_bootstrap(const double *a, const double *b, double x, double *below, double *at)
{
    int lt = 0, le = 0;
    for (int i = 0; i < 27 * 27; i++) {
        int ia = i % 27, ib = i / 27;
        double d = (a[ia % 3] + a[ia / 3 % 3] + a[ia / 9]) / 3 - (b[ib % 3] + b[ib / 3 % 3] + b[ib / 9]) / 3;
        lt += d < x, le += d <= x;
    }
    *below = lt / 729.0, *at = le / 729.0;
}

Test(report, values_differences_holm_and_mdd)
{
    char *md = report_md(make_sweep(), NULL);
    /* the reference config first, then the others */
    cr_assert_str_eq(cell(md, "validation loss (best)", 1), "lower");
    cr_assert_str_eq(cell(md, "validation loss (best)", 2), "0.520 ± 0.020");
    cr_assert_str_eq(cell(md, "validation loss (best)", 3), "0.420 ± 0.020");
    /* Gated - Baseline = -0.1: t = -6.1237 with df 4, p = 0.0036. Of the 9 tests (3 losses,
     * 4 metrics of expr_to_pos, 2 of pos_to_expr) the two validation losses have the
     * smallest p: Holm multiplies the first by 9, the second by 8, and keeps the larger */
    const char *row = "validation loss (best) | Gated";
    cr_assert_str_eq(cell(md, row, 2), "-0.100");
    cr_assert_str_eq(cell(md, row, 4), fmt("%.2g", p_of(0.1)));
    cr_assert_str_eq(cell(md, row, 4), "0.0036");
    cr_assert_str_eq(cell(md, row, 5), fmt("%.2g (survives)", 9 * p_of(0.1)));
    cr_assert(strstr(md, "| p (Holm, 9 tests) |"), "the family's size is in the table head");
    /* MDD = (t_0.975,4 + t_0.8,4) * se = (2.776445 + 0.940965) * 0.016330 = 0.0607 */
    cr_assert_str_eq(cell(md, row, 6), "0.061");
    /* the 95% interval: where the exact bootstrap distribution (729 equally likely
     * pairs of resamples) has 2.5% and 97.5% of its mass; the 10,000 resamples put
     * it within 4 sd of sampling error (4 * sqrt(0.025 * 0.975 / 10000) = 0.0062)
     * and printing to 3 decimals moves the ends by up to 0.0005 */
    double lo, hi, below, at;
    const double gated[3] = {0.40, 0.42, 0.44}, base[3] = {0.50, 0.52, 0.54};
    cr_assert(sscanf(cell(md, row, 3), "[%lf, %lf]", &lo, &hi) == 2, "%s", cell(md, row, 3));
    exact_bootstrap(gated, base, lo - 0.0005, &below, &at);
    cr_assert(below <= 0.025 + 0.0062, "lo %g: P(<) %g", lo, below);
    exact_bootstrap(gated, base, lo + 0.0005, &below, &at);
    cr_assert(at >= 0.025 - 0.0062, "lo %g: P(<=) %g", lo, at);
    exact_bootstrap(gated, base, hi - 0.0005, &below, &at);
    cr_assert(below <= 0.975 + 0.0062, "hi %g: P(<) %g", hi, below);
    exact_bootstrap(gated, base, hi + 0.0005, &below, &at);
    cr_assert(at >= 0.975 - 0.0062, "hi %g: P(<=) %g", hi, at);
    /* eval metrics: directions, the baselines' means over runs, the summed-up Moran's I */
    cr_assert_str_eq(cell(md, "knn_k10", 1), "higher");
    cr_assert_str_eq(cell(md, "knn_k10", 2), "0.620 ± 0.020");
    cr_assert_str_eq(cell(md, "knn_k10", 4), "0.0200", "random (baseline)");
    cr_assert_str_eq(cell(md, "knn_k10", 5), "0.700", "expression_isomap (baseline)");
    cr_assert_str_eq(cell(md, "rmsd", 1), "lower");
    cr_assert_str_eq(cell(md, "morans_i_abs_error", 3), "0.125 ± 0.000", "mean of |0.2 - 0.4| and |0.45 - 0.5|");
    cr_assert_str_eq(cell(md, "morans_i_abs_error", 4), "0.450", "random: |0 - 0.4|, |0 - 0.5|");
    cr_assert_str_eq(cell(md, "knn_k10 | Gated", 4), fmt("%.2g", p_of(0.01)));
    cr_assert_str_eq(cell_after(md, "Task pos_to_expr", "pcc_gene", 6), "0.200", "spatial_knn (baseline)");
    cr_assert(strstr(md, "| metric | better | Baseline (reference) | Gated | random (baseline) | expression_isomap (baseline) |"));
    /* cost: 1000 / steps_per_second; 300 vs 200 parameters */
    cr_assert_str_eq(cell_after(md, "## Cost", "Gated", 2), "300");
    cr_assert_str_eq(cell_after(md, "## Cost", "Gated", 3), "250");
    cr_assert_str_eq(cell_after(md, "## Cost", "Gated", 4), "250 ± 0");
    cr_assert_str_eq(cell_after(md, "## Cost", "Baseline", 1), "3 of 5");
    cr_assert(strstr(md, "Gated has 1.50× the parameters of Baseline (1.25× active per token) and 1.25× its step time."));
    free(md);
}

Test(report, the_verdict_claims_only_what_survives_holm)
{
    char *md = report_md(make_sweep(), NULL);
    char want[512];
    snprintf(want, sizeof want, "Gated vs the reference config Baseline, surviving Holm's correction over 9 tests: "
             "better validation loss (best) (-0.100, 95%% CI [");
    cr_assert(strstr(md, want), "%s", md);
    snprintf(want, sizeof want, "], p = %.2g, Holm p = %.2g); better validation loss (last) (-0.100", p_of(0.1), 9 * p_of(0.1));
    cr_assert(strstr(md, want), "%s", md);
    /* dist_row_spearman: +0.05, t = 3.06, p = 0.0375 < 0.05, but third smallest of 9:
     * Holm p = 7 * 0.0375 = 0.26. The verdict counts it and claims nothing */
    cr_assert_str_eq(cell(md, "dist_row_spearman | Gated", 4), fmt("%.2g", p_of(0.05)));
    cr_assert(p_of(0.05) < 0.05 && 7 * p_of(0.05) > 0.05);
    cr_assert_str_eq(cell(md, "dist_row_spearman | Gated", 5), fmt("%.2g", 7 * p_of(0.05)));
    const char *verdict = strstr(md, "## Verdict"), *end = strstr(md, "## Cost");
    cr_assert(verdict && end);
    char *v = strndup(verdict, (size_t)(end - verdict));
    cr_assert(!strstr(v, "dist_row_spearman on expr_to_pos ("), "%s", v);
    cr_assert(strstr(v, "1 difference has p < 0.05 before the correction but not after, and is not claimed: over 9 "
                        "tests chance alone gives about 0.5 such."), "%s", v);
    cr_assert(strstr(v, "What these seeds can show: one test at 0.05 finds a difference in knn_k10 on expr_to_pos from "
                        "the reference config Baseline with 80% power only if it is at least the MDD: Gated 0.061 "
                        "(3 vs 3 seeds); under Holm's correction it must be larger still."), "%s", v);
    cr_assert(strstr(v, "Gated has the lowest mean validation loss (0.420 ± 0.020, 3 seeds); it is lower than the "
                        "reference config's, and that survives Holm's correction."), "%s", v);
    free(v);
    free(md);
}

Test(report, without_survivors_the_verdict_says_so)
{
    /* Gated seed 2: validation loss 0.42 -> 0.90 (mean 0.58, sd 0.278): no difference
     * is left with a small p; dist_row_spearman's 0.0375 among 9 tests still fails */
    char *sweep = make_sweep();
    write_summary(sweep, &runs[4], 0.90);
    char *md = report_md(sweep, NULL);
    cr_assert(strstr(md, "No difference from the reference config Baseline survives Holm's correction over the 9 tests "
                         "of this report (family-wise 0.05). 1 difference has p < 0.05 before the correction"), "%s", md);
    cr_assert(!strstr(md, "surviving Holm"));
    cr_assert(strstr(md, "Baseline has the lowest mean validation loss (0.520 ± 0.020, 3 seeds)."), "%s", md);
    cr_assert(strstr(md, "What these seeds can show:"), "the MDD says what could have been seen");
    free(md);
}

Test(report, the_verdict_sets_the_best_config_against_the_best_baseline)
{
    char *md = report_md(make_sweep(), NULL);
    /* isomap's knn_k10 0.70 is above every config. The interval: Gated's seeds {0.61,
     * 0.63, 0.65} resampled against 0.70 in every run; 1/27 = 3.7% of resamples are
     * all 0.61 (all 0.65), about 370 +- 19 of 10,000, so the 250th smallest (largest)
     * lies in that atom by 6 sd: the ends are -0.09 and -0.05, exact to printing */
    cr_assert(strstr(md, "expr_to_pos — no config beats the best baseline expression_isomap on knn_k10 (0.700): the "
                         "best config, Gated, has 0.630 ± 0.020 (difference -0.070, 95% CI [-0.090, -0.050])."), "%s", md);
    /* the second metric of positions, and pos_to_expr's pcc_gene (spatial_knn 0.2 is best) */
    cr_assert(strstr(md, "expr_to_pos — best config Gated: dist_row_spearman 0.570 ± 0.020 vs best baseline "
                         "expression_isomap 0.450 (difference +0.120, 95% CI [+0.100, +0.140])."), "%s", md);
    cr_assert(strstr(md, "pos_to_expr — no config beats the best baseline spatial_knn on pcc_gene (0.200): the best "
                         "config, Gated, has 0.130 ± 0.020 (difference -0.070, 95% CI [-0.090, -0.050])."), "%s", md);
    free(md);

    isomap_knn = 0.58;
    md = report_md(make_sweep(), NULL);
    cr_assert(strstr(md, "expr_to_pos — best config Gated: knn_k10 0.630 ± 0.020 vs best baseline expression_isomap "
                         "0.580 (difference +0.050, 95% CI [+0.030, +0.070])."), "%s", md);
    free(md);
    isomap_knn = 0.62; /* Gated's interval [0.61, 0.65] - 0.62 reaches below 0 */
    md = report_md(make_sweep(), NULL);
    cr_assert(strstr(md, "(difference +0.010, 95% CI [-0.010, +0.030]); the interval reaches 0, so it is not shown to "
                         "be better."), "%s", md);
    free(md);
}

Test(report, uncertainty_and_the_score_by_steps)
{
    char *sweep = make_sweep();
    char *md = report_md(sweep, NULL);
    const char *unc = "Uncertainty (docs/evaluation.md)";
    cr_assert_str_eq(cell_after(md, unc, "Gated", 1), "4");
    cr_assert_str_eq(cell_after(md, unc, "Gated", 2), "0.900 ± 0.000");
    cr_assert_str_eq(cell_after(md, unc, "Gated", 3), "0.750 ± 0.000");
    cr_assert_str_eq(cell_after(md, unc, "Gated", 7), "overconfident in 0, underconfident in 0 of 3 runs");
    cr_assert(!strstr(md, "overconfident in 1"));
    /* step counts in numeric order; knn_k10 - 0.2 at 1 step, - 0.05 at 10 */
    const char *steps = "knn_k10 by the sampler's step count";
    cr_assert(strstr(md, "| config | 1 step | 10 steps | 50 steps |"), "%s", md);
    cr_assert_str_eq(cell_after(md, steps, "Gated", 1), "0.430 ± 0.020");
    cr_assert_str_eq(cell_after(md, steps, "Gated", 3), "0.630 ± 0.020");
    free(md);

    write_eval_judged(sweep, &runs[5], runs[5].knn, 1);
    md = report_md(sweep, NULL);
    cr_assert_str_eq(cell_after(md, unc, "Gated", 7), "overconfident in 1, underconfident in 0 of 3 runs");
    cr_assert(strstr(md, "Warning, expr_to_pos: Gated's samples are overconfident in 1 of 3 runs — spread/skill 0.603 "
                         "(1 is calibrated) and coverage 0.52 where a calibrated sampler covers 0.80: the samples agree "
                         "more than they are right (placement error 0.4 in the length unit), so their spread does not "
                         "say how wrong a placement is."), "%s", md);
    free(md);
}

Test(report, a_changed_run_changes_its_cell_and_the_verdict)
{
    char *sweep = make_sweep();
    char *before = report_md(sweep, NULL);
    cr_assert(strstr(before, "Gated has the lowest mean validation loss"));
    free(before);

    /* Gated seed 2: knn_k10 0.63 -> 0.93 (mean 0.73, sd sqrt((0.12^2 + 0.2^2 + 0.08^2) / 2) = 0.174) */
    write_eval(sweep, &runs[4], 0.93);
    /* and its best validation loss 0.42 -> 0.90: Gated mean 0.58, sd 0.278 */
    write_summary(sweep, &runs[4], 0.90);
    char *after = report_md(sweep, NULL);
    cr_assert_str_eq(cell(after, "knn_k10", 3), "0.730 ± 0.174");
    cr_assert_str_eq(cell(after, "knn_k10 | Gated", 2), "+0.110");
    cr_assert_str_eq(cell(after, "validation loss (best)", 3), "0.580 ± 0.278");
    cr_assert(strstr(after, "Baseline has the lowest mean validation loss (0.520 ± 0.020, 3 seeds)."), "%s", after);
    cr_assert(!strstr(after, "Gated has the lowest mean validation loss"));
    /* 0.73 > isomap's 0.70 now, but the interval of 3 seeds reaches below it */
    cr_assert(strstr(after, "expr_to_pos — best config Gated: knn_k10 0.730 ± 0.174 vs best baseline expression_isomap "
                            "0.700 (difference +0.030"), "%s", after);
    free(after);
}

/* Runs held out by different protocols are not pooled: a values table per
 * protocol, each with the baselines of its own runs' cells; one protocol
 * is named once. */
Test(report, each_protocol_gets_its_table_and_its_baselines)
{
    char *sweep = make_sweep();
    summary_protocol = "{\"split\": \"slab\", \"chosen_by\": \"auto\", \"split_ratio\": {\"val\": 0.1, \"test\": 0.1}}";
    for (int i = 0; i < 6; i++) write_summary(sweep, &runs[i], runs[i].val);
    char *md = report_md(sweep, NULL);
    cr_assert(strstr(md, "Held out by slab, val 0.1 test 0.1 (docs/evaluation.md, Protocol)."), "%s", md);
    cr_assert(!strstr(md, "Held out by slab, val 0.1 test 0.1:"), "one protocol, no table per protocol");
    free(md);
    summary_protocol = "{\"split\": \"random\", \"split_seed\": 0, \"split_ratio\": {\"val\": 0.1, \"test\": 0.1}}";
    isomap_knn = 0.90; /* random cells: another set of held-out cells, other baseline scores */
    for (int i = 3; i < 6; i++) write_summary(sweep, &runs[i], runs[i].val), write_eval(sweep, &runs[i], runs[i].knn);
    summary_protocol = NULL;
    isomap_knn = 0.70;
    md = report_md(sweep, NULL);
    /* columns: metric, better, the one config, random, expression_isomap */
    cr_assert_str_eq(cell_after(md, "Held out by slab, val 0.1 test 0.1:", "knn_k10", 2), "0.620 ± 0.020");
    cr_assert_str_eq(cell_after(md, "Held out by slab, val 0.1 test 0.1:", "knn_k10", 4), "0.700");
    cr_assert_str_eq(cell_after(md, "Held out by random, split seed 0, val 0.1 test 0.1:", "knn_k10", 2), "0.630 ± 0.020");
    cr_assert_str_eq(cell_after(md, "Held out by random, split seed 0, val 0.1 test 0.1:", "knn_k10", 4), "0.900");
    cr_assert(strstr(md, "hold out cells by 2 protocols"), "%s", md);
    free(md);
    for (int i = 3; i < 6; i++) write_summary(sweep, &runs[i], runs[i].val); /* as written before data.split */
    md = report_md(sweep, NULL);
    cr_assert(strstr(md, "Held out by a protocol its runs do not record (written before data.split):"), "%s", md);
    cr_assert_str_eq(cell_after(md, "written before data.split):", "knn_k10", 2), "0.630 ± 0.020", "not dropped");
    free(md);
}

/* The layout before the baselines: per task "model" and "random" only. */
Test(report, reads_the_older_eval_json_with_random_as_the_one_baseline)
{
    char *sweep = make_sweep();
    char path[512];
    for (int i = 0; i < 6; i++) {
        snprintf(path, sizeof path, "%s/runs/%s/eval.json", sweep, runs[i].id);
        write_file(path, "{\"split\": \"test\", \"sets\": 16, \"morans_i_true\": {\"GeneA\": 0.4}, \"tasks\": {\"expr_to_pos\": {"
                         "\"model\": {\"positions\": {\"knn_preservation\": %.9g, \"procrustes\": 0.3}, \"morans_i\": {\"GeneA\": 0.3}},"
                         " \"random\": {\"positions\": {\"knn_preservation\": 0.05, \"procrustes\": 0.9}}}}}\n",
                   runs[i].knn);
    }
    char *md = report_md(sweep, NULL);
    cr_assert(strstr(md, "| metric | better | Baseline (reference) | Gated | random (baseline) |"), "%s", md);
    cr_assert_str_eq(cell(md, "kNN preservation", 3), "0.630 ± 0.020");
    cr_assert_str_eq(cell(md, "kNN preservation", 4), "0.0500");
    cr_assert_str_eq(cell(md, "morans_i_abs_error", 2), "0.100 ± 0.000");
    cr_assert(!strstr(md, "| sets |"), "bookkeeping numbers are not metrics");
    /* 0.63 - 0.05; 1/27 of the resamples at each end, as above */
    cr_assert(strstr(md, "expr_to_pos — best config Gated: knn_preservation 0.630 ± 0.020 vs best baseline random 0.050 "
                         "(difference +0.580, 95% CI [+0.560, +0.600])."), "%s", md);
    cr_assert(strstr(md, "| p (Holm, 6 tests) |"), "3 losses, kNN, Procrustes and Moran's I: %s", md);
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
    cr_assert_str_eq(cell(md, "gradient norm (whole model)", 2), "0.458 ± 0.000", "1/3 + 50/20^2");
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

/* A FIFO in place of a run's files or the ledger blocked the report in
 * open() for ever: the run's files are skipped as unreadable, the ledger
 * is an error naming it. */
Test(report, fifos_in_place_of_its_files_do_not_block, .timeout = 30)
{
    char *sweep = make_sweep(), path[512];
    const char *files[] = {"runs/Gated-01/metrics.jsonl", "runs/Gated-02/eval.json", "runs/Gated-03/summary.json",
                           "runs/Baseline-01/config.yaml"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", sweep, files[i]);
        cr_assert(unlink(path) == 0 && mkfifo(path, 0600) == 0, "%s", path);
    }
    ast_error e = {""};
    ast_report_opts o = {NULL, NULL};
    cr_assert(ast_report_write(sweep, &o, &e) == 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/ledger.jsonl", sweep);
    cr_assert(unlink(path) == 0 && mkfifo(path, 0600) == 0);
    cr_assert(ast_report_write(sweep, &o, &e) < 0);
    cr_assert(strstr(e.msg, "ledger.jsonl: not a regular file (a FIFO)"), "%s", e.msg);
}

static int exists(const char *sweep, const char *file);

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
    char *html = test_slurp(path);
    cr_assert(!strncmp(html, "<!DOCTYPE html>", 15));
    cr_assert(strstr(html, "</html>\n") && html[strlen(html) - 1] == '\n');
    /* the key metrics; loss, validation loss, learning rate, gradient norm, entropy, aux loss, gate mean,
     * the sampled validation score (no plot for flags, repeats or zeros); routing */
    cr_assert_eq(count(html, "<svg"), 10);
    cr_assert_eq(count(html, "</svg>"), 10);
    cr_assert_eq(count(html, "<table>"), count(html, "</table>"));
    cr_assert_eq(count(html, "<tr>"), count(html, "</tr>"));
    cr_assert(!strstr(html, "http") && !strstr(html, "<script") && !strstr(html, "src=") && !strstr(html, "href="));
    cr_assert(strstr(html, "Gated has the lowest mean validation loss"), "the HTML has the same verdict");
    cr_assert(strstr(html, "<td class=\"n\">0.420 ± 0.020</td>"), "numbers right-aligned, unwrapped");
    free(html);

    const char *svgs[] = {"report_loss.svg", "report_val_loss.svg", "report_lr.svg", "report_monitor_train_grad_norm.svg",
                          "report_monitor_expert_load_expert_entropy_normalized.svg",
                          "report_monitor_gate_activation_activation_mean.svg",
                          "report_monitor_expert_load_avg_aux_loss.svg", "report_key_metrics.svg", "report_routing.svg",
                          "report_monitor_validation_knn_k10.svg"};
    char *md = report_md(sweep, NULL);
    for (int i = 0; i < 10; i++) {
        snprintf(path, sizeof path, "%s/%s", sweep, svgs[i]);
        char *svg = test_slurp(path);
        cr_assert(!strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39), "%s is a standalone SVG", svgs[i]);
        if (i < 6 || i == 9) cr_assert_eq(count(svg, "class=\"mean\""), 2, "%s: a line per config", svgs[i]);
        free(svg);
        char ref[300], csv[128];
        snprintf(ref, sizeof ref, "](%s)", svgs[i]);
        cr_assert(strstr(md, ref), "report.md shows %s", svgs[i]);
        snprintf(csv, sizeof csv, "%.*s.csv", (int)strlen(svgs[i]) - 4, svgs[i]);
        snprintf(ref, sizeof ref, "[Data: %s](%s)", csv, csv);
        cr_assert(strstr(md, ref) && exists(sweep, csv), "%s beside %s, linked", csv, svgs[i]);
    }
    free(md);
}

static int exists(const char *sweep, const char *file)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", sweep, file);
    return access(path, F_OK) == 0;
}

Test(report, the_config_table_says_what_sets_each_config_apart)
{
    char *sweep = make_sweep(), path[512];
    char *md = report_md(sweep, NULL);
    cr_assert_str_eq(cell_after(md, "## Configs", "Baseline (reference)", 1),
                     "attention=linear, monitors=[expert_load, grad_norm]");
    cr_assert_str_eq(cell_after(md, "## Configs", "Gated", 1),
                     "attention=gated, attention.gate_type=headwise, monitors=[expert_load, grad_norm, time_conditioning]");
    /* the seed differs run to run, the rest is shared: neither sets a config apart */
    const char *configs = strstr(md, "## Configs");
    char *table = strndup(configs, (size_t)(strstr(configs, "## Verdict") - configs));
    cr_assert(!strstr(table, "seed.value=") && !strstr(table, "training.epochs=") && !strstr(table, "ffn=dense"), "%s",
              table);
    free(table);
    free(md);

    /* a run without its config.yaml leaves its config to the others */
    snprintf(path, sizeof path, "%s/runs/%s/config.yaml", sweep, runs[4].id);
    cr_assert(remove(path) == 0);
    md = report_md(sweep, NULL);
    cr_assert_str_eq(cell_after(md, "## Configs", "Gated", 1),
                     "attention=gated, attention.gate_type=headwise, monitors=[expert_load, grad_norm, time_conditioning]");
    free(md);
    for (int i = 3; i < 6; i++) {
        snprintf(path, sizeof path, "%s/runs/%s/config.yaml", sweep, runs[i].id);
        remove(path);
    }
    md = report_md(sweep, NULL);
    cr_assert_str_eq(cell_after(md, "## Configs", "Gated", 1), "no config.yaml in its run directories");
    free(md);
}

Test(report, the_key_metrics_figure_has_every_seed_and_the_interval)
{
    char *sweep = make_sweep();
    free(report_md(sweep, NULL));
    char path[512];
    snprintf(path, sizeof path, "%s/report_key_metrics.svg", sweep);
    char *svg = test_slurp(path);
    /* the best validation loss, expr_to_pos's knn_k10 and dist_row_spearman, pos_to_expr's pcc_gene */
    cr_assert(strstr(svg, ">validation loss (best), lower is better</text>"));
    cr_assert(strstr(svg, ">expr_to_pos: knn_k10, higher is better</text>"));
    cr_assert(strstr(svg, "lengthAdjust=\"spacingAndGlyphs\">expr_to_pos: dist_row_spearman, higher is better</text>"),
              "a title longer than its panel is squeezed into it, not cut off at the figure's edge");
    cr_assert(strstr(svg, ">pos_to_expr: pcc_gene, higher is better</text>"));
    cr_assert_eq(count(svg, "<circle"), 4 * 6, "a dot per seed");
    cr_assert_eq(count(svg, "class=\"interval\""), 4 * 2, "an interval per config");
    cr_assert_eq(count(svg, "stroke-dasharray"), 2 + 2 + 3, "a line per baseline");
    cr_assert(strstr(svg, ">expression_isomap</text>") && strstr(svg, ">spatial_knn</text>"));
    free(svg);
    /* the figure is the one place the primary metrics are drawn */
    cr_assert(!exists(sweep, "report_expr_to_pos_knn_k10.svg") && !exists(sweep, "report_pos_to_expr_pcc_gene.svg"));
}

/* Gated's seeds 0.40, 0.42, 0.44: mean 0.42, sd 0.02, t(0.975, 2) = 4.302653 */
Test(report, the_interval_is_the_t_interval_of_the_mean)
{
    const double v[3] = {0.40, 0.42, 0.44};
    double lo, hi, half = 4.302653 * 0.02 / sqrt(3);
    rp_mean_interval(v, 3, &lo, &hi);
    cr_assert(fabs(lo - (0.42 - half)) < 1e-6 && fabs(hi - (0.42 + half)) < 1e-6, "[%g, %g]", lo, hi);
    rp_mean_interval(v, 1, &lo, &hi);
    cr_assert(isnan(lo) && isnan(hi), "no interval from one seed");
}

Test(report, routing_is_a_heatmap_of_experts_by_time_buckets)
{
    char *sweep = make_sweep(), path[512];
    char *md = report_md(sweep, NULL);
    cr_assert(strstr(md, "](report_routing.svg)"));
    cr_assert(!strstr(md, ".share") && !strstr(md, ".tokens"), "no table row per bucket and expert: %s", md);
    free(md);
    snprintf(path, sizeof path, "%s/report_routing.svg", sweep);
    char *svg = test_slurp(path);
    /* Gated alone routes: 3 seeds x 2 layers, each 2 experts x 2 buckets; the last epoch's shares */
    cr_assert_eq(count(svg, "class=\"cell\""), 3 * 2 * 2 * 2);
    cr_assert_eq(count(svg, ">0.70</text>"), 3 * 2 * 2, "expert e takes 0.7 of bucket e");
    cr_assert_eq(count(svg, ">0.30</text>"), 3 * 2 * 2);
    cr_assert(!strstr(svg, ">0.50</text>"), "the earlier epoch's even split is replaced");
    cr_assert(strstr(svg, ">Gated</text>") && !strstr(svg, ">Baseline</text>"));
    cr_assert(strstr(svg, ">seed 3</text>") && strstr(svg, ">layer 1</text>") && strstr(svg, ">0.5–1</text>"));
    free(svg);
}

Test(report, each_series_is_drawn_once_and_a_zero_one_not_at_all)
{
    char *sweep = make_sweep();
    char *md = report_md(sweep, NULL);
    /* total_grad_norm is the trainer's grad_norm every 10 steps: one plot, one table row */
    cr_assert(exists(sweep, "report_monitor_train_grad_norm.svg"));
    cr_assert(!exists(sweep, "report_monitor_grad_norm_total_grad_norm.svg"));
    cr_assert(!strstr(md, "| grad_norm/total_grad_norm |"), "%s", md);
    cr_assert(strstr(md, "Shown once: grad_norm/total_grad_norm (the same values as gradient norm (whole model))."),
              "%s", md);
    /* dropped tokens stay 0 in every run: a table row, no plot */
    cr_assert(!exists(sweep, "report_monitor_expert_load_dropped_tokens.svg"));
    cr_assert_str_eq(cell(md, "expert_load/dropped_tokens", 1), "0.00 ± 0.00");
    cr_assert(strstr(md, "Not plotted: expert_load/dropped_tokens (zero throughout in every run)."), "%s", md);
    /* constant flags agree with each other by coincidence: each keeps its row */
    cr_assert_str_eq(cell(md, "expert_load/expert_collapse_warning", 1), "fired in 0 of 3 seeds");
    /* the aux loss is 0 for Baseline only: Gated's line alone, and the caption says why */
    cr_assert(strstr(md, "Zero throughout, so not drawn: Baseline."), "%s", md);
    free(md);
    char path[512];
    snprintf(path, sizeof path, "%s/report_monitor_expert_load_avg_aux_loss.svg", sweep);
    char *svg = test_slurp(path);
    cr_assert_eq(count(svg, "class=\"mean\""), 1);
    cr_assert(strstr(svg, ">Gated</text>") && !strstr(svg, ">Baseline</text>"));
    free(svg);
}

/* The y of the tick labelled `label` on a plot's y axis. */
static double tick_y(const char *svg, const char *label)
{
    char want[64];
    snprintf(want, sizeof want, "\" text-anchor=\"end\">%s</text>", label);
    const char *p = strstr(svg, want);
    cr_assert(p, "no tick %s", label);
    while (p > svg && strncmp(p, " y=\"", 4)) p--;
    return atof(p + 4);
}

Test(report, an_axis_turns_logarithmic_when_values_span_two_decades)
{
    rp_axes a = {0};
    rp_axes_fit_y(&a, 1, 99);
    cr_assert(!a.log_y);
    rp_axes_fit_y(&a, 1, 100);
    cr_assert(a.log_y);
    rp_axes_fit_y(&a, 0, 1000);
    cr_assert(!a.log_y, "no log of 0");
    double x[3] = {1, 2, 3}, y[3] = {10, 1, 0.1};
    rp_band b = {3, x, y, y, y};
    rp_line line = {.label = "Gated", .color = 1, .band = &b};
    char *svg = rp_svg_plot("gradient norm", "gradient norm", &line, 1, 0);
    cr_assert(strstr(svg, ">gradient norm (log scale)</text>"), "%s", svg);
    /* a decade is the same height everywhere */
    double y10 = tick_y(svg, "10"), y1 = tick_y(svg, "1"), y01 = tick_y(svg, "0.1");
    cr_assert(fabs((y1 - y10) - (y01 - y1)) < 0.2, "%g %g %g", y10, y1, y01);
    free(svg);
    /* in the report: the gradient norm spans 50 .. 0.46, the training loss 1.03 .. 0.06 */
    char *sweep = make_sweep(), path[512];
    free(report_md(sweep, NULL));
    snprintf(path, sizeof path, "%s/report_monitor_train_grad_norm.svg", sweep);
    svg = test_slurp(path);
    cr_assert(strstr(svg, "(log scale)</text>"));
    free(svg);
    snprintf(path, sizeof path, "%s/report_loss.svg", sweep);
    svg = test_slurp(path);
    cr_assert(!strstr(svg, "(log scale)"));
    free(svg);
}

Test(report, reference_config_and_out_options)
{
    char *sweep = make_sweep(), out[600], path[700];
    snprintf(out, sizeof out, "%s/elsewhere", sweep);
    ast_error e = {""};
    ast_report_opts o = {out, "Gated"};
    cr_assert(ast_report_write(sweep, &o, &e) == 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/report.md", out);
    char *md = test_slurp(path);
    /* against Gated: Baseline is +0.1 with the same p */
    cr_assert_str_eq(cell(md, "validation loss (best)", 2), "0.420 ± 0.020");
    cr_assert(strstr(md, "| validation loss (best) | lower | 0.420 ± 0.020 | 0.520 ± 0.020 |"), "%s", md);
    cr_assert_str_eq(cell(md, "validation loss (best) | Baseline", 2), "+0.100");
    cr_assert_str_eq(cell(md, "validation loss (best) | Baseline", 4), "0.0036");
    cr_assert(strstr(md, "compared with the reference config Gated"), "%s", md);
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
    free(test_slurp(path));
    cr_assert_eq(run_cli("report", err, sizeof err), 2, "no SWEEP_DIR is a usage error");
    cr_assert(strstr(err, "give the sweep directory"), "%s", err);
    cr_assert_eq(run_cli("report /nonexistent/sweep", err, sizeof err), 1);
    cr_assert(strstr(err, "/nonexistent/sweep/ledger.jsonl: cannot open"), "%s", err);
}

/* --out -: the self-contained report.html on stdout, and nothing left in
 * the sweep directory or the temporary one. */
Test(report, out_dash_writes_the_html_page_to_stdout)
{
    char *sweep = make_sweep(), cmd[1024], path[600];
    snprintf(path, sizeof path, "%s/stdout.html", sweep);
    snprintf(cmd, sizeof cmd, "TMPDIR=%s %s/alphast-run report %s --out - >%s", sweep, ALPHAST_BUILD_DIR, sweep, path);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    char *html = test_slurp(path);
    cr_assert(!strncmp(html, "<!DOCTYPE html>", 15) && strstr(html, "<svg") && strstr(html, "</html>"), "%.200s", html);
    free(html);
    snprintf(path, sizeof path, "%s/report.md", sweep);
    cr_assert_neq(access(path, F_OK), 0, "nothing written into the sweep directory");
    snprintf(cmd, sizeof cmd, "ls -d %s/alphast-report-* >/dev/null 2>&1", sweep);
    cr_assert_neq(system(cmd), 0, "the temporary directory is gone");
}

/* The verdict in one line above everything else: where the best config
 * stands against the best baseline, whether any config differs from the
 * reference after Holm, and the warnings counted (Gated-03's expert
 * collapse; the failed and the unfinished runs). */
Test(report, the_verdict_opens_the_report_in_one_line)
{
    char *md = report_md(make_sweep(), NULL);
    const char *want = "# Ablation report: ";
    cr_assert(!strncmp(md, want, strlen(want)));
    const char *lead = strstr(md, "\n\n**Verdict:** ");
    cr_assert(lead && lead == strchr(md, '\n'), "the first paragraph: %s", md);
    lead += 2;
    char *line = strndup(lead, strcspn(lead, "\n"));
    cr_assert_str_eq(line, "**Verdict:** expr_to_pos — no config beats the best baseline expression_isomap on knn_k10 "
                           "(0.700): the best config, Gated, has 0.630 ± 0.020 (difference -0.070, 95% CI [-0.090, "
                           "-0.050]); Gated differs from the reference config Baseline after Holm's correction over 9 "
                           "tests; 1 monitor warning fired; 3 runs left out.");
    free(line);
    free(md);
    /* overconfident samples are said on top, not only far down the list */
    char *sweep = make_sweep();
    write_eval_judged(sweep, &runs[0], runs[0].knn, 1);
    md = report_md(sweep, NULL);
    cr_assert(strstr(md, "WARNING: the samples of 1 config are overconfident (their spread is far below their error)"),
              "%s", md);
    free(md);
}

/* The rows of a figure's CSV whose first two fields are config and series. */
static int csv_rows(const char *csv, const char *prefix)
{
    return count(csv, prefix);
}

/* Each seed drawn thin beside the mean, its best epoch ringed, and the same
 * numbers in the CSV beside the SVG. The fake validation loss is
 * val + 0.1 / step at steps 10 and 20: every seed is best at step 20,
 * except where a test makes the first epoch best. */
Test(report, learning_curves_show_each_seed_and_its_best_epoch)
{
    char *sweep = make_sweep(), path[512];
    free(report_md(sweep, NULL));
    snprintf(path, sizeof path, "%s/report_val_loss.svg", sweep);
    char *svg = test_slurp(path);
    cr_assert_eq(count(svg, "class=\"seed\""), 6, "a thin line per seed");
    cr_assert_eq(count(svg, "class=\"best\""), 6, "a ring per seed");
    cr_assert(strstr(svg, ">best epoch of a seed</text>") && strstr(svg, ">one seed (thick: mean)</text>"));
    free(svg);
    snprintf(path, sizeof path, "%s/report_val_loss.csv", sweep);
    char *csv = test_slurp(path);
    cr_assert(!strncmp(csv, "config,series,step,value\n", 25));
    cr_assert(strstr(csv, "\nBaseline,\"best, seed 1\",20,0.505\n"), "%s", csv);
    cr_assert(strstr(csv, "\nGated,\"best, seed 3\",20,0.445\n"), "%s", csv);
    cr_assert(strstr(csv, "\nGated,seed 2,10,0.43\n") && strstr(csv, "\nGated,mean,10,0.43\n"), "%s", csv);
    cr_assert_eq(csv_rows(csv, "\nBaseline,mean,"), 2, "the mean at each epoch");
    cr_assert_eq(csv_rows(csv, "\nBaseline,min,"), 2);
    cr_assert_eq(csv_rows(csv, "\nGated,seed "), 6);
    free(csv);

    /* Gated seed 1 overfits: its first epoch is its best */
    snprintf(path, sizeof path, "%s/runs/%s/metrics.jsonl", sweep, runs[3].id);
    write_file(path, "{\"kind\":\"epoch\",\"step\":10,\"epoch\":0,\"val_loss\":0.3}\n"
                     "{\"kind\":\"epoch\",\"step\":20,\"epoch\":1,\"val_loss\":0.5}\n"
                     "{\"kind\":\"epoch\",\"step\":30,\"epoch\":2,\"val_loss\":0.3}\n");
    free(report_md(sweep, NULL));
    snprintf(path, sizeof path, "%s/report_val_loss.csv", sweep);
    csv = test_slurp(path);
    cr_assert(strstr(csv, "\nGated,\"best, seed 1\",10,0.3\n"), "the first lowest, as training kept it: %s", csv);
    free(csv);
}

Test(report, the_learning_rate_is_plotted_from_the_training_lines)
{
    char *sweep = make_sweep(), path[512];
    char *md = report_md(sweep, NULL);
    cr_assert(strstr(md, "](report_lr.svg)"));
    free(md);
    snprintf(path, sizeof path, "%s/report_lr.csv", sweep);
    char *csv = test_slurp(path);
    cr_assert(strstr(csv, "\nBaseline,seed 3,20,0.001\n"), "%s", csv);
    free(csv);
}

Test(report, key_metrics_and_routing_have_their_numbers_beside_them)
{
    char *sweep = make_sweep(), path[512];
    free(report_md(sweep, NULL));
    snprintf(path, sizeof path, "%s/report_key_metrics.csv", sweep);
    char *csv = test_slurp(path);
    /* 4 panels x 2 configs x (3 seeds + mean and interval), and 2 + 2 + 3 baselines */
    cr_assert_eq(count(csv, "\n") - 1, 4 * 2 * 6 + 7, "%s", csv);
    cr_assert(strstr(csv, "\n\"validation loss (best), lower is better\",Gated,mean,0.42\n"), "%s", csv);
    cr_assert(strstr(csv, "\n\"expr_to_pos: knn_k10, higher is better\",expression_isomap,baseline,0.7\n"), "%s", csv);
    free(csv);
    snprintf(path, sizeof path, "%s/report_routing.csv", sweep);
    csv = test_slurp(path);
    cr_assert_eq(count(csv, "\n") - 1, 3 * 2 * 2 * 2, "a row per cell of the heatmap");
    cr_assert(strstr(csv, "\nGated,3,1,1,1,0.7\n"), "%s", csv);
    free(csv);
}

/* placement.csv as training writes it: cells on a strip, placed on a
 * ring, with a cell type (one with a comma, quoted). */
static void write_placement(const char *sweep, const fake_run *r, const char *header)
{
    char path[512];
    snprintf(path, sizeof path, "%s/runs/%s/placement.csv", sweep, r->id);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(header, f);
    for (int set = 0; set < 2; set++)
        for (int i = 0; i < 12; i++)
            fprintf(f, "%d,cell_%d_%d,%s,%d,0,0,%g,%g,0\n", set, set, i, i % 2 ? "B cell" : "\"T cell, CD4\"", i,
                    cos(i * 0.5), sin(i * 0.5));
    fclose(f);
}

static const char *placement_header = "set,cell,label,true_x,true_y,true_z,placed_x,placed_y,placed_z\n";

Test(report, placements_are_drawn_true_beside_placed_per_config)
{
    char *sweep = make_sweep(), path[512];
    char *md = report_md(sweep, NULL);
    cr_assert(!strstr(md, "## Placements") && !exists(sweep, "report_placement.svg"), "no placement.csv, no figure");
    free(md);
    write_placement(sweep, &runs[0], placement_header); /* Baseline's first seed */
    write_placement(sweep, &runs[4], placement_header); /* Gated's second: its first has none */
    md = report_md(sweep, NULL);
    cr_assert(strstr(md, "## Placements\n\n![") && strstr(md, "](report_placement.svg)"), "%s", md);
    cr_assert(strstr(md, "coloured by the data's cell type"), "%s", md);
    free(md);
    snprintf(path, sizeof path, "%s/report_placement.svg", sweep);
    char *svg = test_slurp(path);
    cr_assert_eq(count(svg, "class=\"cell\""), 2 * 2 * 12, "per config the first set, true and placed");
    cr_assert(strstr(svg, ">Baseline, seed 1 (Baseline-01): 12 cells of one held-out set</text>"), "%s", svg);
    cr_assert(strstr(svg, ">Gated, seed 2 (Gated-02): 12 cells of one held-out set</text>"), "%s", svg);
    cr_assert(strstr(svg, ">T cell, CD4</text>") > strstr(svg, ">B cell</text>") && strstr(svg, ">B cell</text>"),
              "the labels' legend, in alphabetical order");
    cr_assert_eq(count(svg, "fill=\"#0072B2\" fill-opacity"), 2 * 2 * 6, "one colour per label in every panel");
    free(svg);
    snprintf(path, sizeof path, "%s/report_placement.csv", sweep);
    char *csv = test_slurp(path);
    cr_assert_eq(count(csv, "\n") - 1, 2 * 12, "the drawn points");
    cr_assert(strstr(csv, "\nBaseline,Baseline-01,1,cell_0_0,\"T cell, CD4\",0,0,"), "%s", csv);
    free(csv);

    /* a damaged file is named and left out; the other config is still drawn */
    write_placement(sweep, &runs[4], "set;cell;label\n");
    md = report_md(sweep, NULL);
    cr_assert(strstr(md, "Gated-02/placement.csv: not the columns of placement.csv, or no cell; not drawn"), "%s", md);
    free(md);
    snprintf(path, sizeof path, "%s/report_placement.svg", sweep);
    svg = test_slurp(path);
    cr_assert_eq(count(svg, "class=\"cell\""), 2 * 12);
    free(svg);
}

/* Each run's whole config: what all share once, what is its own per run,
 * its data file, and its provenance.json's key/values as they are. */
Test(report, each_run_has_its_config_and_provenance)
{
    char *sweep = make_sweep(), path[512];
    snprintf(path, sizeof path, "%s/runs/%s/provenance.json", sweep, runs[3].id);
    write_file(path, "{\"alphast\": {\"version\": \"0.9.1\", \"commit\": \"abc123\"}, \"plugins\": {\"gated\": "
                     "\"fnv1a:00ff\"}, \"argv\": [\"train\", \"-q\"]}");
    char *md = report_md(sweep, NULL);
    const char *sec = strstr(md, "## Config and provenance");
    cr_assert(sec, "%s", md);
    cr_assert_str_eq(cell_after(md, "## Config and provenance", "training.epochs", 1), "2");
    cr_assert_str_eq(cell_after(md, "## Config and provenance", "ffn", 1), "dense");
    cr_assert_str_eq(cell_after(md, "## Config and provenance", "Gated-01", 3),
                     "seed.value=1, attention=gated, attention.gate_type=headwise, "
                     "monitors=[expert_load, grad_norm, time_conditioning]");
    cr_assert_str_eq(cell_after(md, "## Config and provenance", "Gated-01", 4),
                     "alphast.version=0.9.1, alphast.commit=abc123, plugins.gated=fnv1a:00ff, argv=[\"train\",\"-q\"]");
    cr_assert_str_eq(cell_after(md, "## Config and provenance", "Gated-02", 4), "no provenance.json");
    free(md);
    /* a provenance.json that is not JSON is no provenance, not a failure */
    write_file(path, "{\"alphast\": ");
    md = report_md(sweep, NULL);
    cr_assert_str_eq(cell_after(md, "## Config and provenance", "Gated-01", 4), "no provenance.json");
    free(md);
}

/* Runs best at their first epoch (the overfitting: 9 of 12) are
 * counted on top and per config in the verdict. */
Test(report, runs_best_at_their_first_epoch_are_counted)
{
    char *sweep = make_sweep(), path[512];
    for (int i = 3; i < 5; i++) { /* Gated seeds 1 and 2 */
        snprintf(path, sizeof path, "%s/runs/%s/summary.json", sweep, runs[i].id);
        write_file(path, "{\"steps\": 20, \"epochs\": 2, \"best_epoch\": 0, \"best_val_loss\": %g}\n", runs[i].val);
    }
    snprintf(path, sizeof path, "%s/runs/%s/summary.json", sweep, runs[5].id);
    write_file(path, "{\"steps\": 10, \"epochs\": 1, \"best_epoch\": 0, \"best_val_loss\": %g}\n", runs[5].val);
    char *md = report_md(sweep, NULL);
    cr_assert(strstr(md, "; 2 of 6 runs best at their first epoch"), "%s", md);
    cr_assert(strstr(md, "- 2 of 6 runs were best at their first epoch — the validation loss never went lower after "
                         "it, so they were evaluated with the first epoch's weights (the rings on the validation loss "
                         "plot): Baseline 0 of 3, Gated 2 of 3.\n"), "one epoch only is not counted: %s", md);
    free(md);
}

/* A set too large to draw is cut at 4,000 cells, and the figure says so. */
Test(report, a_huge_placement_is_cut_not_drawn_whole)
{
    char *sweep = make_sweep(), path[512];
    snprintf(path, sizeof path, "%s/runs/%s/placement.csv", sweep, runs[0].id);
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(placement_header, f);
    for (int i = 0; i < 5000; i++) fprintf(f, "0,c%d,,%d,0,0,%d,1,0\n", i, i, i);
    fclose(f);
    free(report_md(sweep, NULL));
    snprintf(path, sizeof path, "%s/report_placement.svg", sweep);
    char *svg = test_slurp(path);
    cr_assert_eq(count(svg, "class=\"cell\""), 2 * 4000);
    cr_assert(strstr(svg, ": 5000 cells of one held-out set, the first 4000 drawn</text>"));
    free(svg);
}

/* eval.json's "metrics" says which way each metric is better, and the
 * report takes its word over the name: knn_gap would be guessed "higher"
 * from its knn_ prefix. Without the object (an older eval.json) the old
 * rule stands. */
Test(report, reads_the_direction_from_eval_json)
{
    cJSON *eval = cJSON_Parse("{\"metrics\": {\"knn_gap\": {\"better\": \"lower\", \"label\": \"kNN gap\"},"
                              " \"graph_shift\": {\"better\": \"closer_to_truth\"}}, \"tasks\": {\"expr_to_pos\":"
                              " {\"model\": {\"positions\": {\"knn_gap\": 0.1, \"graph_shift\": 0.2}}}}}");
    rp_run run = {0};
    run.eval = rp_eval_tasks(eval, &run.metric_defs);
    cr_assert_not_null(run.metric_defs, "the metrics object is kept");
    rp_sweep s = {.runs = &run, .n_runs = 1}, older = {0};
    cr_assert_eq(rp_metric_direction(&s, "knn_gap"), -1, "eval.json says lower");
    cr_assert_eq(rp_metric_direction(&s, "expr_to_pos.model.knn_gap"), -1, "a dotted key by its last part");
    cr_assert_eq(rp_metric_direction(&s, "graph_shift"), 0, "closer to the truth ranks neither way");
    cr_assert_str_eq(rp_metric_label(&s, "knn_gap"), "kNN gap");
    cr_assert_eq(rp_metric_direction(&older, "knn_gap"), 1, "an older eval.json: guessed from the name");
    cr_assert_eq(rp_metric_direction(&s, "best_val_loss"), -1, "the training losses are the report's own");
    cJSON_Delete(run.eval);
    cJSON_Delete(run.metric_defs);
}
