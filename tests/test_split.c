/* The held-out protocols (ast_data_split_by): sizes by the ratios, every
 * cell in one split, the seeded deals repeatable and their seed alone
 * deciding them, blocks that are regions, whole sections (slices or
 * z-sections), and the user's key column with its errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data.h"

enum { SIDE = 40, LAYERS = 6 };

/* A SIDE x SIDE grid of cells, one per unit, in one slice; with layers > 1
 * a 3-D stack of that many grids (z = layer). No expression: splits look
 * at positions, slices and obs only. */
static ast_dataset grid(int layers)
{
    int64_t n = (int64_t)SIDE * SIDE * layers;
    ast_dataset d = {.n_cells = n, .n_slices = 1, .coord_dims = layers > 1 ? 3 : 2};
    d.pos = ast_xcalloc((size_t)n * 3, sizeof(float));
    d.slice = ast_xcalloc((size_t)n, sizeof(int));
    d.x.indptr = ast_xcalloc((size_t)n + 1, sizeof(int64_t));
    for (int64_t c = 0; c < n; c++) {
        d.pos[c * 3] = (float)(c % SIDE);
        d.pos[c * 3 + 1] = (float)(c / SIDE % SIDE);
        d.pos[c * 3 + 2] = (float)(c / (SIDE * SIDE));
    }
    d.source = ast_xstrdup("grid.h5ad");
    return d;
}

/* Each cell in exactly one split; returns which, per cell. */
static int *owner(const ast_dataset *d, const ast_split sp[3])
{
    int *who = ast_xmalloc((size_t)d->n_cells * sizeof *who);
    for (int64_t c = 0; c < d->n_cells; c++) who[c] = -1;
    for (int s = 0; s < 3; s++)
        for (int64_t i = 0; i < sp[s].n; i++) {
            cr_assert_eq(who[sp[s].cells[i]], -1, "cell %lld in two splits", (long long)sp[s].cells[i]);
            who[sp[s].cells[i]] = s;
        }
    for (int64_t c = 0; c < d->n_cells; c++) cr_assert_neq(who[c], -1, "cell %lld in no split", (long long)c);
    return who;
}

static void split_ok(const ast_dataset *d, ast_split_kind kind, uint64_t seed, ast_split sp[3])
{
    ast_split_opts o = {.kind = kind, .val = 0.1, .test = 0.2, .seed = seed};
    ast_error e = {""};
    cr_assert(ast_data_split_by(d, &o, sp, &e) == 0, "%s", e.msg);
}

Test(split, sizes_follow_the_ratios_and_every_cell_is_in_one_split)
{
    ast_dataset d = grid(1);
    const ast_split_kind kinds[] = {AST_SPLIT_SLAB, AST_SPLIT_RANDOM, AST_SPLIT_BLOCKS};
    for (int k = 0; k < 3; k++) {
        ast_split sp[3];
        split_ok(&d, kinds[k], 0, sp);
        free(owner(&d, sp));
        /* Cells are dealt one at a time except by blocks, which go whole: a
         * split can miss its share by up to one block at each of its two
         * ends, 1600 / 50 target blocks (the smaller share 0.1 -> 5 / 0.1)
         * = 32 cells each, more where the grid's blocks are cut by its edge. */
        double slack = kinds[k] == AST_SPLIT_BLOCKS ? 80 : 0.5;
        cr_assert_float_eq((double)sp[AST_SPLIT_VAL].n, 0.1 * SIDE * SIDE, slack, "%s val %lld",
                           ast_split_kind_name(kinds[k]), (long long)sp[AST_SPLIT_VAL].n);
        cr_assert_float_eq((double)sp[AST_SPLIT_TEST].n, 0.2 * SIDE * SIDE, slack, "%s test %lld",
                           ast_split_kind_name(kinds[k]), (long long)sp[AST_SPLIT_TEST].n);
        ast_split_free(sp);
    }
    ast_dataset_free(&d);
}

static int same_split(const ast_split a[3], const ast_split b[3])
{
    for (int s = 0; s < 3; s++)
        if (a[s].n != b[s].n || memcmp(a[s].cells, b[s].cells, (size_t)a[s].n * sizeof *a[s].cells)) return 0;
    return 1;
}

Test(split, seeded_deals_repeat_with_their_seed_and_change_with_it)
{
    ast_dataset d = grid(1);
    const ast_split_kind kinds[] = {AST_SPLIT_RANDOM, AST_SPLIT_BLOCKS};
    for (int k = 0; k < 2; k++) {
        ast_split a[3], b[3], c[3];
        split_ok(&d, kinds[k], 7, a);
        split_ok(&d, kinds[k], 7, b);
        split_ok(&d, kinds[k], 8, c);
        cr_assert(same_split(a, b), "%s: the same seed deals the same cells", ast_split_kind_name(kinds[k]));
        cr_assert(!same_split(a, c), "%s: another seed deals others", ast_split_kind_name(kinds[k]));
        ast_split_free(a), ast_split_free(b), ast_split_free(c);
    }
    ast_dataset_free(&d);
}

/* The 4-neighbours of cell c on the grid that are in the same split. */
static int same_neighbours(const int *who, int64_t c)
{
    int x = (int)(c % SIDE), y = (int)(c / SIDE), n = 0;
    const int dx[4] = {1, -1, 0, 0}, dy[4] = {0, 0, 1, -1};
    for (int i = 0; i < 4; i++) {
        int u = x + dx[i], v = y + dy[i];
        if (u >= 0 && u < SIDE && v >= 0 && v < SIDE) n += who[v * SIDE + u] == who[c];
    }
    return n;
}

/* The connected regions (4-neighbourhood) of split s, by flood fill. */
static int regions(const int *who, int s)
{
    int *seen = ast_xcalloc(SIDE * SIDE, sizeof *seen), *stack = ast_xmalloc(SIDE * SIDE * sizeof *stack), n = 0;
    for (int c0 = 0; c0 < SIDE * SIDE; c0++) {
        if (who[c0] != s || seen[c0]) continue;
        n++;
        int top = 0;
        stack[top++] = c0, seen[c0] = 1;
        while (top) {
            int c = stack[--top], x = c % SIDE, y = c / SIDE;
            const int nb[4] = {x + 1 < SIDE ? c + 1 : -1, x > 0 ? c - 1 : -1, y + 1 < SIDE ? c + SIDE : -1,
                               y > 0 ? c - SIDE : -1};
            for (int i = 0; i < 4; i++)
                if (nb[i] >= 0 && who[nb[i]] == s && !seen[nb[i]]) stack[top++] = nb[i], seen[nb[i]] = 1;
        }
    }
    free(seen), free(stack);
    return n;
}

Test(split, blocks_are_several_regions_and_random_cells_are_not)
{
    ast_dataset d = grid(1);
    ast_split sp[3];
    split_ok(&d, AST_SPLIT_BLOCKS, 0, sp);
    int *who = owner(&d, sp);
    /* Blocks of about 5 x 5 cells: every held-out cell has a neighbour in its
     * block (a corner has 2), and the test share is several blocks apart. */
    for (int64_t i = 0; i < sp[AST_SPLIT_TEST].n; i++)
        cr_assert_geq(same_neighbours(who, sp[AST_SPLIT_TEST].cells[i]), 1, "a lone held-out cell");
    int blocks = regions(who, AST_SPLIT_TEST);
    cr_assert(blocks >= 3 && blocks < sp[AST_SPLIT_TEST].n / 8, "%d regions of %lld cells", blocks,
              (long long)sp[AST_SPLIT_TEST].n);
    free(who), ast_split_free(sp);
    /* Random cells: most are regions of their own (a cell's neighbours are
     * held out with probability 0.2). */
    split_ok(&d, AST_SPLIT_RANDOM, 0, sp);
    who = owner(&d, sp);
    cr_assert_gt(regions(who, AST_SPLIT_TEST), sp[AST_SPLIT_TEST].n / 3);
    free(who), ast_split_free(sp);
    /* Slab: one region at the end of the widest axis. */
    split_ok(&d, AST_SPLIT_SLAB, 0, sp);
    who = owner(&d, sp);
    cr_assert_eq(regions(who, AST_SPLIT_TEST), 1);
    free(who), ast_split_free(sp);
    ast_dataset_free(&d);
}

Test(split, sections_hold_out_whole_slices_or_z_sections)
{
    ast_dataset d = grid(LAYERS);
    ast_split sp[3];
    ast_split_opts o = {.kind = AST_SPLIT_SECTIONS, .val = 0.2, .test = 0.2};
    ast_error e = {""};
    cr_assert(ast_data_split_by(&d, &o, sp, &e) == -1, "one slice has no sections to hold out");
    cr_assert(strstr(e.msg, "grid.h5ad") && strstr(e.msg, "data.sections_from_z"), "%s", e.msg);
    cr_assert_eq(ast_split_resolve(&d, &o), AST_SPLIT_SECTIONS);
    o.kind = AST_SPLIT_AUTO;
    cr_assert_eq(ast_split_resolve(&d, &o), AST_SPLIT_SLAB, "auto: slabs of one slice");
    o.sections_from_z = LAYERS;
    cr_assert_eq(ast_split_resolve(&d, &o), AST_SPLIT_SECTIONS, "auto: sections once there are 3 or more");
    cr_assert(ast_data_split_by(&d, &o, sp, &e) == 0, "%s", e.msg);
    /* 6 z-sections of one layer each: 0.2 of 6 rounds to 1 for val, 1 for test */
    for (int64_t i = 0; i < sp[AST_SPLIT_TEST].n; i++) cr_assert_eq(d.pos[sp[AST_SPLIT_TEST].cells[i] * 3 + 2], 5.0f);
    for (int64_t i = 0; i < sp[AST_SPLIT_VAL].n; i++) cr_assert_eq(d.pos[sp[AST_SPLIT_VAL].cells[i] * 3 + 2], 4.0f);
    cr_assert_eq(sp[AST_SPLIT_TRAIN].n, 4 * SIDE * SIDE);
    ast_split_free(sp);
    /* slices: the last ones in order */
    for (int64_t c = 0; c < d.n_cells; c++) d.slice[c] = (int)(c / (SIDE * SIDE));
    d.n_slices = LAYERS;
    cr_assert(ast_data_split_by(&d, &o, sp, &e) == -1, "z-sections cut one slice");
    cr_assert(strstr(e.msg, "data.sections_from_z: 0"), "%s", e.msg);
    o.sections_from_z = 0;
    cr_assert(ast_data_split_by(&d, &o, sp, &e) == 0, "%s", e.msg);
    for (int64_t i = 0; i < sp[AST_SPLIT_TEST].n; i++) cr_assert_eq(d.slice[sp[AST_SPLIT_TEST].cells[i]], LAYERS - 1);
    ast_split_free(sp);
    ast_dataset_free(&d);
}

/* An obs column "fold" of categories, cell c's value values[c % n_values]. */
static void add_key(ast_dataset *d, const char *const *values, int n_values)
{
    d->obs = ast_xcalloc(1, sizeof *d->obs);
    d->n_obs = 1;
    ast_obs_column *col = &d->obs[0];
    col->name = ast_xstrdup("fold");
    col->kind = AST_OBS_CATEGORY;
    col->n_categories = n_values;
    col->categories = ast_xmalloc((size_t)n_values * sizeof *col->categories);
    for (int i = 0; i < n_values; i++) col->categories[i] = ast_xstrdup(values[i]);
    col->codes = ast_xmalloc((size_t)d->n_cells * sizeof *col->codes);
    for (int64_t c = 0; c < d->n_cells; c++) col->codes[c] = (int)(c % n_values);
}

Test(split, a_key_column_is_the_split_and_its_errors_say_what_to_fix)
{
    ast_dataset d = grid(1);
    const char *good[] = {"train", "train", "train", "val", "test"};
    add_key(&d, good, 5);
    ast_split sp[3];
    ast_split_opts o = {.kind = AST_SPLIT_KEY, .key = "fold"};
    ast_error e = {""};
    cr_assert(ast_data_split_by(&d, &o, sp, &e) == 0, "%s", e.msg);
    int *who = owner(&d, sp);
    for (int64_t c = 0; c < d.n_cells; c++) cr_assert_eq(who[c], c % 5 < 3 ? 0 : c % 5 == 3 ? 1 : 2);
    free(who), ast_split_free(sp);

    o.key = "folds";
    cr_assert(ast_data_split_by(&d, &o, sp, &e) == -1);
    cr_assert(strstr(e.msg, "grid.h5ad") && strstr(e.msg, "no obs column 'folds'") && strstr(e.msg, "'fold'"), "%s",
              e.msg);
    o.key = NULL;
    cr_assert(ast_data_split_by(&d, &o, sp, &e) == -1);
    cr_assert(strstr(e.msg, "data.split_key"), "%s", e.msg);
    ast_dataset_free(&d);

    d = grid(1);
    const char *bad[] = {"train", "Test"};
    add_key(&d, bad, 2);
    o.key = "fold";
    cr_assert(ast_data_split_by(&d, &o, sp, &e) == -1, "a value that is not train, val or test");
    cr_assert(strstr(e.msg, "grid.h5ad: obs column 'fold' (data.split_key): cell 1 has 'Test'") &&
              strstr(e.msg, "train, val or test"), "%s", e.msg);
    d.obs[0].codes[1] = -1;
    cr_assert(ast_data_split_by(&d, &o, sp, &e) == -1, "a missing value");
    cr_assert(strstr(e.msg, "cell 1 has no value"), "%s", e.msg);
    ast_dataset_free(&d);
}

/* A CSV's split column (ast_data_opts.label_column) is read as labels,
 * not as a gene, and is the key of the split. */
Test(split, a_csv_column_is_a_key)
{
    char path[] = "/tmp/alphast-split-XXXXXX";
    FILE *f = fdopen(mkstemp(path), "w");
    fputs("cell,x,y,fold,g1,g2\nc1,0,0,train,1,2\nc2,1,0,train,3,1\nc3,0,1,val,2,2\nc4,1,1,test,0,5\n", f);
    fclose(f);
    ast_data_opts o;
    ast_data_opts_default(&o);
    o.label_column = "fold";
    ast_dataset d;
    ast_error e = {""};
    cr_assert(ast_data_read_csv(path, &o, &d, &e) == 0, "%s", e.msg);
    remove(path);
    cr_assert_eq(d.n_genes, 2, "the split column is no gene");
    ast_split sp[3];
    ast_split_opts so = {.kind = AST_SPLIT_KEY, .key = "fold"};
    cr_assert(ast_data_split_by(&d, &so, sp, &e) == 0, "%s", e.msg);
    cr_assert(sp[0].n == 2 && sp[1].n == 1 && sp[2].n == 1 && sp[1].cells[0] == 2 && sp[2].cells[0] == 3);
    ast_split_free(sp);
    ast_dataset_free(&d);
}
