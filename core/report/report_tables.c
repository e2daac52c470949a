/* The metric tables of one group — the training losses, or one task of
 * the evaluation: the values of every config and baseline, then each
 * config's difference from the reference config with its bootstrap
 * interval, Welch and Holm p-values and MDD; and per task the measured
 * uncertainty of the samples and the primary metric by sampler step count. */
#include <math.h>
#include <string.h>

#include "report_internal.h"

static int n_keys(const rp_task *t) { return t ? t->keys.n : RP_N_LOSS_KEYS; }
static const char *key_at(const rp_task *t, int k) { return t ? t->keys.v[k] : rp_loss_keys[k]; }

static const char *direction_word(const rp_sweep *s, const char *key)
{
    int dir = rp_metric_direction(s, key);
    return dir > 0 ? "higher" : dir < 0 ? "lower" : "";
}

/* Whether config c is among those of held-out protocol p (-1: all). */
static int shown(const rp_sweep *s, int c, int p) { return p < 0 || s->configs[c].protocol == p; }

static void values_row(rp_table *tb, const rp_sweep *s, const rp_task *t, const char *key, int p)
{
    char path[600], buf[96];
    rp_source src = rp_metric_at(t, "model", key, path, sizeof path);
    rp_table_cell(tb, "%s", rp_metric_label(s, key));
    rp_table_cell(tb, "%s", direction_word(s, key));
    for (int c = 0; c < s->n_configs; c++) /* the reference first */
        if (shown(s, c, p) && c == s->reference) rp_table_cell(tb, "%s", rp_fmt_stat(rp_stat_of(s, c, src, path), buf, sizeof buf));
    for (int c = 0; c < s->n_configs; c++)
        if (shown(s, c, p) && c != s->reference) rp_table_cell(tb, "%s", rp_fmt_stat(rp_stat_of(s, c, src, path), buf, sizeof buf));
    for (int b = 0; t && b < t->baselines.n; b++) {
        rp_metric_at(t, t->baselines.v[b], key, path, sizeof path);
        rp_stat st = rp_stat_all(s, p, RP_EVAL, path);
        st.n = st.n ? 1 : 0; /* the mean over runs: the same cells in each, so no spread to show */
        rp_table_cell(tb, "%s", rp_fmt_stat(st, buf, sizeof buf));
    }
}

/* The values of the configs of held-out protocol p (-1: all) beside the
 * baselines scored on the cells it held out. */
static void values_table(rp_doc *d, const rp_sweep *s, const rp_task *t, int p)
{
    int n_base = t ? t->baselines.n : 0, n_shown = 0;
    for (int c = 0; c < s->n_configs; c++) n_shown += shown(s, c, p);
    rp_table tb;
    rp_table_init(&tb, 2 + n_shown + n_base);
    rp_table_cell(&tb, "metric"), rp_table_cell(&tb, "better");
    if (shown(s, s->reference, p)) rp_table_cell(&tb, "%s (reference)", s->configs[s->reference].name);
    for (int c = 0; c < s->n_configs; c++)
        if (shown(s, c, p) && c != s->reference) rp_table_cell(&tb, "%s", s->configs[c].name);
    for (int b = 0; b < n_base; b++) rp_table_cell(&tb, "%s (baseline)", t->baselines.v[b]);
    for (int k = 0; k < n_keys(t); k++) values_row(&tb, s, t, key_at(t, k), p);
    rp_doc_table(d, &tb);
    rp_table_free(&tb);
}

static void difference_row(rp_table *tb, const rp_sweep *s, const rp_cmp *c)
{
    char diff[48], ci[96], p[32], holm[48];
    int dec = rp_cmp_decimals(c);
    rp_fmt_pnum(c->p_holm, holm, sizeof holm);
    if (rp_survives(c)) strcat(holm, " (survives)");
    rp_table_cell(tb, "%s", rp_metric_label(s, c->metric));
    rp_table_cell(tb, "%s", s->configs[c->config].name);
    rp_table_cell(tb, "%s", rp_fmt_diff(c->diff, dec, diff, sizeof diff));
    rp_table_cell(tb, "%s", rp_fmt_ci(c->lo, c->hi, dec, ci, sizeof ci));
    rp_table_cell(tb, "%s", rp_fmt_pnum(c->p, p, sizeof p));
    rp_table_cell(tb, "%s", holm);
    if (isnan(c->mdd)) rp_table_cell(tb, "n/a");
    else rp_table_cell(tb, "%.*f", dec, c->mdd);
}

static void differences_table(rp_doc *d, const rp_sweep *s, const rp_task *t)
{
    char path[600];
    rp_table tb;
    rp_table_init(&tb, 7);
    rp_table_cell(&tb, "metric"), rp_table_cell(&tb, "config");
    rp_table_cell(&tb, "difference from %s", s->configs[s->reference].name);
    rp_table_cell(&tb, "95%% bootstrap CI"), rp_table_cell(&tb, "p (Welch)");
    rp_table_cell(&tb, "p (Holm, %d tests)", s->family.tests), rp_table_cell(&tb, "MDD");
    int rows = 0;
    for (int k = 0; k < n_keys(t); k++) {
        rp_source src = rp_metric_at(t, "model", key_at(t, k), path, sizeof path);
        for (int c = 0; c < s->n_configs; c++) {
            const rp_cmp *cmp = c == s->reference ? NULL : rp_family_find(s, c, src, path);
            if (!cmp || !cmp->a.n || !cmp->ref.n) continue;
            difference_row(&tb, s, cmp);
            rows++;
        }
    }
    if (rows) rp_doc_table(d, &tb);
    rp_table_free(&tb);
}

void rp_metric_tables(rp_doc *d, const rp_sweep *s, const rp_task *t)
{
    if (!t || s->protocols.n < 2) values_table(d, s, t, -1);
    for (int p = 0; t && s->protocols.n >= 2 && p < s->protocols.n; p++) {
        rp_doc_para(d, "Held out by %s:", s->protocols.v[p]);
        values_table(d, s, t, p);
    }
    if (s->n_configs > 1) differences_table(d, s, t);
}

int rp_judged_runs(const rp_sweep *s, int config, const char *task, const char *judgement, int *runs)
{
    char path[600];
    snprintf(path, sizeof path, "%s.uncertainty.%s", task, judgement);
    rp_stat flag = rp_stat_of(s, config, RP_EVAL, path); /* 0/1 per run: mean * n counts them */
    *runs = flag.n;
    return flag.n ? (int)lround(flag.mean * flag.n) : 0;
}

static void uncertainty_table(rp_doc *d, const rp_sweep *s, const rp_task *t)
{
    static const char *const cols[] = {"spread_skill", "coverage", "coverage_nominal", "energy_score", "skill"};
    char path[600], buf[96];
    rp_table tb;
    rp_table_init(&tb, 8);
    rp_table_cell(&tb, "config"), rp_table_cell(&tb, "samples"), rp_table_cell(&tb, "spread/skill");
    rp_table_cell(&tb, "coverage"), rp_table_cell(&tb, "calibrated coverage"), rp_table_cell(&tb, "energy score");
    rp_table_cell(&tb, "skill"), rp_table_cell(&tb, "miscalibrated");
    for (int c = 0; c < s->n_configs; c++) {
        snprintf(path, sizeof path, "%s.uncertainty.samples", t->name);
        rp_stat samples = rp_stat_of(s, c, RP_EVAL, path);
        if (!samples.n) continue;
        rp_table_cell(&tb, "%s", s->configs[c].name);
        rp_table_cell(&tb, "%.0f", samples.mean);
        for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
            snprintf(path, sizeof path, "%s.uncertainty.%s", t->name, cols[i]);
            rp_table_cell(&tb, "%s", rp_fmt_stat(rp_stat_of(s, c, RP_EVAL, path), buf, sizeof buf));
        }
        int runs, over = rp_judged_runs(s, c, t->name, "overconfident", &runs);
        int under = rp_judged_runs(s, c, t->name, "underconfident", &runs);
        rp_table_cell(&tb, "overconfident in %d, underconfident in %d of %d runs", over, under, runs);
    }
    rp_doc_para(d, "Uncertainty (docs/evaluation.md), mean ± sd over training seeds, from placements of the same "
                   "cells by several noise seeds: spread/skill is the samples' spread about their mean over the error "
                   "of that mean (1: the spread says how wrong a placement is; above 2 underconfident); coverage, "
                   "the fraction of cells whose true position lies within the samples' reach, beside what a "
                   "calibrated sampler gets (overconfident: spread/skill below 0.5 or coverage below half that); the energy score of the distance vectors (lower is "
                   "better) and skill (the mean's error) in the length unit.");
    rp_doc_table(d, &tb);
    rp_table_free(&tb);
}

static void steps_table(rp_doc *d, const rp_sweep *s, const rp_task *t)
{
    char path[600], buf[96];
    rp_table tb;
    rp_table_init(&tb, 1 + t->steps.n);
    rp_table_cell(&tb, "config");
    for (int i = 0; i < t->steps.n; i++)
        rp_table_cell(&tb, "%s step%s", t->steps.v[i], strcmp(t->steps.v[i], "1") ? "s" : "");
    for (int c = 0; c < s->n_configs; c++) {
        rp_table_cell(&tb, "%s", s->configs[c].name);
        for (int i = 0; i < t->steps.n; i++) {
            snprintf(path, sizeof path, "%s.by_steps.%s.%s", t->name, t->steps.v[i], t->primary);
            rp_table_cell(&tb, "%s", rp_fmt_stat(rp_stat_of(s, c, RP_EVAL, path), buf, sizeof buf));
        }
    }
    rp_doc_para(d, "%s by the sampler's step count (mean ± sd over seeds): whether more steps help, or the "
                   "model's answer comes from its first step.", t->primary);
    rp_doc_table(d, &tb);
    rp_table_free(&tb);
}

void rp_sampler_tables(rp_doc *d, const rp_sweep *s, const rp_task *t)
{
    if (t->uncertainty) uncertainty_table(d, s, t);
    if (t->steps.n && t->primary) steps_table(d, s, t);
}
