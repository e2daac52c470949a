/* The verdict: sentences built from the numbers of the tables — the best
 * config by mean validation loss, which differences from the baseline are
 * significant (Welch p < 0.05), what the configs cost, how the model
 * compares with random coordinates, the monitor warnings that fired and
 * the runs left out. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "report_internal.h"

#define ALPHA 0.05

typedef struct sentence {
    char text[2048];
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

static int best_config(const rp_sweep *s)
{
    int best = -1;
    double best_mean = INFINITY;
    for (int c = 0; c < s->n_configs; c++) {
        rp_stat st = rp_stat_of(s, c, RP_SUMMARY, "best_val_loss");
        if (st.n && st.mean < best_mean) best = c, best_mean = st.mean;
    }
    return best;
}

static void best_sentence(const rp_sweep *s, int best, ast_strlist *out)
{
    sentence t = {0};
    char a[64], b[64], c[64];
    const char *base = s->configs[s->baseline].name;
    rp_cmp cmp = rp_compare(s, best, RP_SUMMARY, "best_val_loss");
    say(&t, "%s has the lowest validation loss (%s", s->configs[best].name, rp_fmt_stat(cmp.a, a, sizeof a));
    if (best != s->baseline)
        say(&t, ", %s vs %s, %s", rp_fmt_pct(cmp.change_pct, b, sizeof b), base, rp_fmt_p(cmp.p, c, sizeof c));
    say(&t, ", %d seed%s)", cmp.a.n, cmp.a.n == 1 ? "" : "s");
    if (best != s->baseline && !isnan(cmp.p))
        say(&t, cmp.p < ALPHA ? "; the difference is significant at p < 0.05" : "; the difference is not significant at p < 0.05");
    say(&t, ".");
    ast_strlist_push(out, t.text);
}

/* One config against the baseline on validation loss and every eval metric. */
static void difference_sentence(const rp_sweep *s, int c, ast_strlist *out)
{
    sentence sig = {0}, same = {0};
    char pct[32], p[32];
    int n_sig = 0, n_same = 0;
    for (int k = -1; k < s->eval_keys.n; k++) {
        rp_source src = k < 0 ? RP_SUMMARY : RP_EVAL;
        const char *key = k < 0 ? "best_val_loss" : s->eval_keys.v[k];
        rp_cmp cmp = rp_compare(s, c, src, key);
        if (isnan(cmp.p)) continue;
        if (cmp.p < ALPHA)
            say(&sig, "%s%s %s (%s, %s)", n_sig++ ? ", " : "", cmp.change_pct < 0 ? "lower" : "higher",
                rp_metric_label(key), rp_fmt_pct(cmp.change_pct, pct, sizeof pct), rp_fmt_p(cmp.p, p, sizeof p));
        else
            say(&same, "%s%s (%s)", n_same++ ? ", " : "", rp_metric_label(key), rp_fmt_p(cmp.p, p, sizeof p));
    }
    sentence t = {0};
    say(&t, "%s vs %s: ", s->configs[c].name, s->configs[s->baseline].name);
    if (!n_sig && !n_same) say(&t, "too few finished seeds for a test (2 per config needed)");
    if (n_sig) say(&t, "significantly %s", sig.text);
    if (n_same) say(&t, "%snot distinguishable (p >= 0.05): %s", n_sig ? "; " : "", same.text);
    say(&t, ".");
    ast_strlist_push(out, t.text);
}

static void cost_sentence(const rp_sweep *s, int c, ast_strlist *out)
{
    const char *keys[3] = {"parameters", "active_parameters", "step_ms"};
    double ratio[3];
    for (int i = 0; i < 3; i++)
        ratio[i] = rp_stat_of(s, c, RP_SUMMARY, keys[i]).mean / rp_stat_of(s, s->baseline, RP_SUMMARY, keys[i]).mean;
    if (!isfinite(ratio[0]) || !isfinite(ratio[2])) return;
    char buf[512];
    snprintf(buf, sizeof buf, "%s has %.2f× the parameters of %s (%.2f× active per token) and %.2f× its step time.",
             s->configs[c].name, ratio[0], s->configs[s->baseline].name, ratio[1], ratio[2]);
    ast_strlist_push(out, buf);
}

static void random_sentence(const rp_sweep *s, int c, ast_strlist *out)
{
    sentence t = {0};
    char a[64], b[64];
    int n = 0;
    for (int k = 0; k < s->eval_keys.n; k++) {
        rp_stat model = rp_stat_of(s, c, RP_EVAL, s->eval_keys.v[k]);
        rp_stat rnd = rp_stat_of(s, c, RP_EVAL_RANDOM, s->eval_keys.v[k]);
        if (!model.n || !rnd.n) continue;
        model.n = rnd.n = 1; /* means only: the sentence is a sanity check */
        say(&t, "%s%s %s vs %s", n++ ? ", " : "", rp_metric_label(s->eval_keys.v[k]), rp_fmt_stat(model, a, sizeof a),
            rp_fmt_stat(rnd, b, sizeof b));
    }
    if (!n) return;
    char buf[2300];
    snprintf(buf, sizeof buf, "%s's sampled coordinates against random ones: %s.", s->configs[c].name, t.text);
    ast_strlist_push(out, buf);
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
    char buf[2300];
    snprintf(buf, sizeof buf, "Left out: %d of %d runs, %s; see Runs left out.", n, s->n_runs, t.text);
    ast_strlist_push(out, buf);
}

void rp_verdict(const rp_sweep *s, ast_strlist *out)
{
    int best = best_config(s);
    if (best < 0) {
        ast_strlist_push(out, "No run finished with a validation loss, so there is nothing to compare yet.");
    } else {
        best_sentence(s, best, out);
        for (int c = 0; c < s->n_configs; c++)
            if (c != s->baseline) difference_sentence(s, c, out);
        for (int c = 0; c < s->n_configs; c++)
            if (c != s->baseline) cost_sentence(s, c, out);
        random_sentence(s, best, out);
    }
    warning_sentences(s, out);
    left_out_sentence(s, out);
}
