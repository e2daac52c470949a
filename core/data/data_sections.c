/* Sections merged by accident. Without data.slice_key every cell is one
 * tissue; a file that holds several sections, each in coordinates of its
 * own, then trains with the sections lying on top of each other, and the
 * only sign was "1 set" in the log. An obs column whose groups lie on top
 * of each other that way is an error naming it and the fix.
 *
 * On top of each other, not side by side or mixed: cells of a section keep
 * their distance (they do not overlap), so each section on its own is a
 * regular pattern, its nearest-neighbour distance about its spacing; and
 * the cells of another section, placed independently, come closer than
 * that. Groups of one tissue fail one test or the other: cell types or
 * clusters that are few keep the tissue's spacing from each other, and
 * many of them are each a thinned, irregular pattern. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_labels.h"

enum {
    MAX_SECTIONS = 16, /* a column of more values is no column of sections */
    MIN_CELLS = 10,    /* per group, for medians that mean something */
    SAMPLE = 400,      /* cells looked at per group */
    MAX_RING = 6,      /* grid rings searched around a cell: about 6 spacings */
};
#define OVERLAP_RATIO 0.75 /* median nearest other / median nearest own, in every group */
#define REGULARITY 0.6     /* median nearest own x sqrt(density) at least: ~0.5 random, ~1 a grid */

/* The cells bucketed on a grid over x, y, about one cell per bin. */
typedef struct grid {
    double x0, y0, side;
    int nx, ny;
    int64_t *start; /* [nx * ny + 1]: bin b holds cells[start[b] .. start[b + 1]) */
    int64_t *cells;
} grid;

static int clampi(double v, int n) { return v < 0 ? 0 : v >= n ? n - 1 : (int)v; }

static int bin_x(const grid *g, const float *p) { return clampi((p[0] - g->x0) / g->side, g->nx); }
static int bin_y(const grid *g, const float *p) { return clampi((p[1] - g->y0) / g->side, g->ny); }
static size_t bin_of(const grid *g, const float *p) { return (size_t)bin_y(g, p) * (size_t)g->nx + (size_t)bin_x(g, p); }

static void grid_build(grid *g, const ast_dataset *d)
{
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (int64_t c = 0; c < d->n_cells; c++)
        for (int k = 0; k < 2; k++) lo[k] = fmin(lo[k], d->pos[c * 3 + k]), hi[k] = fmax(hi[k], d->pos[c * 3 + k]);
    double w = hi[0] - lo[0], h = hi[1] - lo[1], side = sqrt(w * h / (double)d->n_cells);
    if (!(side > 0)) side = fmax(w, h) / (double)d->n_cells; /* cells on a line */
    if (!(side > 0)) side = 1.0;                             /* or on one point */
    /* at most 2048 x 2048 bins: bins grow on a very elongated box */
    side = fmax(side, fmax(w, h) / 2048.0);
    *g = (grid){lo[0], lo[1], side, (int)(w / side) + 1, (int)(h / side) + 1, NULL, NULL};
    size_t bins = (size_t)g->nx * (size_t)g->ny;
    g->start = ast_xcalloc(bins + 1, sizeof *g->start);
    g->cells = ast_xmalloc((size_t)d->n_cells * sizeof *g->cells);
    for (int64_t c = 0; c < d->n_cells; c++) g->start[bin_of(g, d->pos + c * 3) + 1]++;
    for (size_t b = 0; b < bins; b++) g->start[b + 1] += g->start[b];
    int64_t *fill = ast_xmalloc(bins * sizeof *fill);
    memcpy(fill, g->start, bins * sizeof *fill);
    for (int64_t c = 0; c < d->n_cells; c++) g->cells[fill[bin_of(g, d->pos + c * 3)]++] = c;
    free(fill);
}

static void grid_free(grid *g) { free(g->start), free(g->cells); }

static double dist(const float *a, const float *b)
{
    double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
    return sqrt(dx * dx + dy * dy + dz * dz);
}

/* The distances from cell c to its nearest cell of its own group and of
 * another, searched ring by ring; INFINITY when none is within MAX_RING. */
static void nearest(const grid *g, const ast_dataset *d, const int *label, int64_t c, double *own, double *other)
{
    const float *p = d->pos + c * 3;
    int bx = bin_x(g, p), by = bin_y(g, p);
    *own = *other = INFINITY;
    for (int r = 0; r <= MAX_RING; r++) {
        for (int y = by - r; y <= by + r; y++)
            for (int x = bx - r; x <= bx + r; x++) {
                if (x < 0 || y < 0 || x >= g->nx || y >= g->ny || (abs(x - bx) != r && abs(y - by) != r)) continue;
                size_t b = (size_t)y * (size_t)g->nx + (size_t)x;
                for (int64_t k = g->start[b]; k < g->start[b + 1]; k++) {
                    int64_t q = g->cells[k];
                    double *best = label[q] == label[c] ? own : other;
                    if (q != c) *best = fmin(*best, dist(p, d->pos + q * 3));
                }
            }
        /* cells beyond ring r are at least r bins away */
        if (*own <= r * g->side && *other <= r * g->side) return;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* The cells per unit area of group k's bounding box in x, y. */
static double density(const ast_dataset *d, const int *label, int k, int64_t count)
{
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    for (int64_t c = 0; c < d->n_cells; c++)
        for (int a = 0; a < 2 && label[c] == k; a++)
            lo[a] = fmin(lo[a], d->pos[c * 3 + a]), hi[a] = fmax(hi[a], d->pos[c * 3 + a]);
    return (double)count / ((hi[0] - lo[0]) * (hi[1] - lo[1]));
}

/* Do the groups lie on top of each other: is every group a regular
 * pattern whose cells have another group's nearer than their own?
 * counts[k] cells have label k. */
static int on_top_of_each_other(const grid *g, const ast_dataset *d, const int *label, const int64_t *counts, int n)
{
    double own[SAMPLE], other[SAMPLE];
    int yes = 1;
    for (int k = 0; yes && k < n; k++) {
        int64_t stride = counts[k] > SAMPLE ? counts[k] / SAMPLE : 1, seen = 0;
        int m = 0;
        for (int64_t c = 0; c < d->n_cells && m < SAMPLE; c++)
            if (label[c] == k && seen++ % stride == 0) nearest(g, d, label, c, &own[m], &other[m]), m++;
        double mine = median(own, m);
        yes = isfinite(mine) && mine * sqrt(density(d, label, k, counts[k])) >= REGULARITY &&
              median(other, m) < OVERLAP_RATIO * mine;
    }
    return yes;
}

/* The group sizes of a column that could hold sections: 2 to MAX_SECTIONS
 * values, none missing, each with MIN_CELLS cells or more; else 0. */
static int section_counts(const int *label, int64_t n_cells, int n, int64_t *counts)
{
    if (n < 2 || n > MAX_SECTIONS) return 0;
    memset(counts, 0, (size_t)n * sizeof *counts);
    for (int64_t c = 0; c < n_cells; c++) {
        if (label[c] < 0) return 0;
        counts[label[c]]++;
    }
    for (int k = 0; k < n; k++)
        if (counts[k] < MIN_CELLS) return 0;
    return 1;
}

/* A number column's distinct values stop mattering past MAX_SECTIONS:
 * labelling every cell of a coordinate column would only be thrown away. */
static int few_values(const ast_obs_column *col, int64_t n_cells)
{
    if (col->kind != AST_OBS_NUMBER) return col->n_categories <= MAX_SECTIONS;
    double seen[MAX_SECTIONS];
    int n = 0;
    for (int64_t c = 0; c < n_cells; c++) {
        int k = 0;
        while (k < n && seen[k] != col->numbers[c]) k++; /* NaN is new each time: missing values end it */
        if (k < n) continue;
        if (n == MAX_SECTIONS) return 0;
        seen[n++] = col->numbers[c];
    }
    return 1;
}

static void sections_error(const ast_dataset *d, const char *column, char *const *names, int n, ast_error *e)
{
    char list[256] = "";
    for (int k = 0; k < n && strlen(list) < 200; k++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", k ? ", " : "", names[k]);
    ast_error_set(e, "%s: obs column '%s' looks like %d sections, each in coordinates of its own (%s): their cells "
                  "lie on top of each other, and with no data.slice_key they would train as one tissue; set "
                  "data.slice_key: %s (or data.detect_sections: false if they are one tissue)",
                  d->source ? d->source : "the dataset", column, n, list, column);
}

int ast_data_check_sections(const ast_dataset *d, const ast_data_opts *o, ast_error *e)
{
    if (o->slice_key || !o->detect_sections || !d->pos) return 0;
    grid g = {0};
    int rc = 0;
    for (int j = 0; !rc && j < d->n_obs; j++) {
        const ast_obs_column *col = &d->obs[j];
        if ((o->cell_type_key && !strcmp(col->name, o->cell_type_key)) || !few_values(col, d->n_cells)) continue;
        char **names;
        int n;
        int *label = ast_labels_of_column(col, d->n_cells, &names, &n);
        int64_t counts[MAX_SECTIONS];
        if (section_counts(label, d->n_cells, n, counts)) {
            if (!g.start) grid_build(&g, d);
            if (on_top_of_each_other(&g, d, label, counts, n)) {
                sections_error(d, col->name, names, n, e);
                rc = -1;
            }
        }
        for (int k = 0; k < n; k++) free(names[k]);
        free(names), free(label);
    }
    grid_free(&g);
    return rc;
}
