/* monitor_distbias: the monitor half of the example. It reads the
 * "distbias.attended_distance" statistic attn_distbias publishes (one value
 * per head and layer), writes its mean over heads to the run's metrics and
 * warns once when a head has collapsed onto the query cell itself. */
#include <stdlib.h>
#include <string.h>

#include <alphast/plugin_api.h>

enum { OPT_EVERY, OPT_COLLAPSE_BELOW };

static const ast_option_spec options[] = {
    [OPT_EVERY] = {"every", AST_OPT_INT, "1", 1, 1e9, NULL, "write the metric every this many training steps"},
    [OPT_COLLAPSE_BELOW] = {"collapse_below", AST_OPT_FLOAT, "0.0", 0, 1e6, NULL,
                            "warn when a head's attended distance falls below this (0: never)"},
};

typedef struct distmon {
    int64_t every;
    double collapse_below;
} distmon;

static void *distmon_create(const ast_create_args *a, char *err, size_t errlen)
{
    distmon *m = malloc(sizeof *m);
    AST_REQUIRE(m, err, errlen, "monitor 'distbias': out of memory");
    *m = (distmon){a->opts[OPT_EVERY].i, a->opts[OPT_COLLAPSE_BELOW].f};
    return m;
}

static void distmon_destroy(void *self) { free(self); }

static void report(const distmon *m, const ast_observation *o, const ast_stat *s)
{
    double mean = 0.0;
    for (int hd = 0; hd < s->n; hd++) {
        mean += s->values[hd] / s->n;
        if (s->values[hd] < m->collapse_below)
            ast_sink_warn_once(o->sink, "distbias.collapse",
                               "layer %d head %d attends at distance %.3g: it has collapsed onto the query cell",
                               s->layer, hd, s->values[hd]);
    }
    ast_sink_emit(o->sink, "attended_distance", s->layer, mean);
}

static void distmon_observe(void *self, const ast_observation *o)
{
    const distmon *m = self;
    if (o->phase == AST_PHASE_EPOCH_END || (o->phase == AST_PHASE_TRAIN_STEP && o->step % m->every)) return;
    for (int i = 0; i < o->n_stats; i++)
        if (!strcmp(o->stats[i].name, "distbias.attended_distance") && o->stats[i].n > 0) report(m, o, &o->stats[i]);
}

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_MONITOR, "distbias", "1.0",
                         "mean attention-weighted distance per layer of attn_distbias (example)"),
    .options = options,
    .n_options = AST_N_OPTIONS(options),
    .create = distmon_create,
    .destroy = distmon_destroy,
    .observe = distmon_observe,
};

AST_API_DEFINE;
AST_PLUGIN_DEFINE(desc)
