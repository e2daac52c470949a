/* The family of tests the report makes: every config but the reference
 * config against it, on each training loss and each task's metrics. Per
 * comparison the difference of means with its bootstrap interval, Welch's
 * p and the minimum detectable difference; then Holm's correction over
 * all of them at once, so that what "survives" keeps the chance of any
 * false claim in the whole report at RP_ALPHA. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/stats.h"
#include "report_internal.h"

/* Fixed, so the same sweep always gives the same intervals. */
#define BOOTSTRAP_SEED 1u

const char *const rp_loss_keys[RP_N_LOSS_KEYS] = {"best_val_loss", "last_val_loss", "last_train_loss"};

void rp_diff_ci(const double *a, int na, const double *b, int nb, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (na >= 2 && nb >= 1) ast_bootstrap_diff_ci(a, na, b, nb, RP_RESAMPLES, 0.95, BOOTSTRAP_SEED, lo, hi);
}

static void compare(rp_cmp *c, const rp_sweep *s)
{
    double *a = ast_xmalloc((size_t)(s->configs[c->config].n_runs + 1) * sizeof *a);
    double *b = ast_xmalloc((size_t)(s->configs[s->reference].n_runs + 1) * sizeof *b);
    int na = rp_values(s, c->config, c->src, c->key, a), nb = rp_values(s, s->reference, c->src, c->key, b);
    c->a = rp_stat_values(a, na), c->ref = rp_stat_values(b, nb);
    c->diff = c->a.mean - c->ref.mean;
    c->lo = c->hi = c->p = c->p_holm = c->mdd = NAN;
    ast_welch w;
    if (ast_welch_test(a, na, b, nb, &w) == 0) { /* 2 seeds a side: the interval needs them too */
        c->p = w.p;
        c->mdd = ast_mdd(c->a.sd, na, c->ref.sd, nb, RP_ALPHA, RP_POWER);
        rp_diff_ci(a, na, b, nb, &c->lo, &c->hi);
    }
    free(a), free(b);
}

static void add(rp_sweep *s, int config, const rp_task *t, const char *metric)
{
    char path[600];
    rp_family *f = &s->family;
    f->v = ast_xrealloc(f->v, (size_t)(f->n + 1) * sizeof *f->v);
    rp_cmp *c = &f->v[f->n++];
    *c = (rp_cmp){.config = config, .metric = metric, .task = t};
    c->src = rp_metric_at(t, "model", metric, path, sizeof path);
    c->key = ast_xstrdup(path);
    compare(c, s);
}

void rp_family_make(rp_sweep *s)
{
    rp_family *f = &s->family;
    for (int c = 0; c < s->n_configs; c++) {
        if (c == s->reference) continue;
        for (int k = 0; k < RP_N_LOSS_KEYS; k++) add(s, c, NULL, rp_loss_keys[k]);
        for (int t = 0; t < s->n_tasks; t++)
            for (int k = 0; k < s->tasks[t].keys.n; k++) add(s, c, &s->tasks[t], s->tasks[t].keys.v[k]);
    }
    double *p = ast_xmalloc((size_t)(f->n + 1) * sizeof *p), *adj = ast_xmalloc((size_t)(f->n + 1) * sizeof *adj);
    for (int i = 0; i < f->n; i++) p[i] = f->v[i].p;
    f->tests = ast_holm(p, f->n, adj);
    for (int i = 0; i < f->n; i++) f->v[i].p_holm = adj[i];
    free(p), free(adj);
}

void rp_family_free(rp_family *f)
{
    for (int i = 0; i < f->n; i++) free(f->v[i].key);
    free(f->v);
    memset(f, 0, sizeof *f);
}

const rp_cmp *rp_family_find(const rp_sweep *s, int config, rp_source src, const char *key)
{
    for (int i = 0; i < s->family.n; i++) {
        const rp_cmp *c = &s->family.v[i];
        if (c->config == config && c->src == src && !strcmp(c->key, key)) return c;
    }
    return NULL;
}

int rp_survives(const rp_cmp *c) { return c->p_holm < RP_ALPHA; /* false for NaN */ }

int rp_cmp_decimals(const rp_cmp *c)
{
    int a = rp_decimals(c->a), ref = rp_decimals(c->ref);
    return a > ref ? a : ref;
}
