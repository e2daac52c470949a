/* Monitor warnings. Each monitor logs its warning as a 0/1 metric
 * (expert_collapse_warning, no_filtering_warning, grad_overflow_warning:
 * docs/monitors.md) judged with the thresholds the run configured, so the
 * report reads the flags instead of second-guessing the thresholds. */
#include <math.h>
#include <string.h>

#include "report_internal.h"

static const char *const known[][2] = {
    {"expert_collapse_warning", "expert collapse (mean normalised expert entropy below the collapse threshold, 0.5 by default)"},
    {"no_filtering_warning", "gates stopped filtering (gate activation mean above max_mean, 0.95 by default)"},
    {"grad_overflow_warning", "gradient norm above max_norm (10 by default) or not finite"},
};

int rp_is_warning_flag(const char *metric)
{
    size_t n = strlen(metric), k = strlen("_warning");
    return n > k && !strcmp(metric + n - k, "_warning");
}

static const char *flag_text(const char *metric)
{
    const char *slash = strrchr(metric, '/'), *base = slash ? slash + 1 : metric;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(known[i][0], base)) return known[i][1];
    return metric;
}

int rp_warning_of(const rp_sweep *s, int config, const char *metric, rp_warning *w)
{
    if (!rp_is_warning_flag(metric)) return 0;
    const rp_config *c = &s->configs[config];
    *w = (rp_warning){.text = flag_text(metric), .first = INFINITY};
    for (int i = 0; i < c->n_runs; i++) {
        const rp_run *r = &s->runs[c->runs[i]];
        for (int m = 0; m < r->n_mon; m++) {
            if (strcmp(r->mon[m].name, metric)) continue;
            const rp_series *f = &r->mon[m].curve;
            int k = 0;
            while (k < f->n && !(f->y[k] > 0.5)) k++; /* set = 1 */
            w->of++;
            if (k == f->n) continue;
            w->seeds++;
            w->first = fmin(w->first, f->x[k]);
        }
    }
    return w->seeds > 0;
}
