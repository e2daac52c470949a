/* The routing heatmaps: per config a block with a column per seed and a
 * row per layer, each an experts x diffusion-time buckets grid of cells
 * with the share printed in them. The colour is the share against an even
 * split (1/experts): white when even, blue below, orange above, full at 0
 * and at twice the even share, so an expert that the model uses more at
 * some diffusion times than at others shows as a row that changes colour. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report_internal.h"

enum {
    CELL_W = 58, CELL_H = 24,
    TITLE = 36,    /* the figure's title */
    LEFT = 96,     /* the layer labels */
    EXPERT_W = 30, /* each panel's expert labels */
    GAP = 22,      /* between panels */
    HEAD = 64,     /* a block's config name, seed and bucket headers */
    LEGEND_H = 70
};

/* White to blue (#0072B2) or orange (#D55E00) by d in [-1, 1]. */
static void colour_of(double d, char *buf, size_t n)
{
    static const int blue[3] = {0x00, 0x72, 0xB2}, orange[3] = {0xD5, 0x5E, 0x00};
    const int *to = d < 0 ? blue : orange;
    double t = fmin(1.0, fabs(d));
    int rgb[3];
    for (int i = 0; i < 3; i++) rgb[i] = (int)lround(255 + t * (to[i] - 255));
    snprintf(buf, n, "#%02X%02X%02X", rgb[0], rgb[1], rgb[2]);
}

/* The share against an even split, -1 (none) .. 0 (even) .. 1 (twice even or more). */
static double deviation(double share, int experts) { return fmax(-1.0, fmin(1.0, share * experts - 1.0)); }

static int panel_w(const rp_routing_grid *g) { return EXPERT_W + g->buckets * CELL_W; }
static int block_h(const rp_routing_grid *g) { return HEAD + g->layers * (g->experts * CELL_H + GAP); }

static void cell(FILE *f, double x, double y, double share, int experts)
{
    char fill[8];
    double d = deviation(share, experts);
    colour_of(d, fill, sizeof fill);
    fprintf(f, "<rect class=\"cell\" x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"%s\" stroke=\"#fff\"/>", x,
            y, CELL_W, CELL_H, fill);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\" fill=\"%s\">%.2f</text>\n",
            x + CELL_W / 2.0, y + CELL_H / 2.0 + 4, fabs(d) > 0.6 ? "#fff" : "#222", share);
}

static void panel(FILE *f, const rp_routing_grid *g, int run, int layer, double x, double y)
{
    for (int e = 0; e < g->experts; e++) {
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"12\">e%d</text>", x + EXPERT_W - 4,
                y + e * CELL_H + CELL_H / 2.0 + 4, e);
        for (int b = 0; b < g->buckets; b++) {
            double share = rp_routing_share(g, run, layer, e, b);
            if (!isnan(share)) cell(f, x + EXPERT_W + b * CELL_W, y + e * CELL_H, share, g->experts);
        }
    }
}

/* Above each seed's column: the seed, then the buckets' ranges of t. */
static void headers(FILE *f, const rp_routing_grid *g, double x, double y)
{
    char attrs[96], text[64];
    for (int r = 0; r < g->runs; r++) {
        double px = x + r * (panel_w(g) + GAP) + EXPERT_W;
        snprintf(text, sizeof text, "seed %lld", g->seed[r]);
        snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\"", px + g->buckets * CELL_W / 2.0,
                 y);
        rp_svg_text(f, attrs, text);
        for (int b = 0; b < g->buckets; b++) {
            snprintf(text, sizeof text, "%.2g–%.2g", (double)b / g->buckets, (double)(b + 1) / g->buckets);
            snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"11\" fill=\"#555\"",
                     px + (b + 0.5) * CELL_W, y + 18);
            rp_svg_text(f, attrs, text);
        }
    }
}

static void block(FILE *f, const rp_routing_grid *g, double y)
{
    char attrs[96], text[64];
    snprintf(attrs, sizeof attrs, "x=\"12\" y=\"%.1f\" font-weight=\"bold\" fill=\"%s\"", y + 20, rp_colour(g->color));
    rp_svg_text(f, attrs, g->config);
    snprintf(attrs, sizeof attrs, "x=\"12\" y=\"%.1f\" font-size=\"11\" fill=\"#555\"", y + 58);
    rp_svg_text(f, attrs, "diffusion time t");
    headers(f, g, LEFT, y + 40);
    for (int l = 0; l < g->layers; l++) {
        double top = y + HEAD + l * (g->experts * CELL_H + GAP);
        snprintf(text, sizeof text, "layer %d", l);
        snprintf(attrs, sizeof attrs, "x=\"12\" y=\"%.1f\"", top + g->experts * CELL_H / 2.0 + 4);
        rp_svg_text(f, attrs, text);
        for (int r = 0; r < g->runs; r++) panel(f, g, r, l, LEFT + r * (panel_w(g) + GAP), top);
    }
}

/* Swatches from no tokens through an even split to twice it. */
static void legend(FILE *f, double y)
{
    static const char *const marks[3][2] = {{"none", "start"}, {"even split", "middle"}, {"twice even or more", "end"}};
    char fill[8], attrs[96];
    for (int i = 0; i <= 8; i++) {
        colour_of(i / 4.0 - 1.0, fill, sizeof fill);
        fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"30\" height=\"14\" fill=\"%s\" stroke=\"#ccc\"/>", LEFT + 30 * i, y,
                fill);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"12\"", LEFT + 135 * i, y + 30,
                 marks[i][1]);
        rp_svg_text(f, attrs, marks[i][0]);
    }
    snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"%.1f\"", LEFT + 290, y + 12);
    rp_svg_text(f, attrs, "an expert's share of the bucket's tokens");
}

char *rp_svg_routing(const rp_routing_grid *g, int n, int standalone)
{
    int w = 600, h = TITLE + LEGEND_H;
    for (int i = 0; i < n; i++) {
        int need = LEFT + g[i].runs * (panel_w(&g[i]) + GAP);
        w = need > w ? need : w;
        h += block_h(&g[i]);
    }
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    rp_svg_open(f, w, h, standalone);
    rp_svg_text(f, "x=\"12\" y=\"24\" class=\"title\"", "routing by diffusion time");
    double y = TITLE;
    for (int i = 0; i < n; i++) block(f, &g[i], y), y += block_h(&g[i]);
    legend(f, y + 10);
    return rp_svg_close(f, &out);
}
