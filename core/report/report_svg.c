/* Line plots as SVG: one line per config (mean over seeds) over a shaded
 * min-max band, axes with round ticks, a legend; and the frame, palette
 * and text the report's other plots share. Plain SVG 1.1, no scripts, no
 * external references. */
#include <math.h>
#include <stdlib.h>

#include "report_internal.h"

enum { W = RP_SVG_W, H = RP_SVG_H, LEFT = RP_SVG_LEFT, RIGHT = RP_SVG_RIGHT, TOP = RP_SVG_TOP, BOTTOM = RP_SVG_BOTTOM };

/* Okabe-Ito colours: distinguishable with the common colour-vision deficiencies. */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#000000", "#999999"};

const char *rp_colour(int index) { return palette[index % 8]; }

void rp_put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

double rp_px(const rp_axes *a, double x) { return LEFT + (x - a->x0) / (a->x1 - a->x0) * (RIGHT - LEFT); }
double rp_py(const rp_axes *a, double y) { return BOTTOM - (y - a->y0) / (a->y1 - a->y0) * (BOTTOM - TOP); }

/* 1, 2 or 5 times a power of ten, giving about `target` intervals. */
static double nice_step(double range, int target)
{
    double raw = range / target, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * p;
}

static void widen_if_flat(double *lo, double *hi)
{
    if (*hi > *lo) return;
    double pad = *lo != 0 ? 0.05 * fabs(*lo) : 1.0;
    *lo -= pad, *hi += pad;
}

void rp_axis_pad(double *lo, double *hi)
{
    widen_if_flat(lo, hi);
    double pad = 0.05 * (*hi - *lo);
    *lo -= pad, *hi += pad;
}

static rp_axes fit_axes(const rp_line *lines, int n_lines)
{
    rp_axes a = {INFINITY, -INFINITY, INFINITY, -INFINITY};
    for (int l = 0; l < n_lines; l++)
        for (int i = 0; i < lines[l].band->n; i++) {
            const rp_band *b = lines[l].band;
            a.x0 = fmin(a.x0, b->x[i]), a.x1 = fmax(a.x1, b->x[i]);
            a.y0 = fmin(a.y0, b->lo[i]), a.y1 = fmax(a.y1, b->hi[i]);
        }
    if (!(a.x0 <= a.x1)) return (rp_axes){0, 1, 0, 1};
    widen_if_flat(&a.x0, &a.x1);
    rp_axis_pad(&a.y0, &a.y1);
    return a;
}

static void grid(FILE *f, const rp_axes *a, int x_ticks)
{
    double ys = nice_step(a->y1 - a->y0, 5), xs = nice_step(a->x1 - a->x0, 6);
    for (double y = ceil(a->y0 / ys) * ys; y <= a->y1; y += ys) {
        double at = rp_py(a, y);
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>", LEFT, at, RIGHT, at);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", LEFT - 6, at + 4,
                fabs(y) < 1e-12 * ys ? 0.0 : y);
    }
    for (double x = ceil(a->x0 / xs) * xs; x_ticks && x <= a->x1; x += xs) {
        double at = rp_px(a, x);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" class=\"grid\"/>", at, TOP, at, BOTTOM);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.6g</text>\n", at, BOTTOM + 16, x);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#444\"/>\n", LEFT, TOP,
            RIGHT - LEFT, BOTTOM - TOP);
}

static void band_and_line(FILE *f, const rp_axes *a, const rp_band *b, const char *colour)
{
    if (b->n == 1) {
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", rp_px(a, b->x[0]), rp_py(a, b->mean[0]),
                colour);
        return;
    }
    fprintf(f, "<polygon fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" points=\"", colour);
    for (int i = 0; i < b->n; i++) fprintf(f, "%.1f,%.1f ", rp_px(a, b->x[i]), rp_py(a, b->hi[i]));
    for (int i = b->n - 1; i >= 0; i--) fprintf(f, "%.1f,%.1f ", rp_px(a, b->x[i]), rp_py(a, b->lo[i]));
    fprintf(f, "\"/>\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", colour);
    for (int i = 0; i < b->n; i++) fprintf(f, "%.1f,%.1f ", rp_px(a, b->x[i]), rp_py(a, b->mean[i]));
    fputs("\"/>\n", f);
    if (b->n > 30) return; /* markers only where points are few, e.g. one per epoch */
    for (int i = 0; i < b->n; i++)
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n", rp_px(a, b->x[i]),
                rp_py(a, b->mean[i]), colour);
}

static void legend(FILE *f, const rp_line *lines, int n_lines)
{
    for (int l = 0; l < n_lines; l++) {
        int y = TOP + 8 + 20 * l;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/>", RIGHT + 14, y,
                rp_colour(lines[l].color));
        fprintf(f, "<text x=\"%d\" y=\"%d\">", RIGHT + 34, y + 6);
        rp_put_escaped(f, lines[l].label);
        fputs("</text>\n", f);
    }
}

void rp_svg_text(FILE *f, const char *attrs, const char *text)
{
    fprintf(f, "<text %s>", attrs);
    rp_put_escaped(f, text);
    fputs("</text>\n", f);
}

void rp_svg_begin(FILE *f, const rp_axes *a, int x_ticks, const char *title, const char *xlabel, const char *ylabel,
                  int standalone)
{
    char attrs[160];
    fprintf(f, "<svg %sviewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"11\">\n",
            standalone ? "xmlns=\"http://www.w3.org/2000/svg\" " : "", W, H, W, H);
    fputs("<style>.grid{stroke:#ddd;stroke-width:1}</style>\n", f);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", W, H);
    grid(f, a, x_ticks);
    snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"20\" font-size=\"14\" font-weight=\"bold\"", LEFT);
    rp_svg_text(f, attrs, title);
    snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"%d\" text-anchor=\"middle\"", (LEFT + RIGHT) / 2, H - 12);
    rp_svg_text(f, attrs, xlabel);
    snprintf(attrs, sizeof attrs, "transform=\"translate(16 %d) rotate(-90)\" text-anchor=\"middle\"",
             (TOP + BOTTOM) / 2);
    rp_svg_text(f, attrs, ylabel);
}

char *rp_svg_end(FILE *f, char **out)
{
    fputs("</svg>\n", f);
    fclose(f); /* sets *out */
    return *out;
}

char *rp_svg_plot(const char *title, const char *xlabel, const char *ylabel, const rp_line *lines, int n_lines,
                  int standalone)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    rp_axes a = fit_axes(lines, n_lines);
    rp_svg_begin(f, &a, 1, title, xlabel, ylabel, standalone);
    for (int l = 0; l < n_lines; l++) band_and_line(f, &a, lines[l].band, rp_colour(lines[l].color));
    legend(f, lines, n_lines);
    return rp_svg_end(f, &out);
}
