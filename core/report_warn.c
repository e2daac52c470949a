/* Monitor warnings, judged from the logged values: the warning thresholds
 * of the MoE / gated-attention monitoring guide (expert entropy < 0.5 is
 * expert collapse, gate activation mean > 0.95 means the gate no longer
 * filters, gradient norm > 10 calls for clipping). A metric matches a rule
 * when its name contains the rule's pattern. */
#include <math.h>
#include <string.h>

#include "report_internal.h"

typedef struct rp_rule {
    const char *pattern;
    int above; /* 1: fires above the threshold, 0: below */
    double threshold;
    const char *text;
} rp_rule;

static const rp_rule rules[] = {
    {"entropy", 0, 0.5, "expert load entropy fell below 0.5 (expert collapse)"},
    {"activation_mean", 1, 0.95, "gate activation mean rose above 0.95 (the gate stops filtering)"},
    {"grad_norm", 1, 10.0, "gradient norm rose above 10"},
};

static const rp_rule *rule_for(const char *metric)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strstr(metric, rules[i].pattern)) return &rules[i];
    return NULL;
}

int rp_warning_of(const rp_sweep *s, int config, const char *metric, rp_warning *w)
{
    const rp_rule *rule = rule_for(metric);
    const rp_config *c = &s->configs[config];
    if (!rule) return 0;
    *w = (rp_warning){.text = rule->text, .extreme = rule->above ? -INFINITY : INFINITY};
    for (int i = 0; i < c->n_runs; i++) {
        const rp_run *r = &s->runs[c->runs[i]];
        for (int m = 0; m < r->n_mon; m++) {
            if (strcmp(r->mon[m].name, metric)) continue;
            double v = rule->above ? r->mon[m].max : r->mon[m].min;
            w->of++;
            w->seeds += rule->above ? v > rule->threshold : v < rule->threshold;
            w->extreme = rule->above ? fmax(w->extreme, v) : fmin(w->extreme, v);
        }
    }
    return w->seeds > 0;
}
