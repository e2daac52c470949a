/* grad_norm: are the gradients of the fragile parts exploding? The trainer
 * publishes, after backward and before clipping, the L2 norms of the
 * gradient over all parameters (grad.total), over the MoE routers
 * (grad.router) and over the diffusion-time branch (grad.time); see
 * core/train_monitors.c for which parameters each group holds. Each norm
 * above max_norm is warned once per run. */
#include <stdlib.h>

#include "alphast/plugin_api.h"
#include "monitor_util.h"

enum { OPT_EVERY, OPT_MAX_NORM };

static const ast_option_spec options[] = {
    [OPT_EVERY] = MON_EVERY_OPTION("10"),
    [OPT_MAX_NORM] = {"max_norm", AST_OPT_FLOAT, "10", 0, 1e30, NULL,
                      "warn when a gradient norm (before clipping) exceeds this"},
};

/* Statistic, metric it is reported as, and what the warning calls it. */
static const struct {
    const char *stat, *metric, *what;
} groups[] = {
    {"grad.total", "total_grad_norm", "total"},
    {"grad.router", "router_grad_norm", "MoE router"},
    {"grad.time", "time_modulation_grad_norm", "time-modulation"},
};

typedef struct grad_norm {
    int64_t every;
    double max_norm;
} grad_norm;

static void *grad_create(const ast_create_args *a, char *err, size_t errlen)
{
    grad_norm *m = calloc(1, sizeof *m);
    AST_REQUIRE(m, err, errlen, "monitor 'grad_norm': out of memory");
    m->every = a->opts[OPT_EVERY].i;
    m->max_norm = a->opts[OPT_MAX_NORM].f;
    return m;
}

static void grad_observe(void *self, const ast_observation *o)
{
    const grad_norm *m = self;
    if (!mon_due(o, m->every)) return;
    int overflow = 0, found = 0;
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        const ast_stat *s = mon_find(o, groups[g].stat, -1);
        if (!s || s->n < 1) continue;
        double norm = s->values[0];
        found = 1;
        ast_sink_emit(o->sink, groups[g].metric, -1, norm);
        /* not (norm <= max) so that an infinite or NaN norm also warns */
        if (!(norm <= m->max_norm)) {
            overflow = 1;
            ast_sink_warn_once(o->sink, groups[g].stat,
                               "%s gradient norm %.4g exceeds %.3g: the update is unstable; keep "
                               "training.gradient_clip_val on (e.g. 1.0) or lower training.learning_rate",
                               groups[g].what, norm, m->max_norm);
        }
    }
    if (found) ast_sink_emit(o->sink, "grad_overflow_warning", -1, overflow);
}

AST_PLUGIN(AST_KIND_MONITOR, "grad_norm", "1.0", "gradient norms (total, MoE router, time modulation) before clipping; warns on overflow",
           AST_OPTIONS(options), .create = grad_create, .observe = grad_observe)
