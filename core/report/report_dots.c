/* Dot panels: per config a dot per seed, and beside them its mean with the
 * mean's 95% interval; dashed lines for the baselines, labelled at the
 * right. With three seeds the dots are the data; a bar alone would hide
 * how few they are, and the interval says how little they pin the mean. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/stats.h"
#include "report_internal.h"

enum {
    AXIS = 80,    /* px left of the frame: the y numbers and label */
    COL_W = 70,   /* px per config at least: room for a short name under the column */
    LABELS = 130, /* px right of the frame for the baselines' names */
    PANEL_H = 320,
    PAGE_W = 1100 /* what the HTML page gives a figure */
};

/* Dash patterns tell the baselines apart in grey, leaving colour to the configs. */
static const char *const dashes[] = {"6 3", "2 3", "8 3 2 3", "12 4"};

void rp_mean_interval(const double *v, int n, double *lo, double *hi)
{
    *lo = *hi = NAN;
    if (n < 2) return;
    double mean, sd;
    ast_mean_sd(v, n, &mean, &sd);
    double half = ast_student_t_quantile(0.975, n - 1) * sd / sqrt(n);
    *lo = mean - half, *hi = mean + half;
}

static void value_range(const rp_panel *p, double *lo, double *hi)
{
    *lo = INFINITY, *hi = -INFINITY;
    for (int c = 0; c < p->n_cols; c++) {
        double a, b;
        rp_mean_interval(p->cols[c].v, p->cols[c].n, &a, &b);
        if (!isnan(a)) *lo = fmin(*lo, a), *hi = fmax(*hi, b);
        for (int i = 0; i < p->cols[c].n; i++) *lo = fmin(*lo, p->cols[c].v[i]), *hi = fmax(*hi, p->cols[c].v[i]);
    }
    for (int l = 0; l < p->n_lines; l++) *lo = fmin(*lo, p->lines[l].y), *hi = fmax(*hi, p->lines[l].y);
}

static void column(FILE *f, const rp_axes *a, const rp_dots *col, int x)
{
    const char *colour = rp_colour(col->color);
    double sum = 0.0, lo, hi;
    for (int i = 0; i < col->n; i++) {
        /* seeds side by side left of the centre, so equal values stay visible */
        double dx = -0.14 + (i - (col->n - 1) / 2.0) * 0.07;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\" fill-opacity=\"0.75\"/>\n",
                rp_px(a, x + dx), rp_py(a, col->v[i]), colour);
        sum += col->v[i];
    }
    double at = rp_px(a, x + 0.16), y = rp_py(a, sum / col->n);
    rp_mean_interval(col->v, col->n, &lo, &hi);
    if (!isnan(lo))
        fprintf(f, "<path d=\"M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fH%.1f\" stroke=\"%s\" stroke-width=\"1.5\" "
                   "fill=\"none\" class=\"interval\"/>\n",
                at - 5, rp_py(a, hi), at + 5, at, rp_py(a, hi), rp_py(a, lo), at - 5, rp_py(a, lo), at + 5, colour);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n", at - 9, y,
            at + 9, y, colour);
    char attrs[96];
    snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\"", rp_px(a, x), a->bottom + 18);
    rp_svg_text(f, attrs, col->label);
}

static int by_y(const void *a, const void *b)
{
    double d = ((const double *)a)[0] - ((const double *)b)[0];
    return (d > 0) - (d < 0);
}

/* Each baseline across the frame, its name at the right at its height,
 * nudged apart from its neighbours so close values stay readable. */
static void baselines(FILE *f, const rp_axes *a, const rp_hline *lines, int n)
{
    double(*at)[2] = ast_xmalloc((size_t)(n + 1) * sizeof *at); /* pixel y, index */
    for (int l = 0; l < n; l++) {
        const char *dash = dashes[l % 4];
        at[l][0] = rp_py(a, lines[l].y), at[l][1] = l;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"%s\"/>\n",
                a->left, at[l][0], a->right + 14, at[l][0], dash);
    }
    qsort(at, (size_t)n, sizeof *at, by_y);
    for (int l = 1; l < n; l++) at[l][0] = fmax(at[l][0], at[l - 1][0] + RP_FONT + 1);
    for (int l = 0; l < n; l++) {
        char attrs[64];
        snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\" fill=\"#444\"", a->right + 18, at[l][0] + 4);
        rp_svg_text(f, attrs, lines[(int)at[l][1]].label);
    }
    free(at);
}

void rp_dots_panel(FILE *f, const rp_panel *p, double x, double y, double w, double h)
{
    double lo, hi;
    rp_axes a = {0.5, p->n_cols + 0.5, 0, 0, x + AXIS, x + w - (p->n_lines ? LABELS : 16), y + 34, y + h - 48, 0};
    value_range(p, &lo, &hi);
    rp_axes_fit_y(&a, lo, hi);
    rp_axes_draw(f, &a, 0, NULL, p->ylabel);
    char attrs[160];
    /* From the panel's edge; a title too long for it (about 8.5 px a bold
     * character) is squeezed to fit rather than run into the next panel. */
    double room = w - 16;
    int n = snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\" class=\"title\"", x + 8, y + 22);
    if (8.5 * (double)strlen(p->title) > room)
        snprintf(attrs + n, sizeof attrs - (size_t)n, " textLength=\"%.0f\" lengthAdjust=\"spacingAndGlyphs\"", room);
    rp_svg_text(f, attrs, p->title);
    baselines(f, &a, p->lines, p->n_lines);
    for (int c = 0; c < p->n_cols; c++) column(f, &a, &p->cols[c], c + 1);
}

/* A column's width: its config's name under it, at about 7 px a character. */
static int column_width(const rp_panel *panels, int n)
{
    int w = COL_W;
    for (int i = 0; i < n; i++)
        for (int c = 0; c < panels[i].n_cols; c++) {
            int need = 7 * (int)strlen(panels[i].cols[c].label) + 12;
            w = need > w ? need : w;
        }
    return w;
}

char *rp_svg_panels(const rp_panel *panels, int n, int standalone)
{
    int w = 0, col_w = column_width(panels, n);
    for (int i = 0; i < n; i++) {
        int need = AXIS + col_w * panels[i].n_cols + (panels[i].n_lines ? LABELS : 16);
        w = need > w ? need : w;
    }
    int per_row = PAGE_W / w > 1 ? PAGE_W / w : 1, rows = (n + per_row - 1) / per_row;
    if (per_row > 1) w = PAGE_W / per_row; /* the page's width shared out */
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    rp_svg_open(f, w * (n < per_row ? n : per_row), PANEL_H * rows, standalone);
    for (int i = 0; i < n; i++) rp_dots_panel(f, &panels[i], w * (i % per_row), PANEL_H * (i / per_row), w, PANEL_H);
    return rp_svg_close(f, &out);
}
