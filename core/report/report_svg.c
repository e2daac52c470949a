/* SVG for the report: the document, its palette and text, and the line
 * plots: one line per config (mean over seeds) over a shaded min-max band,
 * each seed's own curve thin beside it (a band hides which seed is which,
 * and where each turned), the lowest point of each seed marked where it
 * chose the weights kept, with a legend. Plain SVG 1.1, no scripts, no
 * external references. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

/* The line plot: wide enough for a few hundred steps, the legend at the right. */
enum { W = 900, H = 420, LEFT = 84, LEGEND = 214, TOP = 40, BOTTOM = H - 56 };

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

void rp_svg_text(FILE *f, const char *attrs, const char *text)
{
    fprintf(f, "<text %s>", attrs);
    rp_put_escaped(f, text);
    fputs("</text>\n", f);
}

void rp_svg_open(FILE *f, int w, int h, int standalone)
{
    fprintf(f,
            "<svg %sviewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" style=\"max-width:100%%;height:auto\" "
            "font-family=\"sans-serif\" font-size=\"%d\">\n",
            standalone ? "xmlns=\"http://www.w3.org/2000/svg\" " : "", w, h, w, h, RP_FONT);
    fputs("<style>.grid{stroke:#ddd;stroke-width:1}.title{font-size:16px;font-weight:bold}</style>\n", f);
    fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", w, h);
}

char *rp_svg_close(FILE *f, char **out)
{
    fputs("</svg>\n", f);
    fclose(f); /* sets *out */
    return *out;
}

/* The legend's room: enough for the longest config name (about 7 px a character). */
static int legend_width(const rp_line *lines, int n_lines)
{
    int w = LEGEND;
    for (int l = 0; l < n_lines; l++) {
        int need = 7 * (int)strlen(lines[l].label) + 56;
        w = need > w ? need : w;
    }
    return w;
}

static rp_axes fit_axes(const rp_line *lines, int n_lines)
{
    rp_axes a = {INFINITY, -INFINITY, 0, 0, LEFT, W - legend_width(lines, n_lines), TOP, BOTTOM, 0};
    double lo = INFINITY, hi = -INFINITY;
    for (int l = 0; l < n_lines; l++)
        for (int i = 0; i < lines[l].band->n; i++) {
            const rp_band *b = lines[l].band;
            a.x0 = fmin(a.x0, b->x[i]), a.x1 = fmax(a.x1, b->x[i]);
            lo = fmin(lo, b->lo[i]), hi = fmax(hi, b->hi[i]);
        }
    if (!(a.x0 <= a.x1)) a.x0 = 0, a.x1 = 1;
    if (a.x1 == a.x0) a.x0 -= 1, a.x1 += 1;
    rp_axes_fit_y(&a, lo, hi);
    return a;
}

static void polyline(FILE *f, const rp_axes *a, const rp_band *b, const char *colour, const char *attrs)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" %s points=\"", colour, attrs);
    for (int i = 0; i < b->n; i++) fprintf(f, "%.1f,%.1f ", rp_px(a, b->x[i]), rp_py(a, b->mean[i]));
    fputs("\"/>\n", f);
}

/* Each seed thin, and its lowest point as a ring: where best.safetensors was kept. */
static void seed_lines(FILE *f, const rp_axes *a, const rp_line *l)
{
    const char *colour = rp_colour(l->color);
    for (int k = 0; k < l->n_seeds && l->n_seeds > 1; k++) /* one seed is its own mean */
        polyline(f, a, &l->seeds[k], colour, "stroke-width=\"1\" stroke-opacity=\"0.55\" class=\"seed\"");
    for (int k = 0; l->best_x && k < l->n_seeds; k++)
        if (isfinite(l->best_y[k]))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
                       "class=\"best\"/>\n", rp_px(a, l->best_x[k]), rp_py(a, l->best_y[k]), colour);
}

static void band_and_line(FILE *f, const rp_axes *a, const rp_band *b, const char *colour)
{
    if (b->n == 1) {
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", rp_px(a, b->x[0]),
                rp_py(a, b->mean[0]), colour);
        return;
    }
    fprintf(f, "<polygon fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" points=\"", colour);
    for (int i = 0; i < b->n; i++) fprintf(f, "%.1f,%.1f ", rp_px(a, b->x[i]), rp_py(a, b->hi[i]));
    for (int i = b->n - 1; i >= 0; i--) fprintf(f, "%.1f,%.1f ", rp_px(a, b->x[i]), rp_py(a, b->lo[i]));
    fputs("\"/>\n", f);
    polyline(f, a, b, colour, "stroke-width=\"2.5\" class=\"mean\"");
    if (b->n > 30) return; /* markers only where points are few, e.g. one per epoch */
    for (int i = 0; i < b->n; i++)
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", rp_px(a, b->x[i]), rp_py(a, b->mean[i]),
                colour);
}

/* The configs' colours, then what thin lines and rings are. */
static void legend(FILE *f, const rp_axes *a, const rp_line *lines, int n_lines)
{
    int y = TOP + 8, seeds = 0, best = 0;
    char attrs[96];
    for (int l = 0; l < n_lines; l++, y += 22) {
        fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"18\" height=\"4\" fill=\"%s\"/>", a->right + 16, y,
                rp_colour(lines[l].color));
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">", a->right + 42, y + 6);
        rp_put_escaped(f, lines[l].label);
        fputs("</text>\n", f);
        seeds |= lines[l].n_seeds > 1, best |= lines[l].best_x != NULL;
    }
    if (seeds) {
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#555\" stroke-width=\"1\"/>",
                a->right + 16, y + 2, a->right + 34, y + 2);
        snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%d\"", a->right + 42, y + 6);
        rp_svg_text(f, attrs, "one seed (thick: mean)");
        y += 22;
    }
    if (best) {
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%d\" r=\"6\" fill=\"none\" stroke=\"#555\" stroke-width=\"2\"/>",
                a->right + 25, y + 2);
        snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%d\"", a->right + 42, y + 6);
        rp_svg_text(f, attrs, "best epoch of a seed");
    }
}

char *rp_svg_plot(const char *title, const char *ylabel, const rp_line *lines, int n_lines, int standalone)
{
    char *out = NULL, attrs[64];
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    rp_axes a = fit_axes(lines, n_lines);
    rp_svg_open(f, W, H, standalone);
    rp_axes_draw(f, &a, 1, "optimiser step", ylabel);
    snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"24\" class=\"title\"", LEFT);
    rp_svg_text(f, attrs, title);
    for (int l = 0; l < n_lines; l++) {
        band_and_line(f, &a, lines[l].band, rp_colour(lines[l].color));
        seed_lines(f, &a, &lines[l]);
    }
    legend(f, &a, lines, n_lines);
    return rp_svg_close(f, &out);
}
