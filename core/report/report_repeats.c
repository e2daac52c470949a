/* Series that repeat another: a monitor metric whose every value, in every
 * run, is also another metric's value at the same step. The grad_norm
 * monitor's total_grad_norm is the trainer's grad_norm every 10 steps, for
 * one; drawn twice it would be a second plot and a second table row saying
 * nothing new. Constant series (flags, counts that stay 0) agree by
 * coincidence, not by being the same quantity, and are kept. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report_internal.h"

static const rp_series *series_of(const rp_run *r, const char *name)
{
    for (int i = 0; i < r->n_mon; i++)
        if (!strcmp(r->mon[i].name, name)) return &r->mon[i].curve;
    return NULL;
}

/* Equal as logged: metrics.jsonl prints some values to 6 significant digits, others to 9. */
static int same_value(double a, double b) { return fabs(a - b) <= 1e-5 * fmax(fabs(a), fabs(b)) + 1e-12; }

/* Whether every point of a is a point of b; both run along increasing steps. */
static int within(const rp_series *a, const rp_series *b)
{
    int j = 0;
    for (int i = 0; i < a->n; i++) {
        while (j < b->n && b->x[j] < a->x[i]) j++;
        if (j == b->n || b->x[j] != a->x[i] || !same_value(a->y[i], b->y[j])) return 0;
    }
    return 1;
}

static int varies(const rp_series *a)
{
    for (int i = 1; i < a->n; i++)
        if (a->y[i] != a->y[0]) return 1;
    return 0;
}

/* Whether metric a repeats metric b in every usable run that logs a, and varies in one. */
static int repeats(const rp_sweep *s, const char *a, const char *b)
{
    int varied = 0;
    for (int i = 0; i < s->n_runs; i++) {
        if (!s->runs[i].usable) continue;
        const rp_series *sa = series_of(&s->runs[i], a), *sb = series_of(&s->runs[i], b);
        if (!sa) continue;
        if (!sb || !within(sa, sb)) return 0;
        varied |= varies(sa);
    }
    return varied;
}

/* The metric that m repeats, or -1; of two identical ones the later repeats the earlier. */
static int original_of(const rp_sweep *s, int m)
{
    const char *name = s->monitors.v[m];
    if (rp_is_warning_flag(name)) return -1;
    for (int o = 0; o < s->monitors.n; o++)
        if (o != m && repeats(s, name, s->monitors.v[o]) && (o < m || !repeats(s, s->monitors.v[o], name))) return o;
    return -1;
}

void rp_drop_repeats(rp_sweep *s)
{
    ast_strlist kept = {0};
    char note[600];
    for (int m = 0; m < s->monitors.n; m++) {
        int o = original_of(s, m);
        if (o < 0) {
            ast_strlist_push(&kept, s->monitors.v[m]);
            continue;
        }
        snprintf(note, sizeof note, "%s (the same values as %s)", rp_metric_label(s, s->monitors.v[m]),
                 rp_metric_label(s, s->monitors.v[o]));
        ast_strlist_push(&s->repeats, note);
    }
    ast_strlist_free(&s->monitors);
    s->monitors = kept;
}
