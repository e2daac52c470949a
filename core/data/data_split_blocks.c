/* Regions of one slice for the held-out protocols: interleaved blocks of a
 * grid, and z-sections of a 3-D tissue. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_split.h"

enum { SHRINK_STEPS = 8, MAX_BLOCKS_PER_AXIS = 4096 };

int64_t split_block_target(double val, double test, int64_t n)
{
    double smallest = 1.0;
    if (val > 0) smallest = fmin(smallest, val);
    if (test > 0) smallest = fmin(smallest, test);
    int64_t target = (int64_t)ceil(5.0 / smallest);
    return target < n ? target : n > 0 ? n : 1;
}

typedef struct grid {
    float lo[3];
    double side;
    int64_t nb[3]; /* blocks along each axis; 1 along an axis the slice is flat in */
} grid;

static void grid_set(grid *g, const float lo[3], const float hi[3], double side)
{
    g->side = side;
    for (int k = 0; k < 3; k++) {
        g->lo[k] = lo[k];
        g->nb[k] = (int64_t)fmin((hi[k] - lo[k]) / side, MAX_BLOCKS_PER_AXIS - 1) + 1;
    }
}

static int64_t block_of(const grid *g, const float *p)
{
    int64_t id = 0;
    for (int k = 2; k >= 0; k--) {
        int64_t i = (int64_t)((p[k] - g->lo[k]) / g->side);
        id = id * g->nb[k] + (i < 0 ? 0 : i >= g->nb[k] ? g->nb[k] - 1 : i);
    }
    return id;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* ids [n]: each cell's block; into distinct (sorted), returns their number. */
static int64_t blocks(const ast_dataset *d, const ast_keyed *cells, int64_t n, const grid *g, int64_t *ids,
                      int64_t *distinct)
{
    for (int64_t i = 0; i < n; i++) ids[i] = distinct[i] = block_of(g, d->pos + cells[i].cell * 3);
    qsort(distinct, (size_t)n, sizeof *distinct, cmp_i64);
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || distinct[i] != distinct[m - 1]) distinct[m++] = distinct[i];
    return m;
}

/* The side of the box's volume over `target`, shrunk while tissue that
 * fills its box only in part occupies too few blocks. */
static int64_t fit_grid(const ast_dataset *d, const ast_keyed *cells, int64_t n, int64_t target, grid *g,
                        int64_t *ids, int64_t *distinct)
{
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            float v = d->pos[cells[i].cell * 3 + k];
            lo[k] = fminf(lo[k], v), hi[k] = fmaxf(hi[k], v);
        }
    int dims = 0;
    double volume = 1.0;
    for (int k = 0; k < 3; k++)
        if (hi[k] > lo[k]) dims++, volume *= hi[k] - lo[k];
    grid_set(g, lo, hi, dims ? pow(volume / (double)target, 1.0 / dims) : 1.0);
    int64_t m = blocks(d, cells, n, g, ids, distinct);
    for (int step = 0; dims && step < SHRINK_STEPS && m < target; step++) {
        grid_set(g, lo, hi, g->side * pow((double)m / (double)target, 1.0 / dims));
        m = blocks(d, cells, n, g, ids, distinct);
    }
    return m;
}

void split_rank_blocks(const ast_dataset *d, ast_keyed *cells, int64_t n, int64_t target, ast_rng *rng)
{
    if (n < 1) return;
    grid g;
    int64_t *ids = ast_xmalloc((size_t)n * sizeof *ids), *distinct = ast_xmalloc((size_t)n * sizeof *distinct);
    int64_t m = fit_grid(d, cells, n, target, &g, ids, distinct);
    int64_t *rank = ast_xmalloc((size_t)m * sizeof *rank);
    for (int64_t j = 0; j < m; j++) rank[j] = j;
    for (int64_t j = m - 1; j > 0; j--) { /* Fisher-Yates */
        int64_t r = (int64_t)(ast_rng_next(rng) % (uint64_t)(j + 1)), t = rank[j];
        rank[j] = rank[r], rank[r] = t;
    }
    for (int64_t i = 0; i < n; i++) {
        const int64_t *at = bsearch(&ids[i], distinct, (size_t)m, sizeof *distinct, cmp_i64);
        cells[i].key = (float)rank[at - distinct]; /* exact: fewer blocks than 2^24 */
    }
    free(ids), free(distinct), free(rank);
}

/* K z-ranges of equal cell counts of d's one slice. */
static int *z_sections(const ast_dataset *d, int K, ast_error *e)
{
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t c = 0; c < d->n_cells; c++) lo = fminf(lo, d->pos[c * 3 + 2]), hi = fmaxf(hi, d->pos[c * 3 + 2]);
    if (d->n_slices != 1 || !(hi > lo) || K > d->n_cells) {
        ast_error_set(e, "%s: data.sections_from_z: %d z-sections cut one 3-D slice of at least as many cells, and "
                      "this data has %d slice%s, %s z extent and %lld cells; set data.sections_from_z: 0 (the "
                      "sections are then the slices)", d->source, K, d->n_slices, d->n_slices == 1 ? "" : "s",
                      hi > lo ? "a" : "no", (long long)d->n_cells);
        return NULL;
    }
    ast_keyed *order = ast_xmalloc((size_t)d->n_cells * sizeof *order);
    for (int64_t c = 0; c < d->n_cells; c++) order[c] = (ast_keyed){d->pos[c * 3 + 2], c};
    qsort(order, (size_t)d->n_cells, sizeof *order, ast_cmp_keyed);
    int *section = ast_xmalloc((size_t)d->n_cells * sizeof *section);
    for (int64_t i = 0; i < d->n_cells; i++) section[order[i].cell] = (int)(i * K / d->n_cells);
    free(order);
    return section;
}

int *split_sections_of(const ast_dataset *d, const ast_split_opts *o, ast_error *e)
{
    if (o->sections_from_z > 0) return z_sections(d, o->sections_from_z, e);
    int *section = ast_xmalloc((size_t)(d->n_cells ? d->n_cells : 1) * sizeof *section);
    memcpy(section, d->slice, (size_t)d->n_cells * sizeof *section);
    return section;
}
