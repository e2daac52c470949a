/* time_conditioning: how strongly does the diffusion time steer the model,
 * and does it change which experts the tokens choose?
 * - modulation_l2_norm: the mean over layers and sets of ||a_y|| = ||y_y(y)||
 *   (time.modulation_norm, published by the model), every `every` steps
 *   and per layer; epoch_modulation_l2_norm: its mean over the epoch's steps.
 * - Expert choice by diffusion time: each set's tokens routed to each expert
 *   (moe.set_tokens_per_expert) are counted in the bucket of the set's t
 *   (time.t): bucket q of `buckets` equal ones holds t in [q/Q, (q+1)/Q),
 *   t = 1 in the last. At each epoch's end, per layer, bucket and expert:
 *   t<q>.expert<e>.tokens and t<q>.expert<e>.share (of the bucket's tokens). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alphast/plugin_api.h"
#include "monitor_util.h"

enum { OPT_EVERY, OPT_BUCKETS };

static const ast_option_spec options[] = {
    [OPT_EVERY] = MON_EVERY_OPTION("10"),
    [OPT_BUCKETS] = {"buckets", AST_OPT_INT, "3", 1, 1000, NULL,
                     "equal diffusion-time buckets over [0, 1] for the expert choice (3: early, middle, late)"},
};

/* One layer's tokens per (bucket, expert) over the epoch so far. */
typedef struct layer_hist {
    int experts;
    double *tokens; /* [buckets * experts] */
} layer_hist;

typedef struct time_cond {
    int64_t every;
    int buckets;
    double norm_sum; /* of each step's mean modulation norm, this epoch */
    int64_t norm_steps;
    layer_hist *hist;
    int n_hist;
} time_cond;

static void *time_create(const ast_create_args *a, char *err, size_t errlen)
{
    time_cond *m = calloc(1, sizeof *m);
    AST_REQUIRE(m, err, errlen, "monitor 'time_conditioning': out of memory");
    m->every = a->opts[OPT_EVERY].i;
    m->buckets = (int)a->opts[OPT_BUCKETS].i;
    return m;
}

static void time_destroy(void *self)
{
    time_cond *m = self;
    for (int l = 0; l < m->n_hist; l++) free(m->hist[l].tokens);
    free(m->hist);
    free(m);
}

static int bucket_of(const time_cond *m, float t)
{
    int q = (int)(t * (float)m->buckets);
    return q < 0 ? 0 : q >= m->buckets ? m->buckets - 1 : q;
}

/* The layer's histogram for `experts` experts (emptied if that changed);
 * NULL when out of memory. */
static layer_hist *hist_of(time_cond *m, int layer, int experts)
{
    if (layer < 0 || !mon_grow((void **)&m->hist, &m->n_hist, layer + 1, sizeof *m->hist)) return NULL;
    layer_hist *h = &m->hist[layer];
    if (h->experts != experts) {
        free(h->tokens);
        h->tokens = calloc((size_t)m->buckets * (size_t)experts, sizeof *h->tokens);
        h->experts = h->tokens ? experts : 0;
    }
    return h->tokens ? h : NULL;
}

static void count_experts(time_cond *m, const ast_stat *s, const ast_stat *t)
{
    if (s->n % t->n) return;
    int experts = s->n / t->n;
    layer_hist *h = hist_of(m, s->layer, experts);
    if (!h) return;
    for (int b = 0; b < t->n; b++) {
        double *row = h->tokens + (size_t)bucket_of(m, t->values[b]) * (size_t)experts;
        for (int e = 0; e < experts; e++) row[e] += s->values[b * experts + e];
    }
}

static void observe_step(time_cond *m, const ast_observation *o)
{
    const ast_stat *t = mon_find(o, "time.t", -1);
    double norm = 0.0;
    int layers = 0, due = mon_due(o, m->every);
    for (int i = 0; i < o->n_stats; i++) {
        const ast_stat *s = &o->stats[i];
        if (!strcmp(s->name, "time.modulation_norm")) {
            if (due) ast_sink_emit(o->sink, "modulation_l2_norm", s->layer, mon_mean(s));
            norm += mon_mean(s), layers++;
        } else if (t && t->n > 0 && !strcmp(s->name, "moe.set_tokens_per_expert")) {
            count_experts(m, s, t);
        }
    }
    if (!layers) {
        ast_sink_warn_once(o->sink, "no_time", "no time.modulation_norm statistics to observe");
        return;
    }
    m->norm_sum += norm / layers, m->norm_steps++;
    if (due) ast_sink_emit(o->sink, "modulation_l2_norm", -1, norm / layers);
}

static void emit_hist(const time_cond *m, ast_sink *sink, int layer, const layer_hist *h)
{
    char name[64];
    for (int q = 0; q < m->buckets; q++) {
        const double *row = h->tokens + (size_t)q * (size_t)h->experts;
        double total = 0.0;
        for (int e = 0; e < h->experts; e++) total += row[e];
        for (int e = 0; e < h->experts; e++) {
            snprintf(name, sizeof name, "t%d.expert%d.tokens", q, e);
            ast_sink_emit(sink, name, layer, row[e]);
            snprintf(name, sizeof name, "t%d.expert%d.share", q, e);
            ast_sink_emit(sink, name, layer, total > 0.0 ? row[e] / total : 0.0);
        }
    }
}

/* Reports the epoch and starts the next one from zero. */
static void observe_epoch(time_cond *m, const ast_observation *o)
{
    if (m->norm_steps) ast_sink_emit(o->sink, "epoch_modulation_l2_norm", -1, m->norm_sum / (double)m->norm_steps);
    m->norm_sum = 0.0, m->norm_steps = 0;
    for (int l = 0; l < m->n_hist; l++) {
        layer_hist *h = &m->hist[l];
        if (!h->experts) continue;
        emit_hist(m, o->sink, l, h);
        memset(h->tokens, 0, (size_t)m->buckets * (size_t)h->experts * sizeof *h->tokens);
    }
}

static void time_observe(void *self, const ast_observation *o)
{
    if (o->phase == AST_PHASE_TRAIN_STEP) observe_step(self, o);
    else if (o->phase == AST_PHASE_EPOCH_END) observe_epoch(self, o);
}

AST_PLUGIN(AST_KIND_MONITOR, "time_conditioning", "1.0", "diffusion-time conditioning: L2 norm of each layer's time modulation, per step and epoch; expert choice per diffusion-time bucket",
           AST_OPTIONS(options), .create = time_create, .destroy = time_destroy, .observe = time_observe)
