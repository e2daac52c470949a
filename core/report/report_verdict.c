/* The verdict: sentences built from the numbers of the tables — where the
 * configs stand against the baselines, which differences from the
 * reference config survive Holm's correction over every test the report
 * makes (and, when none does, what could have been seen: the MDD), the
 * lowest validation loss, what the configs cost, overconfident samplers, the
 * monitor warnings that fired and the runs left out. A raw p below 0.05
 * alone is never a claim: with tens of tests, chance supplies a few. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "report_internal.h"

typedef struct sentence {
    char text[4096];
    size_t used;
} sentence;

static void say(sentence *s, const char *fmt, ...) AST_PRINTF(2, 3);
static void say(sentence *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(s->text + s->used, sizeof s->text - s->used, fmt, ap);
    va_end(ap);
    if (w > 0) s->used = s->used + (size_t)w < sizeof s->text ? s->used + (size_t)w : sizeof s->text - 1;
}

/* "better"/"worse" where the metric has a direction, else "higher"/"lower". */
static const char *change_word(const rp_sweep *s, const rp_cmp *c)
{
    int dir = rp_metric_direction(s, c->metric);
    if (!dir) return c->diff > 0 ? "higher" : "lower";
    return dir * c->diff > 0 ? "better" : "worse";
}

/* "better knn_k10 on expr_to_pos (+0.030, 95% CI [..], p = 0.001, Holm p = 0.03)" */
static void say_difference(sentence *t, const rp_sweep *s, const rp_cmp *c)
{
    char diff[48], ci[96], p[32], holm[32];
    int dec = rp_cmp_decimals(c);
    rp_fmt_diff(c->diff, dec, diff, sizeof diff);
    rp_fmt_ci(c->lo, c->hi, dec, ci, sizeof ci);
    say(t, "%s %s%s%s (%s, 95%% CI %s, %s, Holm %s)", change_word(s, c), rp_metric_label(s, c->metric), c->task ? " on " : "",
        c->task ? c->task->name : "", diff, ci, rp_fmt_p(c->p, p, sizeof p), rp_fmt_p(c->p_holm, holm, sizeof holm));
}

/* Per config, the differences that survive; then how many raw ones did not. */
static void holm_sentences(const rp_sweep *s, ast_strlist *out)
{
    const rp_family *f = &s->family;
    const char *ref = s->configs[s->reference].name;
    int survivors = 0, raw_only = 0;
    if (s->n_configs < 2) return; /* nothing to compare */
    for (int c = 0; c < s->n_configs; c++) {
        sentence t = {0};
        int n = 0;
        for (int i = 0; i < f->n; i++) {
            if (f->v[i].config != c || !rp_survives(&f->v[i])) continue;
            say(&t, "%s", n++ ? "; " : "");
            say_difference(&t, s, &f->v[i]);
        }
        if (!n) continue;
        char text[4300];
        snprintf(text, sizeof text, "%s vs the reference config %s, surviving Holm's correction over %d tests: %s.",
                 s->configs[c].name, ref, f->tests, t.text);
        ast_strlist_push(out, text);
        survivors += n;
    }
    for (int i = 0; i < f->n; i++) raw_only += f->v[i].p < RP_ALPHA && !rp_survives(&f->v[i]);
    sentence t = {0};
    if (!f->tests)
        say(&t, "No difference from the reference config %s could be tested: that takes 2 finished seeds a side.", ref);
    else if (!survivors)
        say(&t, "No difference from the reference config %s survives Holm's correction over the %d tests of this "
                "report (family-wise %.2g).", ref, f->tests, RP_ALPHA);
    if (raw_only)
        say(&t, "%s%d %s p < %.2g before the correction but not after, and %s not claimed: over %d tests chance "
                "alone gives about %.1f such.", t.used ? " " : "", raw_only,
            raw_only == 1 ? "difference has" : "differences have", RP_ALPHA, raw_only == 1 ? "is" : "are", f->tests,
            f->tests * RP_ALPHA);
    if (t.used) ast_strlist_push(out, t.text);
}

/* What could have been seen: the MDD of each config on the first primary
 * metric (the best validation loss when no task has one). */
static void mdd_sentence(const rp_sweep *s, ast_strlist *out)
{
    char path[600], val[48];
    const rp_task *task = NULL;
    for (int t = 0; t < s->n_tasks && !task; t++)
        if (s->tasks[t].primary) task = &s->tasks[t];
    const char *metric = task ? task->primary : "best_val_loss";
    rp_source src = rp_metric_at(task, "model", metric, path, sizeof path);
    sentence t = {0};
    int n = 0;
    for (int c = 0; c < s->n_configs; c++) {
        const rp_cmp *cmp = c == s->reference ? NULL : rp_family_find(s, c, src, path);
        if (!cmp || isnan(cmp->mdd)) continue;
        snprintf(val, sizeof val, "%.*f", rp_cmp_decimals(cmp), cmp->mdd);
        say(&t, "%s%s %s (%d vs %d seeds)", n++ ? ", " : "", s->configs[c].name, val, cmp->a.n, cmp->ref.n);
    }
    if (!n) return;
    char text[4400];
    snprintf(text, sizeof text, "What these seeds can show: one test at %.2g finds a difference in %s%s%s from the "
             "reference config %s with %.0f%% power only if it is at least the MDD: %s; under Holm's correction it must "
             "be larger still.", RP_ALPHA, rp_metric_label(s, metric), task ? " on " : "", task ? task->name : "",
             s->configs[s->reference].name, 100 * RP_POWER, t.text);
    ast_strlist_push(out, text);
}

static void loss_sentence(const rp_sweep *s, int best, ast_strlist *out)
{
    sentence t = {0};
    char a[96];
    rp_stat st = rp_stat_of(s, best, RP_SUMMARY, "best_val_loss");
    say(&t, "%s has the lowest mean validation loss (%s, %d seed%s)", s->configs[best].name,
        rp_fmt_stat(st, a, sizeof a), st.n, st.n == 1 ? "" : "s");
    const rp_cmp *c = best == s->reference ? NULL : rp_family_find(s, best, RP_SUMMARY, "best_val_loss");
    if (c && rp_survives(c)) say(&t, "; it is lower than the reference config's, and that survives Holm's correction");
    else if (c && !isnan(c->p)) say(&t, "; that it is lower than the reference config's is not shown");
    say(&t, ".");
    ast_strlist_push(out, t.text);
}

/* Whether run r trained past its first epoch and was best at it (summary.json's best_epoch is 0-based). */
static int best_at_first_epoch(const rp_run *r)
{
    return r->usable && rp_json_number(r->summary, "best_epoch") == 0 && rp_json_number(r->summary, "epochs") > 1;
}

static int runs_best_at_first_epoch(const rp_sweep *s, int *of)
{
    int n = 0;
    *of = 0;
    for (int i = 0; i < s->n_runs; i++) *of += s->runs[i].usable, n += best_at_first_epoch(&s->runs[i]);
    return n;
}

/* Runs whose validation loss never went below its first epoch's: the
 * weights evaluated are those of epoch 1, which a band of means hides. */
static void first_epoch_sentence(const rp_sweep *s, ast_strlist *out)
{
    int of, n = runs_best_at_first_epoch(s, &of);
    if (!n) return;
    sentence t = {0};
    say(&t, "%d of %d runs were best at their first epoch — the validation loss never went lower after it, so they "
            "were evaluated with the first epoch's weights (the rings on the validation loss plot):", n, of);
    for (int c = 0, k = 0; c < s->n_configs; c++) {
        int m = 0;
        for (int i = 0; i < s->configs[c].n_runs; i++) m += best_at_first_epoch(&s->runs[s->configs[c].runs[i]]);
        say(&t, "%s %s %d of %d", k++ ? "," : "", s->configs[c].name, m, s->configs[c].n_runs);
    }
    say(&t, ".");
    ast_strlist_push(out, t.text);
}

static void cost_sentence(const rp_sweep *s, int c, ast_strlist *out)
{
    const char *keys[3] = {"parameters", "active_parameters", "step_ms"};
    double ratio[3];
    for (int i = 0; i < 3; i++)
        ratio[i] = rp_stat_of(s, c, RP_SUMMARY, keys[i]).mean / rp_stat_of(s, s->reference, RP_SUMMARY, keys[i]).mean;
    if (!isfinite(ratio[0]) || !isfinite(ratio[2])) return;
    char buf[512];
    snprintf(buf, sizeof buf, "%s has %.2f× the parameters of %s (%.2f× active per token) and %.2f× its step time.",
             s->configs[c].name, ratio[0], s->configs[s->reference].name, ratio[1], ratio[2]);
    ast_strlist_push(out, buf);
}

/* Per task and config with runs whose spread/skill ratio is out of the
 * calibrated band: how many, and what the measures say (means over the
 * config's runs). The skill is given too: a near-exact model whose samples
 * agree is overconfident and still accurate. */
static void uncertainty_sentences(const rp_sweep *s, ast_strlist *out)
{
    char path[600], buf[700];
    for (int t = 0; t < s->n_tasks; t++) {
        if (!s->tasks[t].uncertainty) continue;
        for (int c = 0; c < s->n_configs; c++) {
            int runs, over = rp_judged_runs(s, c, s->tasks[t].name, "overconfident", &runs);
            if (!over) continue;
            snprintf(path, sizeof path, "%s.uncertainty.spread_skill", s->tasks[t].name);
            rp_stat ratio = rp_stat_of(s, c, RP_EVAL, path);
            snprintf(path, sizeof path, "%s.uncertainty.coverage", s->tasks[t].name);
            rp_stat cover = rp_stat_of(s, c, RP_EVAL, path);
            snprintf(path, sizeof path, "%s.uncertainty.coverage_nominal", s->tasks[t].name);
            rp_stat nominal = rp_stat_of(s, c, RP_EVAL, path);
            snprintf(path, sizeof path, "%s.uncertainty.skill", s->tasks[t].name);
            rp_stat skill = rp_stat_of(s, c, RP_EVAL, path);
            snprintf(buf, sizeof buf, "Warning, %s: %s's samples are overconfident in %d of %d runs — spread/skill "
                     "%.3g (1 is calibrated) and coverage %.2f where a calibrated sampler covers %.2f: the samples "
                     "agree more than they are right (placement error %.3g in the length unit), so their spread does "
                     "not say how wrong a placement is.", s->tasks[t].name, s->configs[c].name, over, runs, ratio.mean,
                     cover.mean, nominal.mean, skill.mean);
            ast_strlist_push(out, buf);
        }
    }
}

static void warning_sentences(const rp_sweep *s, ast_strlist *out)
{
    int fired = 0, flags = 0;
    char buf[512];
    for (int m = 0; m < s->monitors.n; m++) {
        flags += rp_is_warning_flag(s->monitors.v[m]);
        for (int c = 0; c < s->n_configs; c++) {
            rp_warning w;
            if (!rp_warning_of(s, c, s->monitors.v[m], &w)) continue;
            snprintf(buf, sizeof buf, "Monitor warning, %s: %s in %d of %d seeds, first at step %.0f.",
                     s->configs[c].name, w.text, w.seeds, w.of, w.first);
            ast_strlist_push(out, buf);
            fired++;
        }
    }
    if (!fired && flags) ast_strlist_push(out, "No monitor warning fired.");
}

static void left_out_sentence(const rp_sweep *s, ast_strlist *out)
{
    sentence t = {0};
    int n = 0;
    for (int i = 0; i < s->n_runs; i++)
        if (!s->runs[i].usable) say(&t, "%s%s (%s)", n++ ? ", " : "", s->runs[i].id, s->runs[i].state);
    if (!n) return;
    char buf[4300];
    snprintf(buf, sizeof buf, "Left out: %d of %d runs, %s; see Runs left out.", n, s->n_runs, t.text);
    ast_strlist_push(out, buf);
}

/* The standing on the first task's primary metric, without its full stop. */
static void headline_standing(sentence *t, const rp_sweep *s)
{
    char text[1024];
    for (int i = 0; i < s->n_tasks; i++)
        if (s->tasks[i].primary && rp_standing_of(s, &s->tasks[i], s->tasks[i].primary, text, sizeof text)) {
            size_t n = strlen(text);
            say(t, "%.*s", (int)(n && text[n - 1] == '.' ? n - 1 : n), text);
            return;
        }
    say(t, "no run has an evaluation with a primary metric");
}

/* Which configs differ from the reference in some comparison that survives Holm. */
static void headline_holm(sentence *t, const rp_sweep *s)
{
    const char *ref = s->configs[s->reference].name;
    int n = 0;
    if (s->n_configs < 2) return;
    if (!s->family.tests) {
        say(t, "; no difference from the reference config %s could be tested (2 seeds a side needed)", ref);
        return;
    }
    for (int c = 0; c < s->n_configs; c++)
        for (int i = 0; i < s->family.n; i++)
            if (s->family.v[i].config == c && rp_survives(&s->family.v[i])) {
                say(t, "%s%s", n++ ? ", " : "; ", s->configs[c].name);
                break;
            }
    if (n)
        say(t, " %s from the reference config %s after Holm's correction over %d tests", n == 1 ? "differs" : "differ",
            ref, s->family.tests);
    else
        say(t, "; no config differs from the reference config %s after Holm's correction over %d tests", ref,
            s->family.tests);
}

/* The warnings the verdict's list gives, counted, so that none goes unseen below. */
static void headline_warnings(sentence *t, const rp_sweep *s)
{
    ast_strlist w = {0};
    uncertainty_sentences(s, &w);
    int overconfident = w.n, fired = 0, left_out = 0;
    for (int m = 0; m < s->monitors.n; m++)
        for (int c = 0; c < s->n_configs; c++) {
            rp_warning one;
            fired += rp_warning_of(s, c, s->monitors.v[m], &one);
        }
    for (int i = 0; i < s->n_runs; i++) left_out += !s->runs[i].usable;
    ast_strlist_free(&w);
    int of, first = runs_best_at_first_epoch(s, &of);
    if (overconfident)
        say(t, "; WARNING: the samples of %d config%s are overconfident (their spread is far below their error)",
            overconfident, overconfident == 1 ? "" : "s");
    if (first) say(t, "; %d of %d runs best at their first epoch", first, of);
    if (fired) say(t, "; %d monitor warning%s fired", fired, fired == 1 ? "" : "s");
    if (left_out) say(t, "; %d run%s left out", left_out, left_out == 1 ? "" : "s");
}

void rp_headline(const rp_sweep *s, char *text, size_t n)
{
    sentence t = {0};
    headline_standing(&t, s);
    headline_holm(&t, s);
    headline_warnings(&t, s);
    snprintf(text, n, "%s.", t.text);
}

void rp_verdict(const rp_sweep *s, ast_strlist *out)
{
    rp_standing(s, out);
    uncertainty_sentences(s, out); /* right after the standing: samples whose spread misleads qualify it */
    holm_sentences(s, out);
    mdd_sentence(s, out);
    int best = rp_best_config(s, RP_SUMMARY, "best_val_loss");
    if (best < 0) ast_strlist_push(out, "No run finished with a validation loss.");
    else loss_sentence(s, best, out);
    first_epoch_sentence(s, out);
    for (int c = 0; c < s->n_configs; c++)
        if (c != s->reference) cost_sentence(s, c, out);
    warning_sentences(s, out);
    left_out_sentence(s, out);
}
