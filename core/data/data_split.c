/* The held-out protocols (alphast/data.h, ast_split_kind): slabs, blocks,
 * random cells and whole sections dealt by the ratios, or the user's own
 * split read from an obs column (data_split_key.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_keyed.h"
#include "data/data_split.h"

static const char *const kind_names[] = {"auto", "slab", "blocks", "random", "sections", "key"};

const char *ast_split_kind_name(ast_split_kind k) { return kind_names[k]; }

int ast_split_kind_parse(const char *s, ast_split_kind *out)
{
    int i = ast_name_index(s, kind_names, (int)(sizeof kind_names / sizeof kind_names[0]));
    if (i >= 0) *out = (ast_split_kind)i;
    return i < 0 ? -1 : 0;
}

void ast_split_free(ast_split s[3])
{
    for (int i = 0; i < 3; i++) {
        free(s[i].cells);
        s[i] = (ast_split){0};
    }
}

void split_push(ast_split *s, int64_t cell)
{
    if ((s->n & (s->n - 1)) == 0) s->cells = ast_xrealloc(s->cells, (size_t)(s->n ? 2 * s->n : 1) * sizeof *s->cells);
    s->cells[s->n++] = cell;
}

/* The sections whole-section protocols hold out: K z-ranges of one slice
 * with data.sections_from_z, else the slices. */
static int section_count(const ast_dataset *d, const ast_split_opts *o)
{
    return o->sections_from_z > 0 && d->n_slices == 1 ? o->sections_from_z : d->n_slices;
}

ast_split_kind ast_split_resolve(const ast_dataset *d, const ast_split_opts *o)
{
    if (o->kind != AST_SPLIT_AUTO) return o->kind;
    return section_count(d, o) >= 3 ? AST_SPLIT_SECTIONS : AST_SPLIT_SLAB;
}

/* The cells of one slice, keys unset. */
static ast_keyed *slice_cells(const ast_dataset *d, int slice, int64_t *n)
{
    int64_t m = 0;
    for (int64_t c = 0; c < d->n_cells; c++) m += d->slice[c] == slice;
    ast_keyed *order = ast_xmalloc((size_t)(m ? m : 1) * sizeof *order);
    *n = 0;
    for (int64_t c = 0; c < d->n_cells; c++)
        if (d->slice[c] == slice) order[(*n)++] = (ast_keyed){0.0f, c};
    return order;
}

static void bounding_box(const ast_dataset *d, const ast_keyed *cells, int64_t n, float lo[3], float hi[3])
{
    for (int k = 0; k < 3; k++) lo[k] = INFINITY, hi[k] = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            float v = d->pos[cells[i].cell * 3 + k];
            lo[k] = fminf(lo[k], v), hi[k] = fmaxf(hi[k], v);
        }
}

/* Deals cells in order: the first 1 - val - test of them to train, then
 * val, then test. With `grouped`, runs of equal keys (blocks) go whole to
 * the split their first cell falls in. */
static void deal(const ast_keyed *order, int64_t n, int grouped, double val, double test, ast_split out[3])
{
    int64_t n_train = (int64_t)llround((double)n * (1.0 - val - test)), n_val = (int64_t)llround((double)n * val);
    int which = AST_SPLIT_TRAIN;
    for (int64_t i = 0; i < n; i++) {
        if (!grouped || i == 0 || order[i].key != order[i - 1].key)
            which = i < n_train ? AST_SPLIT_TRAIN : i < n_train + n_val ? AST_SPLIT_VAL : AST_SPLIT_TEST;
        split_push(&out[which], order[i].cell);
    }
}

/* A stream per slice, so that each slice's deal is its own. */
static void slice_rng(ast_rng *rng, uint64_t seed, int slice)
{
    ast_rng_seed(rng, seed ^ (0x5e1ec7ull + (uint64_t)slice * 0x9e3779b97f4a7c15ull));
}

static void split_slab(const ast_dataset *d, int slice, const ast_split_opts *o, ast_split out[3])
{
    int64_t n;
    ast_keyed *order = slice_cells(d, slice, &n);
    float lo[3], hi[3];
    bounding_box(d, order, n, lo, hi);
    int axis = 0;
    for (int k = 1; k < 3; k++)
        if (hi[k] - lo[k] > hi[axis] - lo[axis]) axis = k;
    for (int64_t i = 0; i < n; i++) order[i].key = d->pos[order[i].cell * 3 + axis];
    qsort(order, (size_t)n, sizeof *order, ast_cmp_keyed);
    deal(order, n, 0, o->val, o->test, out);
    free(order);
}

static void split_random(const ast_dataset *d, int slice, const ast_split_opts *o, ast_split out[3])
{
    int64_t n;
    ast_keyed *order = slice_cells(d, slice, &n);
    ast_rng rng;
    slice_rng(&rng, o->seed, slice);
    for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int64_t j = (int64_t)(ast_rng_next(&rng) % (uint64_t)(i + 1));
        ast_keyed t = order[i];
        order[i] = order[j], order[j] = t;
    }
    deal(order, n, 0, o->val, o->test, out);
    free(order);
}

static void split_blocks(const ast_dataset *d, int slice, const ast_split_opts *o, ast_split out[3])
{
    int64_t n;
    ast_keyed *order = slice_cells(d, slice, &n);
    ast_rng rng;
    slice_rng(&rng, o->seed, slice);
    split_rank_blocks(d, order, n, split_block_target(o->val, o->test, n), &rng);
    qsort(order, (size_t)n, sizeof *order, ast_cmp_keyed);
    deal(order, n, 1, o->val, o->test, out);
    free(order);
}

/* Whole sections: the last ones in order go to val, then test. */
static int split_sections(const ast_dataset *d, const ast_split_opts *o, ast_split out[3], ast_error *e)
{
    int n_sections = section_count(d, o);
    if (n_sections < 3) {
        ast_error_set(e, "%s: data.split: sections needs 3 or more sections to hold out whole ones and has %d; set "
                      "data.slice_key to the obs column of the sections, data.sections_from_z: K to cut a 3-D "
                      "tissue into K, or use data.split: slab, blocks or random", d->source, n_sections);
        return -1;
    }
    int *section = split_sections_of(d, o, e);
    if (!section) return -1;
    int n_test = o->test > 0 ? (int)fmax(1.0, round(n_sections * o->test)) : 0;
    int n_val = o->val > 0 ? (int)fmax(1.0, round(n_sections * o->val)) : 0;
    int first_val = n_sections - n_val - n_test, first_test = n_sections - n_test;
    for (int64_t c = 0; c < d->n_cells; c++)
        split_push(&out[section[c] >= first_test ? AST_SPLIT_TEST : section[c] >= first_val ? AST_SPLIT_VAL
                                                                                            : AST_SPLIT_TRAIN], c);
    free(section);
    return 0;
}

static int deal_by_kind(const ast_dataset *d, const ast_split_opts *o, ast_split out[3], ast_error *e)
{
    ast_split_kind kind = ast_split_resolve(d, o);
    if (kind == AST_SPLIT_SECTIONS) return split_sections(d, o, out, e);
    if (kind == AST_SPLIT_KEY) return split_by_key(d, o, out, e);
    for (int s = 0; s < d->n_slices; s++)
        if (kind == AST_SPLIT_SLAB) split_slab(d, s, o, out);
        else if (kind == AST_SPLIT_BLOCKS) split_blocks(d, s, o, out);
        else split_random(d, s, o, out);
    return 0;
}

int ast_data_split_by(const ast_dataset *d, const ast_split_opts *o, ast_split out[3], ast_error *e)
{
    memset(out, 0, 3 * sizeof *out);
    if (o->kind != AST_SPLIT_KEY && (o->val < 0 || o->test < 0 || o->val + o->test >= 1.0)) {
        ast_error_set(e, "data.split_ratio.val + data.split_ratio.test must be in [0, 1) (got %g + %g)", o->val, o->test);
        return -1;
    }
    if (deal_by_kind(d, o, out, e) < 0) {
        ast_split_free(out);
        return -1;
    }
    if (out[AST_SPLIT_TRAIN].n < 2) {
        ast_error_set(e, "%s: the training split has %lld cells; lower data.split_ratio.val/test or add data",
                      d->source, (long long)out[AST_SPLIT_TRAIN].n);
        ast_split_free(out);
        return -1;
    }
    return 0;
}

int ast_data_split(const ast_dataset *d, double val, double test, ast_split out[3], ast_error *e)
{
    ast_split_opts o = {.kind = AST_SPLIT_AUTO, .val = val, .test = test};
    return ast_data_split_by(d, &o, out, e);
}
