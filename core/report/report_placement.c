/* Where the models put the cells: per config (its first seed) one held-out
 * set from the run's placement.csv (docs/evaluation.md), the true positions
 * beside the placed ones on one scale, coloured by the cell's label. A
 * ring where the truth is a strip shows here at a glance; no metric says it
 * as plainly. A file that cannot be read is named, never fatal. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/csv.h"
#include "report_internal.h"

enum { PANEL = 320, GAP = 40, LEFT = 20, TITLE = 36, ROW_HEAD = 46, ROW_GAP = 24, LEGEND_W = 220 };
enum { MAX_CELLS = 4000 }; /* drawn per set: more is a blot, and megabytes of SVG */

static const char *const columns[] = {"set", "cell", "label", "true_x", "true_y",
                                      "true_z", "placed_x", "placed_y", "placed_z"};
enum { N_COLUMNS = 9 };

static void push_cell(rp_placement *p, const char *cell, const double v[4], int label)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 256;
        p->cell = ast_xrealloc(p->cell, (size_t)p->cap * sizeof *p->cell);
        p->tx = ast_xrealloc(p->tx, (size_t)p->cap * sizeof *p->tx);
        p->ty = ast_xrealloc(p->ty, (size_t)p->cap * sizeof *p->ty);
        p->px = ast_xrealloc(p->px, (size_t)p->cap * sizeof *p->px);
        p->py = ast_xrealloc(p->py, (size_t)p->cap * sizeof *p->py);
        p->label = ast_xrealloc(p->label, (size_t)p->cap * sizeof *p->label);
    }
    p->cell[p->n] = ast_xstrdup(cell);
    p->tx[p->n] = v[0], p->ty[p->n] = v[1], p->px[p->n] = v[2], p->py[p->n] = v[3], p->label[p->n] = label;
    p->n++;
}

static int number(const char *text, double *out)
{
    char *end;
    *out = strtod(text, &end);
    return end != text && !*end && isfinite(*out);
}

/* One row into p when it is of the first set; 0 if it is not a row of placement.csv. */
static int read_row(rp_placement *p, char *line, ast_strlist *labels, char *set, size_t set_n)
{
    char *f[N_COLUMNS];
    double v[4];
    if (ast_csv_split(line, f, N_COLUMNS) != N_COLUMNS || !number(f[3], &v[0]) || !number(f[4], &v[1]) ||
        !number(f[6], &v[2]) || !number(f[7], &v[3]))
        return 0;
    if (!set[0]) snprintf(set, set_n, "%s", f[0]);
    if (strcmp(set, f[0])) return 1; /* one set is enough to see the shape */
    if (p->n == MAX_CELLS) {
        p->left_out++;
        return 1;
    }
    int label = -1;
    if (f[2][0]) {
        label = ast_strlist_find(labels, f[2]);
        if (label < 0) ast_strlist_push(labels, f[2]), label = labels->n - 1;
    }
    push_cell(p, f[1], v, label);
    return 1;
}

static int header_ok(char *line)
{
    char *f[N_COLUMNS];
    if (ast_csv_split(line, f, N_COLUMNS) != N_COLUMNS) return 0;
    for (int i = 0; i < N_COLUMNS; i++)
        if (strcmp(f[i], columns[i])) return 0;
    return 1;
}

/* Run r's placement.csv into p; returns 0, or -1 when it has none or none that can be drawn (why in
 * `why`, and in it too what was skipped). */
static int read_placement(const rp_sweep *s, const rp_run *r, rp_placement *p, ast_strlist *labels, char *why,
                          size_t n)
{
    char path[4096], set[64] = "";
    rp_run_file(r, s->dir, "placement.csv", path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) return -1; /* an older run, or pos_to_expr: nothing to say */
    char *line = NULL;
    size_t cap = 0;
    int bad = 0, ok = getline(&line, &cap, f) > 0 && header_ok(line);
    while (ok && getline(&line, &cap, f) > 0) bad += !read_row(p, line, labels, set, sizeof set);
    free(line);
    fclose(f);
    if (!ok || !p->n) snprintf(why, n, "%s: not the columns of placement.csv, or no cell; not drawn", path);
    else if (bad) snprintf(why, n, "%s: %d unreadable rows skipped", path, bad);
    return ok && p->n ? 0 : -1;
}

/* The labels in alphabetical order, for the legend, and the cells' indices with them. */
static void sort_labels(rp_placement *p, int n, ast_strlist *labels)
{
    ast_strlist sorted = {0};
    for (int i = 0; i < labels->n; i++) ast_strlist_insert_sorted(&sorted, labels->v[i]);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < p[i].n; k++)
            if (p[i].label[k] >= 0) p[i].label[k] = ast_strlist_find(&sorted, labels->v[p[i].label[k]]);
    ast_strlist_free(labels);
    *labels = sorted;
}

int rp_placements_read(const rp_sweep *s, rp_placement **out, ast_strlist *labels, ast_strlist *notes)
{
    char why[4300];
    int n = 0;
    *out = ast_xcalloc((size_t)s->n_configs + 1, sizeof **out);
    for (int c = 0; c < s->n_configs; c++)
        for (int i = 0; i < s->configs[c].n_runs; i++) {
            const rp_run *r = &s->runs[s->configs[c].runs[i]];
            rp_placement *p = &(*out)[n];
            *p = (rp_placement){.config = s->configs[c].name, .run = r->id, .seed = r->seed};
            why[0] = '\0';
            int rc = read_placement(s, r, p, labels, why, sizeof why);
            if (why[0]) ast_strlist_push(notes, why);
            if (rc == 0) {
                n++;
                break;
            }
            rp_placements_free(p, 1);
        }
    sort_labels(*out, n, labels);
    return n;
}

void rp_placements_free(rp_placement *p, int n)
{
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < p[i].n; k++) free(p[i].cell[k]);
        free(p[i].cell), free(p[i].tx), free(p[i].ty), free(p[i].px), free(p[i].py), free(p[i].label);
        memset(&p[i], 0, sizeof p[i]);
    }
}

/* One square for both panels of a row: a placement at the wrong scale looks it. */
typedef struct square {
    double cx, cy, half;
} square;

static square square_of(const rp_placement *p)
{
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (int i = 0; i < p->n; i++) {
        lo[0] = fmin(lo[0], fmin(p->tx[i], p->px[i])), hi[0] = fmax(hi[0], fmax(p->tx[i], p->px[i]));
        lo[1] = fmin(lo[1], fmin(p->ty[i], p->py[i])), hi[1] = fmax(hi[1], fmax(p->ty[i], p->py[i]));
    }
    double half = 0.54 * fmax(hi[0] - lo[0], hi[1] - lo[1]);
    return (square){(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, half > 0 ? half : 1.0};
}

static void points(FILE *f, const rp_placement *p, const double *x, const double *y, square sq, double left, double top)
{
    double k = PANEL / (2 * sq.half);
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#999\"/>\n", left, top,
            PANEL, PANEL);
    for (int i = 0; i < p->n; i++) /* y up, as a plot of coordinates has it */
        fprintf(f, "<circle class=\"cell\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.6\" fill=\"%s\" fill-opacity=\"0.85\"/>\n",
                left + PANEL / 2.0 + k * (x[i] - sq.cx), top + PANEL / 2.0 - k * (y[i] - sq.cy),
                p->label[i] < 0 ? "#444" : rp_colour(p->label[i]));
}

static void row(FILE *f, const rp_placement *p, double top)
{
    char attrs[128], text[600];
    square sq = square_of(p);
    int used = snprintf(text, sizeof text, "%s, seed %lld (%s): %d cells of one held-out set", p->config, p->seed,
                        p->run, p->n + p->left_out);
    if (p->left_out) snprintf(text + used, sizeof text - (size_t)used, ", the first %d drawn", p->n);
    snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"%.1f\" font-weight=\"bold\"", LEFT, top + 16);
    rp_svg_text(f, attrs, text);
    double y = top + ROW_HEAD;
    snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\"", LEFT + PANEL / 2.0, y - 4);
    rp_svg_text(f, attrs, "true");
    snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\"", LEFT + PANEL + GAP + PANEL / 2.0, y - 4);
    rp_svg_text(f, attrs, "placed (rotated onto the truth, not scaled)");
    points(f, p, p->tx, p->ty, sq, LEFT, y + 4);
    points(f, p, p->px, p->py, sq, LEFT + PANEL + GAP, y + 4);
}

static void labels_legend(FILE *f, const ast_strlist *labels, double left)
{
    char attrs[96];
    for (int i = 0; i < labels->n; i++) {
        double y = TITLE + ROW_HEAD + 14 + 20 * i;
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\"/>", left + 8, y - 4, rp_colour(i));
        snprintf(attrs, sizeof attrs, "x=\"%.1f\" y=\"%.1f\"", left + 20, y);
        rp_svg_text(f, attrs, labels->v[i]);
    }
}

char *rp_svg_placement(const rp_placement *p, int n, const ast_strlist *labels, int standalone)
{
    char *out = NULL, attrs[64];
    size_t len = 0;
    int pairs = LEFT + 2 * PANEL + GAP, w = pairs + (labels->n ? LEGEND_W : LEFT);
    int row_h = ROW_HEAD + PANEL + 8 + ROW_GAP, h = TITLE + n * row_h;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    rp_svg_open(f, w, h, standalone);
    snprintf(attrs, sizeof attrs, "x=\"%d\" y=\"24\" class=\"title\"", LEFT);
    rp_svg_text(f, attrs, "placed vs true, x-y");
    for (int i = 0; i < n; i++) row(f, &p[i], TITLE + i * row_h);
    labels_legend(f, labels, pairs + 10);
    return rp_svg_close(f, &out);
}

char *rp_csv_placement(const rp_placement *p, int n, const ast_strlist *labels)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    AST_ASSERT(f, "open_memstream failed");
    fputs("config,run,seed,cell,label,true_x,true_y,placed_x,placed_y\n", f);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < p[i].n; k++) {
            ast_csv_field(f, p[i].config), fputc(',', f), ast_csv_field(f, p[i].run);
            fprintf(f, ",%lld,", p[i].seed);
            ast_csv_field(f, p[i].cell[k]), fputc(',', f);
            ast_csv_field(f, p[i].label[k] < 0 ? "" : labels->v[p[i].label[k]]);
            fprintf(f, ",%.10g,%.10g,%.10g,%.10g\n", p[i].tx[k], p[i].ty[k], p[i].px[k], p[i].py[k]);
        }
    fclose(f);
    return out;
}
