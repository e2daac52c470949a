/* A dot plot: one column per config with a dot per seed and a bar at the
 * mean, dashed horizontal lines for the baselines. With three seeds the
 * dots are the data; a mean ± sd bar would hide how few they are. */
#include <math.h>
#include <stdlib.h>

#include "report_internal.h"

/* Dash patterns tell the baselines apart in grey, leaving colour to the configs. */
static const char *const dashes[] = {"6 3", "2 3", "8 3 2 3", "12 4"};

static rp_axes fit(const rp_dots *cols, int n_cols, const rp_hline *lines, int n_lines)
{
    rp_axes a = {0.5, n_cols + 0.5, INFINITY, -INFINITY};
    for (int c = 0; c < n_cols; c++)
        for (int i = 0; i < cols[c].n; i++) a.y0 = fmin(a.y0, cols[c].v[i]), a.y1 = fmax(a.y1, cols[c].v[i]);
    for (int l = 0; l < n_lines; l++) a.y0 = fmin(a.y0, lines[l].y), a.y1 = fmax(a.y1, lines[l].y);
    if (!(a.y0 <= a.y1)) a.y0 = 0, a.y1 = 1;
    rp_axis_pad(&a.y0, &a.y1);
    return a;
}

static void column(FILE *f, const rp_axes *a, const rp_dots *col, int x)
{
    const char *colour = rp_colour(col->color);
    double sum = 0.0;
    for (int i = 0; i < col->n; i++) {
        /* seeds side by side, centred on the column, so equal values stay visible */
        double dx = (i - (col->n - 1) / 2.0) * 0.08;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" fill-opacity=\"0.8\"/>\n", rp_px(a, x + dx),
                rp_py(a, col->v[i]), colour);
        sum += col->v[i];
    }
    double y = rp_py(a, sum / col->n);
    fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2.5\"/>\n",
            rp_px(a, x - 0.3), y, rp_px(a, x + 0.3), y, colour);
    char attrs[96];
    snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%d\" text-anchor=\"middle\"", rp_px(a, x), RP_SVG_BOTTOM + 16);
    rp_svg_text(f, attrs, col->label);
}

static void baseline(FILE *f, const rp_axes *a, const rp_hline *line, int index)
{
    const char *dash = dashes[index % 4];
    double y = rp_py(a, line->y);
    int ly = RP_SVG_TOP + 8 + 20 * index;
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#555\" stroke-dasharray=\"%s\"/>\n",
            RP_SVG_LEFT, y, RP_SVG_RIGHT, y, dash);
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#555\" stroke-dasharray=\"%s\"/>",
            RP_SVG_RIGHT + 10, ly + 2, RP_SVG_RIGHT + 34, ly + 2, dash);
    char attrs[64];
    snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"%d\"", RP_SVG_RIGHT + 40, ly + 6);
    rp_svg_text(f, attrs, line->label);
}

char *rp_svg_dots(const char *title, const char *ylabel, const rp_dots *cols, int n_cols, const rp_hline *lines,
                  int n_lines, int standalone)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    rp_axes a = fit(cols, n_cols, lines, n_lines);
    rp_svg_begin(f, &a, 0, title, "config (a dot per seed, a bar at the mean)", ylabel, standalone);
    for (int l = 0; l < n_lines; l++) baseline(f, &a, &lines[l], l);
    for (int c = 0; c < n_cols; c++) column(f, &a, &cols[c], c + 1);
    return rp_svg_end(f, &out);
}
