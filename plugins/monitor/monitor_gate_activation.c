/* gate_activation: is the gated attention's sigmoid output gate selecting?
 * Reports, per layer and as the mean over layers, the mean and std of the
 * gate factors (attn.gate_mean / attn.gate_std, published by attn_gated
 * over the valid cells). A mean above max_mean means the gates pass almost
 * everything: "gates not filtering", warned once per run. */
#include <stdlib.h>
#include <string.h>

#include "alphast/plugin_api.h"
#include "monitor_util.h"

enum { OPT_EVERY, OPT_MAX_MEAN };

static const ast_option_spec options[] = {
    [OPT_EVERY] = MON_EVERY_OPTION("10"),
    [OPT_MAX_MEAN] = {"max_mean", AST_OPT_FLOAT, "0.95", 0, 1, NULL,
                      "warn when the mean gate activation exceeds this (the gates stop filtering)"},
};

typedef struct gate_activation {
    int64_t every;
    double max_mean;
} gate_activation;

static void *gate_create(const ast_create_args *a, char *err, size_t errlen)
{
    gate_activation *m = calloc(1, sizeof *m);
    AST_REQUIRE(m, err, errlen, "monitor 'gate_activation': out of memory");
    m->every = a->opts[OPT_EVERY].i;
    m->max_mean = a->opts[OPT_MAX_MEAN].f;
    return m;
}

static void gate_observe(void *self, const ast_observation *o)
{
    const gate_activation *m = self;
    if (!mon_due(o, m->every)) return;
    double mean = 0.0, std = 0.0;
    int layers = 0;
    for (int i = 0; i < o->n_stats; i++) {
        const ast_stat *s = &o->stats[i];
        const ast_stat *sd = strcmp(s->name, "attn.gate_mean") ? NULL : mon_find(o, "attn.gate_std", s->layer);
        if (!sd) continue;
        ast_sink_emit(o->sink, "activation_mean", s->layer, mon_mean(s));
        ast_sink_emit(o->sink, "activation_std", s->layer, mon_mean(sd));
        mean += mon_mean(s), std += mon_mean(sd), layers++;
    }
    if (!layers) {
        ast_sink_warn_once(o->sink, "no_gates",
                           "no attn.gate_mean statistics to observe; the model's attention is not gated "
                           "(or its gate_type is none)");
        return;
    }
    mean /= layers;
    int open = mean > m->max_mean;
    ast_sink_emit(o->sink, "activation_mean", -1, mean);
    ast_sink_emit(o->sink, "activation_std", -1, std / layers);
    ast_sink_emit(o->sink, "no_filtering_warning", -1, open);
    if (open)
        ast_sink_warn_once(o->sink, "no_filtering",
                           "gates not filtering: mean gate activation %.3f is above %.3g, so attention outputs pass "
                           "almost unscaled; check the gate columns of q_proj",
                           mean, m->max_mean);
}

AST_PLUGIN(AST_KIND_MONITOR, "gate_activation", "1.0", "gated attention: mean and std of the sigmoid gates; warns when they stop filtering",
           AST_OPTIONS(options), .create = gate_create, .observe = gate_observe)
