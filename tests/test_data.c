/* Data input: the bundled STARmap files in both formats must agree; every
 * bad input gets its own error; splits are spatial; sets are neighbourhoods. */
#include <criterion/criterion.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "model/model.h"
#include "data/data.h"
#include "io/safetensors.h"
#include "train/train.h"

#define STARMAP ALPHAST_SOURCE_DIR "/data/starmap3d/"

static ast_dataset read_ok(const char *path, const ast_data_opts *o)
{
    ast_dataset d;
    ast_error e = {""};
    int ok = ast_data_read(path, o, &d, &e) == 0;
    cr_assert(ok, "%s", e.msg);
    return d;
}

static void expect_error(const char *path, const ast_data_opts *o, const char *needle)
{
    ast_dataset d;
    ast_error e = {""};
    cr_assert(ast_data_read(path, o, &d, &e) < 0, "%s should fail", path);
    cr_assert(strstr(e.msg, needle), "message '%s' lacks '%s'", e.msg, needle);
    cr_assert(strstr(e.msg, path), "message '%s' does not name the file", e.msg);
}

Test(data, bundled_h5ad_and_text_files_agree)
{
    ast_data_opts o;
    ast_data_opts_default(&o);
    ast_dataset h = read_ok(STARMAP "starmap3d.h5ad", &o);
    cr_assert_eq(h.n_cells, 4000);
    cr_assert_eq(h.n_genes, 28);
    cr_assert_eq(h.coord_dims, 3);
    cr_assert_str_eq(h.genes[0], "Slc17a7");
    o.genes_by_cells = 1;
    o.coords_file = STARMAP "loc.txt";
    ast_dataset t = read_ok(STARMAP "expr.txt.gz", &o);
    cr_assert_eq(t.n_cells, 4000);
    cr_assert_eq(t.n_genes, 28);
    cr_assert_eq(t.expr[0], 34999.0f, "first count of the text file");
    /* The same data through two independent readers: counts are integers
     * and coordinates were written as float32, so they agree exactly. */
    for (int64_t i = 0; i < 4000 * 28; i++) cr_assert_eq(h.expr[i], t.expr[i], "X differs at %lld", (long long)i);
    for (int64_t i = 0; i < 4000 * 3; i++) cr_assert_eq(h.pos[i], t.pos[i], "coords differ at %lld", (long long)i);
    for (int g = 0; g < 28; g++) cr_assert_str_eq(h.genes[g], t.genes[g]);
    ast_dataset_free(&h);
    ast_dataset_free(&t);
}

Test(data, slice_key_reads_the_categorical_column)
{
    ast_data_opts o;
    ast_data_opts_default(&o);
    o.slice_key = "slice_id";
    ast_dataset d = read_ok(STARMAP "starmap3d.h5ad", &o);
    cr_assert_eq(d.n_slices, 1);
    for (int64_t c = 0; c < d.n_cells; c++) cr_assert_eq(d.slice[c], 0);
    ast_dataset_free(&d);
}

Test(data, preprocessing_normalises_per_gene)
{
    ast_data_opts o;
    ast_data_opts_default(&o);
    ast_dataset d = read_ok(STARMAP "starmap3d.h5ad", &o);
    ast_error e;
    cr_assert(ast_data_preprocess(&d, &o, &e) == 0, "%s", e.msg);
    for (int g = 0; g < d.n_genes; g++) {
        double s = 0, sq = 0;
        for (int64_t c = 0; c < d.n_cells; c++) s += d.expr[c * d.n_genes + g];
        for (int64_t c = 0; c < d.n_cells; c++) sq += pow(d.expr[c * d.n_genes + g] - s / 4000, 2);
        /* clipping at 10 sd moves the mean by at most a few 1e-3 and shrinks the sd slightly */
        cr_assert_lt(fabs(s / 4000), 0.05, "gene %d mean %g", g, s / 4000);
        cr_assert(sqrt(sq / 3999) > 0.8 && sqrt(sq / 3999) <= 1.0 + 1e-4, "gene %d sd %g", g, sqrt(sq / 3999));
    }
    double mean[3] = {0};
    for (int64_t c = 0; c < d.n_cells; c++)
        for (int k = 0; k < 3; k++) mean[k] += d.pos[c * 3 + k] / 4000;
    for (int k = 0; k < 3; k++) cr_assert_lt(fabs(mean[k]), 1e-2, "positions centred (axis %d: %g)", k, mean[k]);
    ast_dataset_free(&d);
}

Test(data, gene_alignment_fills_missing_genes_with_zero)
{
    ast_data_opts o;
    ast_data_opts_default(&o);
    o.log_normalize = o.scale = 0;
    const char *genes[] = {"NotAGene", "Slc17a7"};
    o.genes = genes;
    o.n_genes = 2;
    ast_dataset d = read_ok(STARMAP "starmap3d.h5ad", &o);
    ast_error e;
    cr_assert(ast_data_preprocess(&d, &o, &e) == 0, "%s", e.msg);
    cr_assert_eq(d.n_genes, 2);
    cr_assert_eq(d.expr[0], 0.0f);
    cr_assert_eq(d.expr[1], 34999.0f);
    ast_dataset_free(&d);
}

Test(data, splits_are_spatial_and_sets_are_neighbourhoods)
{
    ast_data_opts o;
    ast_data_opts_default(&o);
    ast_dataset d = read_ok(STARMAP "starmap3d.h5ad", &o);
    ast_error e;
    cr_assert(ast_data_preprocess(&d, &o, &e) == 0);
    ast_split sp[3];
    cr_assert(ast_data_split(&d, 0.1, 0.1, sp, &e) == 0, "%s", e.msg);
    cr_assert_eq(sp[0].n + sp[1].n + sp[2].n, 4000);
    cr_assert_eq(sp[1].n, 400);
    /* x spans the tissue most widely: every training cell lies left of every validation cell */
    float train_max = -INFINITY, val_min = INFINITY;
    for (int64_t i = 0; i < sp[0].n; i++) train_max = fmaxf(train_max, d.pos[sp[0].cells[i] * 3]);
    for (int64_t i = 0; i < sp[1].n; i++) val_min = fminf(val_min, d.pos[sp[1].cells[i] * 3]);
    cr_assert_leq(train_max, val_min);

    float scale = ast_data_position_scale(&d, &sp[0], 32, 1);
    cr_assert_gt(scale, 0.0f);
    ast_set_sampler s = {&d, &sp[0], 32, scale, 0, 0.0f};
    float expr[32 * 28], pos[32 * 3], mask[32];
    ast_rng rng;
    ast_rng_seed(&rng, 3);
    int64_t centre = sp[0].cells[17];
    ast_make_set(&s, centre, &rng, expr, pos, mask);
    for (int i = 0; i < 32; i++) cr_assert_eq(mask[i], 1.0f);
    cr_assert_eq(memcmp(expr, d.expr + centre * 28, 28 * sizeof(float)), 0, "the centre comes first");
    /* no training cell outside the set is closer to the centre than the set's farthest cell */
    float far = 0;
    for (int i = 0; i < 32; i++) far = fmaxf(far, hypotf(hypotf(pos[i * 3] - pos[0], pos[i * 3 + 1] - pos[1]), pos[i * 3 + 2] - pos[2]));
    int closer = 0;
    for (int64_t i = 0; i < sp[0].n; i++) {
        const float *p = d.pos + sp[0].cells[i] * 3, *c = d.pos + centre * 3;
        float dist = hypotf(hypotf(p[0] - c[0], p[1] - c[1]), p[2] - c[2]) / scale;
        closer += dist < far * (1 - 1e-5f); /* relative slack for float rounding */
    }
    cr_assert_leq(closer, 31, "%d cells closer than the set's farthest", closer);
    ast_split_free(sp);
    ast_dataset_free(&d);
}

/* ---- bad input --------------------------------------------------------- */

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/alphast-data-XXXXXX");
    cr_assert(mkdtemp(tmpdir));
}

static const char *tmp_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s", tmpdir, name);
    return buf;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

/* A minimal AnnData file: dense X [cells, genes], var/_index with n_var
 * names, obsm/spatial [cells, 3]. */
static void write_h5ad(const char *path, int cells, int genes, int n_var, const float *x)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dx[2] = {(hsize_t)cells, (hsize_t)genes}, dv = (hsize_t)n_var, dp[2] = {(hsize_t)cells, 3};
    hid_t s = H5Screate_simple(2, dx, NULL), d = H5Dcreate2(f, "X", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x);
    H5Dclose(d), H5Sclose(s);
    hid_t g = H5Gcreate2(f, "var", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, 8);
    char names[16][8] = {{0}};
    for (int i = 0; i < n_var; i++) snprintf(names[i], 8, "g%d", i);
    s = H5Screate_simple(1, &dv, NULL);
    d = H5Dcreate2(g, "_index", t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, names);
    H5Dclose(d), H5Sclose(s), H5Tclose(t), H5Gclose(g);
    g = H5Gcreate2(f, "obsm", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    float pos[64 * 3] = {0};
    s = H5Screate_simple(2, dp, NULL);
    d = H5Dcreate2(g, "spatial", H5T_IEEE_F32LE, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, pos);
    H5Dclose(d), H5Sclose(s), H5Gclose(g), H5Fclose(f);
}

Test(data_errors, missing_obsm_key_lists_the_present_ones)
{
    ast_data_opts o;
    ast_data_opts_default(&o);
    o.position_key = "ccf";
    expect_error(STARMAP "starmap3d.h5ad", &o, "no coordinates at obsm/ccf (present: spatial)");
}

Test(data_errors, gene_count_mismatch)
{
    make_tmpdir();
    float x[4 * 3] = {0};
    write_h5ad(tmp_path("mismatch.h5ad"), 4, 3, 2, x);
    ast_data_opts o;
    ast_data_opts_default(&o);
    expect_error(tmp_path("mismatch.h5ad"), &o, "var has 2 genes but X has 3 columns");
}

Test(data_errors, nan_in_x)
{
    make_tmpdir();
    float x[4 * 3] = {0};
    x[5] = NAN;
    write_h5ad(tmp_path("nan.h5ad"), 4, 3, 3, x);
    ast_data_opts o;
    ast_data_opts_default(&o);
    expect_error(tmp_path("nan.h5ad"), &o, "X[1, 2] (gene g2) is nan");
}

Test(data_errors, truncated_h5ad)
{
    make_tmpdir();
    FILE *in = fopen(STARMAP "starmap3d.h5ad", "rb"), *out = fopen(tmp_path("cut.h5ad"), "wb");
    cr_assert(in && out);
    char buf[4096];
    for (int i = 0; i < 100; i++) fwrite(buf, 1, fread(buf, 1, sizeof buf, in), out); /* first 400 KiB of 1.1 MiB */
    fclose(in), fclose(out);
    ast_data_opts o;
    ast_data_opts_default(&o);
    ast_dataset d;
    ast_error e = {""};
    cr_assert(ast_data_read(tmp_path("cut.h5ad"), &o, &d, &e) < 0);
    cr_assert(strstr(e.msg, "cut.h5ad") && (strstr(e.msg, "truncated") || strstr(e.msg, "damaged")), "%s", e.msg);
}

Test(data_errors, malformed_csv)
{
    make_tmpdir();
    ast_data_opts o;
    ast_data_opts_default(&o);
    write_text(tmp_path("ragged.csv"), "cell,x,y,Gad1\nc1,1,2,3\nc2,1,2\n");
    expect_error(tmp_path("ragged.csv"), &o, "ragged.csv:3: 3 fields, but the header has 4");
    write_text(tmp_path("word.csv"), "x,y,Gad1\n1,2,abc\n");
    expect_error(tmp_path("word.csv"), &o, "word.csv:2: column 3: expected a number, got 'abc'");
    write_text(tmp_path("nocoords.csv"), "a,b\n1,2\n");
    expect_error(tmp_path("nocoords.csv"), &o, "no x and y columns");
}

Test(data_errors, empty_set)
{
    make_tmpdir();
    ast_data_opts o;
    ast_data_opts_default(&o);
    write_text(tmp_path("empty.tsv"), "x\ty\tGad1\n");
    expect_error(tmp_path("empty.tsv"), &o, "no cells");
    write_text(tmp_path("nothing.csv"), "");
    expect_error(tmp_path("nothing.csv"), &o, "empty file");
}

Test(data, csv_cells_by_genes_with_ids)
{
    make_tmpdir();
    write_text(tmp_path("cells.csv"), "cell,Gad1,x,y,Sst\n\"c1\",1,0.5,2,4\nc2,0,1.5,3,5\n");
    ast_data_opts o;
    ast_data_opts_default(&o);
    ast_dataset d = read_ok(tmp_path("cells.csv"), &o);
    cr_assert_eq(d.n_cells, 2);
    cr_assert_eq(d.n_genes, 2);
    cr_assert_str_eq(d.genes[1], "Sst");
    cr_assert_eq(d.expr[2], 0.0f);
    cr_assert_eq(d.expr[3], 5.0f);
    cr_assert_eq(d.pos[3], 1.5f);
    cr_assert_eq(d.coord_dims, 2);
    ast_dataset_free(&d);
}

/* ---- the preprocessing cache ------------------------------------------- */

static ast_dataset load_ok(const ast_data_opts *o, const char *cache)
{
    ast_dataset d;
    ast_error e = {""};
    cr_assert(ast_data_load(STARMAP "starmap3d.h5ad", o, cache, &d, &e) == 0, "%s", e.msg);
    return d;
}

static void expect_same(const ast_dataset *a, const ast_dataset *b)
{
    cr_assert_eq(a->n_cells, b->n_cells);
    cr_assert_eq(a->n_genes, b->n_genes);
    cr_assert_eq(a->n_slices, b->n_slices);
    cr_assert_eq(a->coord_dims, b->coord_dims);
    cr_assert_eq(a->n_types, b->n_types);
    cr_assert_eq(!a->cell_type, !b->cell_type);
    cr_assert_eq(memcmp(a->expr, b->expr, (size_t)(a->n_cells * a->n_genes) * sizeof(float)), 0, "expr differs");
    cr_assert_eq(memcmp(a->pos, b->pos, (size_t)a->n_cells * 3 * sizeof(float)), 0, "pos differs");
    cr_assert_eq(memcmp(a->slice, b->slice, (size_t)a->n_cells * sizeof(int)), 0, "slice differs");
    if (a->cell_type) cr_assert_eq(memcmp(a->cell_type, b->cell_type, (size_t)a->n_cells * sizeof(int)), 0);
    for (int g = 0; g < a->n_genes; g++) cr_assert_str_eq(a->genes[g], b->genes[g]);
    for (int t = 0; t < a->n_types; t++) cr_assert_str_eq(a->type_names[t], b->type_names[t]);
    cr_assert_str_eq(a->source, b->source);
}

/* The cache directory's only file (the test starts from an empty one). */
static void only_file(char *out, size_t n)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s/cache", tmpdir);
    FILE *p = popen(cmd, "r");
    char name[256] = "", extra[256];
    cr_assert(p && fgets(name, sizeof name, p));
    cr_assert(!fgets(extra, sizeof extra, p), "one file expected, also %s", extra);
    pclose(p);
    name[strcspn(name, "\n")] = 0;
    snprintf(out, n, "%s/cache/%s", tmpdir, name);
}

Test(data_cache, hit_equals_a_fresh_parse_and_an_option_change_misses)
{
    make_tmpdir();
    char cache[300], file[600];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    ast_data_opts o;
    ast_data_opts_default(&o);
    o.slice_key = "slice_id";
    ast_dataset fresh = read_ok(STARMAP "starmap3d.h5ad", &o);
    ast_error e;
    cr_assert(ast_data_preprocess(&fresh, &o, &e) == 0);
    ast_dataset first = load_ok(&o, cache);
    only_file(file, sizeof file);
    /* The second load is served from the file, not rewritten. */
    struct stat before, after;
    cr_assert(stat(file, &before) == 0);
    ast_dataset hit = load_ok(&o, cache);
    cr_assert(stat(file, &after) == 0);
    cr_assert_eq(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec, "a hit must not rewrite the cache");
    cr_assert_eq(before.st_ino, after.st_ino, "a hit must not rewrite the cache");
    expect_same(&fresh, &first);
    expect_same(&fresh, &hit);
    o.clip = 5.0f; /* a preprocessing option: another key, another file */
    ast_dataset clipped = load_ok(&o, cache);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) -eq 2", cache);
    cr_assert_eq(system(cmd), 0, "a changed option must miss and write a second file");
    float most = 0;
    for (int64_t i = 0; i < clipped.n_cells * clipped.n_genes; i++) most = fmaxf(most, fabsf(clipped.expr[i]));
    cr_assert_leq(most, 5.0f, "the miss used the new clip");
    ast_dataset_free(&fresh), ast_dataset_free(&first), ast_dataset_free(&hit), ast_dataset_free(&clipped);
}

Test(data_cache, damaged_cache_is_ignored_and_reparsed)
{
    make_tmpdir();
    char cache[300], file[600];
    snprintf(cache, sizeof cache, "%s/cache", tmpdir);
    ast_data_opts o;
    ast_data_opts_default(&o);
    ast_dataset first = load_ok(&o, cache);
    only_file(file, sizeof file);
    /* Truncated mid-buffer, then with a valid header but a wrong shape. */
    cr_assert_eq(truncate(file, 1000), 0);
    ast_dataset again = load_ok(&o, cache);
    expect_same(&first, &again);
    ast_dataset_free(&again);
    ast_st_writer *w = ast_st_writer_new();
    int64_t shape[2] = {first.n_cells, 2};
    ast_st_writer_add(w, "expr", AST_ST_F32, 2, shape, first.expr);
    ast_error e;
    cr_assert(ast_st_writer_write(w, file, &e) == 0, "%s", e.msg);
    ast_st_writer_free(w);
    again = load_ok(&o, cache);
    expect_same(&first, &again);
    ast_dataset_free(&again), ast_dataset_free(&first);
}

/* ---- whole-slice sets -------------------------------------------------- */

/* Two slices of cells on a line, 10 and 6 cells, 3 genes; counts already
 * "preprocessed" (the sets only copy them). */
static ast_dataset two_slices(void)
{
    ast_dataset d = {.n_cells = 16, .n_genes = 3, .n_slices = 2, .coord_dims = 2};
    d.expr = ast_xmalloc(16 * 3 * sizeof(float));
    d.pos = ast_xcalloc(16 * 3, sizeof(float));
    d.slice = ast_xmalloc(16 * sizeof(int));
    d.genes = ast_xmalloc(3 * sizeof(char *));
    for (int g = 0; g < 3; g++) d.genes[g] = ast_xstrdup(g == 0 ? "a" : g == 1 ? "b" : "c");
    for (int c = 0; c < 16; c++) {
        d.slice[c] = c < 10 ? 0 : 1;
        d.pos[c * 3] = (float)(c < 10 ? c : c - 10);
        d.pos[c * 3 + 1] = (float)(c % 3);
        d.pos[c * 3 + 2] = (float)d.slice[c];
        for (int g = 0; g < 3; g++) d.expr[c * 3 + g] = (float)(c * 3 + g);
    }
    d.source = ast_xstrdup("two_slices");
    return d;
}

Test(data_sets, whole_slice_sets_hold_the_slice_and_pad_to_the_largest)
{
    ast_dataset d = two_slices();
    ast_split sp[3];
    ast_error e;
    cr_assert(ast_data_split(&d, 0.2, 0.2, sp, &e) == 0, "%s", e.msg);
    /* Slabs of 60 %: slice 0 gives 6 training cells, slice 1 llround(3.6) = 4. */
    int N = ast_data_max_set_size(&d, &sp[AST_SPLIT_TRAIN], 0);
    cr_assert_eq(N, 6);
    cr_assert_eq(ast_data_max_set_size(&d, &sp[AST_SPLIT_TRAIN], 9), 9, "a positive set_size is kept");
    ast_set_sampler s = {&d, &sp[AST_SPLIT_TRAIN], N, 2.0f, 0, 0.0f};
    for (int64_t i = 0; i < sp[AST_SPLIT_TRAIN].n; i++) {
        int64_t centre = sp[AST_SPLIT_TRAIN].cells[i], cells[6];
        int want = d.slice[centre] == 0 ? 6 : 4, n = ast_set_cells(&s, centre, cells);
        cr_assert_eq(n, want);
        for (int j = 0; j < n; j++) cr_assert_eq(d.slice[cells[j]], d.slice[centre], "another slice's cell");
        float expr[6 * 3], pos[6 * 3], mask[6];
        ast_make_set(&s, centre, NULL, expr, pos, mask);
        double mean[3] = {0};
        for (int j = 0; j < 6; j++) {
            cr_assert_eq(mask[j], j < want ? 1.0f : 0.0f, "mask of slot %d with %d cells", j, want);
            for (int k = 0; k < 3; k++) mean[k] += pos[j * 3 + k];
            if (j >= want) cr_assert_eq(pos[j * 3] + pos[j * 3 + 1] + pos[j * 3 + 2] + expr[j * 3], 0.0f, "padding is zero");
        }
        for (int k = 0; k < 3; k++) cr_assert_float_eq(mean[k], 0.0, 1e-5, "centred (float rounding only)");
    }
    ast_split_free(sp);
    ast_dataset_free(&d);
}

static const char *whole_slice_yaml =
    "training_mode: joint\n"
    "data: {set_size: 0, preprocessing: {cell_type_key: null}, loading: {rotation: true}}\n"
    "diffusion: {diffusion_steps: 20}\n"
    "training: {batch_size: 2, epochs: 2, steps_per_epoch: 2, val_sets: 2, val_t_points: 1, early_stopping: false}\n"
    "mlp_in_expression_setting: {mlp_in_expression_dims: 4, mlp_out_expression_dims: 4}\n"
    "mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 4, mlp_out_diffusion_time_dims: 4}\n"
    "PositionMLP_setting: {hidden_dims: 4}\n"
    "TransformerLayer_setting: {num_layers: 1, num_heads: 2, dim_ff_expression: 4, dim_ff_diffusion_time: 4}\n"
    "mlp_out_expression_setting: {hidden_dims: 4}\n"
    "mlp_out_position_norm_setting: {hidden_dims: 4}\n";

Test(data_sets, training_on_whole_slices_runs, .timeout = 60)
{
    make_tmpdir();
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string(whole_slice_yaml, "whole.yaml", &e);
    cr_assert(cfg, "%s", e.msg);
    ast_dataset d = two_slices();
    ast_split sp[3];
    ast_train_config tc;
    ast_model_config mc;
    cr_assert(ast_data_split(&d, 0.2, 0.2, sp, &e) == 0, "%s", e.msg);
    cr_assert(ast_cfg_model(cfg, d.n_genes, &mc, &e) == 0, "%s", e.msg);
    cr_assert(ast_train_config_from_cfg(cfg, &tc, &e) == 0, "%s", e.msg);
    cr_assert_eq(tc.set_size, 0);
    tc.progress = 0;
    ast_model *m = ast_model_new(&mc, tc.seed, &e);
    cr_assert(m, "%s", e.msg);
    ast_trainer *t = ast_trainer_new(m, &d, sp, &tc, tmp_path("run"), NULL, &e);
    cr_assert(t, "%s", e.msg);
    ast_train_result r;
    cr_assert(ast_trainer_run(t, &r, &e) == 0, "%s", e.msg);
    cr_assert_eq(ast_trainer_n_losses(t), 4);
    for (int64_t i = 0; i < 4; i++) cr_assert(isfinite(ast_trainer_losses(t)[i]));
    cr_assert(isfinite(r.best_val));
    ast_trainer_free(t);
    ast_model_free(m);
    ast_split_free(sp);
    ast_dataset_free(&d);
    ast_cfg_free(cfg);
}
