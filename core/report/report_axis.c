/* The axes of the report's plots: the range fitted to the values, a log
 * scale when they span two decades, round ticks, the grid and the labels. */
#include <math.h>

#include "report_internal.h"

int rp_wants_log(double lo, double hi) { return lo > 0 && hi >= 100 * lo; }

static void widen_if_flat(double *lo, double *hi)
{
    if (*hi > *lo) return;
    double pad = *lo != 0 ? 0.05 * fabs(*lo) : 1.0;
    *lo -= pad, *hi += pad;
}

void rp_axes_fit_y(rp_axes *a, double lo, double hi)
{
    if (!(lo <= hi)) lo = 0, hi = 1;
    a->log_y = rp_wants_log(lo, hi);
    if (a->log_y) {
        double pad = pow(10, 0.05 * log10(hi / lo));
        a->y0 = lo / pad, a->y1 = hi * pad;
        return;
    }
    widen_if_flat(&lo, &hi);
    double pad = 0.05 * (hi - lo);
    a->y0 = lo - pad, a->y1 = hi + pad;
}

double rp_px(const rp_axes *a, double x) { return a->left + (x - a->x0) / (a->x1 - a->x0) * (a->right - a->left); }

double rp_py(const rp_axes *a, double y)
{
    double t = a->log_y ? log10(y / a->y0) / log10(a->y1 / a->y0) : (y - a->y0) / (a->y1 - a->y0);
    return a->bottom - t * (a->bottom - a->top);
}

/* 1, 2 or 5 times a power of ten, giving about `target` intervals. */
static double nice_step(double range, int target)
{
    double raw = range / target, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

static void y_tick(FILE *f, const rp_axes *a, double y)
{
    double at = rp_py(a, y);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", a->left, at, a->right, at);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", a->left - 6, at + 4, y);
}

/* Each decade's 1, 2 and 5, or its 1 alone when there are many decades. */
static void log_ticks(FILE *f, const rp_axes *a)
{
    static const double all[] = {1, 2, 5};
    int mantissas = log10(a->y1 / a->y0) > 3.5 ? 1 : 3;
    for (double decade = pow(10, floor(log10(a->y0))); decade <= a->y1; decade *= 10)
        for (int m = 0; m < mantissas; m++) {
            double y = decade * all[m];
            if (y >= a->y0 && y <= a->y1) y_tick(f, a, y);
        }
}

static void linear_ticks(FILE *f, const rp_axes *a)
{
    double step = nice_step(a->y1 - a->y0, 5);
    for (double y = ceil(a->y0 / step) * step; y <= a->y1; y += step) y_tick(f, a, fabs(y) < 1e-12 * step ? 0.0 : y);
}

static void x_ticks(FILE *f, const rp_axes *a)
{
    double step = nice_step(a->x1 - a->x0, 6);
    for (double x = ceil(a->x0 / step) * step; x <= a->x1; x += step) {
        double at = rp_px(a, x);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", at, a->top, at, a->bottom);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.6g</text>\n", at, a->bottom + 18, x);
    }
}

void rp_axes_draw(FILE *f, const rp_axes *a, int with_x_ticks, const char *xlabel, const char *ylabel)
{
    char attrs[160], label[300];
    if (a->log_y) log_ticks(f, a);
    else linear_ticks(f, a);
    if (with_x_ticks) x_ticks(f, a);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#444\"/>\n", a->left,
            a->top, a->right - a->left, a->bottom - a->top);
    if (xlabel) {
        snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\"", (a->left + a->right) / 2,
                 a->bottom + 38);
        rp_svg_text(f, attrs, xlabel);
    }
    snprintf(label, sizeof label, "%s%s", ylabel, a->log_y ? " (log scale)" : "");
    snprintf(attrs, sizeof attrs, "transform=\"translate(%.1f %.1f) rotate(-90)\" text-anchor=\"middle\"",
             a->left - 62, (a->top + a->bottom) / 2);
    rp_svg_text(f, attrs, label);
}
