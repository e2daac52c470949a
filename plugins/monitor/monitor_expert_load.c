/* expert_load: is the mixture of experts using its experts evenly?
 * Per layer, the usage fractions p_e = tokens_e / sum tokens (from
 * moe.tokens_per_expert) give the normalised entropy
 * H = -sum p_e ln p_e / ln n (1: perfectly even, 0: one expert takes all)
 * and the population std of p_e. Reported per layer and as the mean over
 * layers, with the mean aux (load-balance) loss and the dropped tokens
 * summed over layers. A mean entropy below collapse_threshold is expert
 * collapse: warned once per run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alphast/plugin_api.h"
#include "monitor_util.h"

enum { OPT_EVERY, OPT_COLLAPSE };

static const ast_option_spec options[] = {
    [OPT_EVERY] = MON_EVERY_OPTION("10"),
    [OPT_COLLAPSE] = {"collapse_threshold", AST_OPT_FLOAT, "0.5", 0, 1, NULL,
                      "warn when the mean normalised expert entropy falls below this"},
};

typedef struct expert_load {
    int64_t every;
    double collapse;
} expert_load;

/* What one layer's routing summed up to over the monitor's statistics. */
typedef struct load_totals {
    double entropy, usage_std, aux, dropped;
    int layers, aux_layers;
} load_totals;

static void *load_create(const ast_create_args *a, char *err, size_t errlen)
{
    expert_load *m = calloc(1, sizeof *m);
    AST_REQUIRE(m, err, errlen, "monitor 'expert_load': out of memory");
    m->every = a->opts[OPT_EVERY].i;
    m->collapse = a->opts[OPT_COLLAPSE].f;
    return m;
}

/* Normalised entropy and std of the usage fractions; 0 if no tokens. A
 * single expert has nothing to balance: entropy 1. */
static int usage_of(const ast_stat *s, double *entropy, double *std)
{
    double total = 0.0, h = 0.0, sq = 0.0;
    for (int e = 0; e < s->n; e++) total += s->values[e];
    if (!(total > 0.0)) return 0;
    for (int e = 0; e < s->n; e++) {
        double p = s->values[e] / total;
        if (p > 0.0) h -= p * log(p);
        sq += p * p;
    }
    double mean = 1.0 / s->n, var = sq / s->n - mean * mean;
    *entropy = s->n > 1 ? h / log((double)s->n) : 1.0;
    *std = var > 0.0 ? sqrt(var) : 0.0;
    return 1;
}

static void add_layer(ast_sink *sink, const ast_stat *s, load_totals *t)
{
    double entropy, std;
    if (!strcmp(s->name, "moe.tokens_per_expert") && usage_of(s, &entropy, &std)) {
        ast_sink_emit(sink, "expert_entropy_normalized", s->layer, entropy);
        ast_sink_emit(sink, "expert_usage_std", s->layer, std);
        t->entropy += entropy, t->usage_std += std, t->layers++;
    } else if (!strcmp(s->name, "moe.aux_loss") && s->n > 0) {
        t->aux += s->values[0], t->aux_layers++;
    } else if (!strcmp(s->name, "moe.dropped_tokens") && s->n > 0) {
        t->dropped += s->values[0];
    }
}

static void load_observe(void *self, const ast_observation *o)
{
    const expert_load *m = self;
    if (!mon_due(o, m->every)) return;
    load_totals t = {0};
    for (int i = 0; i < o->n_stats; i++) add_layer(o->sink, &o->stats[i], &t);
    if (!t.layers) {
        ast_sink_warn_once(o->sink, "no_moe",
                           "no moe.tokens_per_expert statistics to observe; the model's ffn is not moe");
        return;
    }
    double entropy = t.entropy / t.layers;
    int collapsed = entropy < m->collapse;
    ast_sink_emit(o->sink, "expert_entropy_normalized", -1, entropy);
    ast_sink_emit(o->sink, "expert_usage_std", -1, t.usage_std / t.layers);
    ast_sink_emit(o->sink, "avg_aux_loss", -1, t.aux_layers ? t.aux / t.aux_layers : 0.0);
    ast_sink_emit(o->sink, "dropped_tokens", -1, t.dropped);
    ast_sink_emit(o->sink, "expert_collapse_warning", -1, collapsed);
    if (collapsed)
        ast_sink_warn_once(o->sink, "expert_collapse",
                           "expert collapse: mean normalised expert entropy %.3f is below %.3g (few experts do all the "
                           "work); raise the ffn's load_balance_weight or num_experts",
                           entropy, m->collapse);
}

AST_PLUGIN(AST_KIND_MONITOR, "expert_load", "1.0", "MoE expert load: normalised routing entropy, usage std, aux loss, dropped tokens; warns on expert collapse",
           AST_OPTIONS(options), .create = load_create, .observe = load_observe)
