/* AnnData files as the anndata library writes them (issue 12 item 1):
 * tests/data/anndata, made by its make.py (README.md lists the cases).
 * Each loads, or gives the error that says what is wrong and what to do.
 * Files load through the reader child, as alphast reads them; one test
 * compares that with the parse in this process. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "data/data.h"
#include "train/train.h"

#define ANNDATA ALPHAST_SOURCE_DIR "/tests/data/anndata/"

static const char *const GENES[] = {"Gad1", "Sst", "Vip", "Pvalb"};

/* make.py's counts: cell c, gene g = (c + 1) * (g + 1) % 5. */
static float count(int c, int g) { return (float)((c + 1) * (g + 1) % 5); }

static ast_data_opts opts(void)
{
    ast_data_opts o;
    ast_data_opts_default(&o);
    o.cell_type_key = NULL;
    return o;
}

static ast_dataset load(const char *file, const ast_data_opts *o)
{
    ast_dataset d;
    ast_error e = {""};
    cr_assert(ast_data_read(file, o, &d, &e) == 0, "%s", e.msg);
    return d;
}

static void expect_error(const char *file, const ast_data_opts *o, const char *needle)
{
    ast_dataset d;
    ast_error e = {""};
    cr_assert(ast_data_read(file, o, &d, &e) < 0, "%s should fail", file);
    cr_assert(strstr(e.msg, needle), "message '%s' lacks '%s'", e.msg, needle);
    cr_assert(strstr(e.msg, file), "message '%s' does not name the file", e.msg);
}

/* The 6 x G counts of make.py, genes and cells named as there. */
static void expect_counts(const ast_dataset *d, int genes)
{
    cr_assert_eq(d->n_cells, 6);
    cr_assert_eq(d->n_genes, genes);
    for (int g = 0; g < genes; g++) cr_assert_str_eq(d->genes[g], GENES[g]);
    float row[4];
    for (int c = 0; c < 6; c++) {
        ast_data_row(d, c, row);
        for (int g = 0; g < genes; g++) cr_assert_eq(row[g], count(c, g), "X[%d, %d] = %g", c, g, row[g]);
    }
    cr_assert(d->cell_names, "obs_names");
    char name[16];
    for (int c = 0; c < 6; c++) {
        snprintf(name, sizeof name, "cell%d", c);
        cr_assert_str_eq(d->cell_names[c], name);
    }
}

static const ast_obs_column *column(const ast_dataset *d, const char *name)
{
    for (int j = 0; j < d->n_obs; j++)
        if (!strcmp(d->obs[j].name, name)) return &d->obs[j];
    cr_assert_fail("no obs column '%s'", name);
    return NULL;
}

/* ---- the index, obsm, compression ---------------------------------------- */

Test(anndata, index_named_by_the_index_attribute)
{
    /* var.index.name = 'gene_symbol': was "no gene names at var/_index" */
    ast_data_opts o = opts();
    ast_dataset d = load(ANNDATA "index_named.h5ad", &o);
    expect_counts(&d, 4);
    cr_assert_eq(d.coord_dims, 2);
    cr_assert_eq(d.pos[5 * 3 + 1], 10.0f);
    ast_dataset_free(&d);
}

Test(anndata, obsm_dataframe_gives_the_coordinates)
{
    ast_data_opts o = opts();
    ast_dataset d = load(ANNDATA "obsm_dataframe.h5ad", &o);
    cr_assert_eq(d.coord_dims, 2);
    for (int c = 0; c < 6; c++) {
        cr_assert_eq(d.pos[c * 3], (float)c, "x of cell %d", c);
        cr_assert_eq(d.pos[c * 3 + 1], 2.0f * c, "y of cell %d", c);
        cr_assert_eq(d.pos[c * 3 + 2], 0.0f);
    }
    ast_dataset_free(&d);
}

Test(anndata, lzf_compressed_datasets_read)
{
    ast_data_opts o = opts();
    o.slice_key = "slice";
    ast_dataset d = load(ANNDATA "lzf.h5ad", &o);
    expect_counts(&d, 4);
    cr_assert_eq(d.n_slices, 2);
    cr_assert(d.slice[0] == 0 && d.slice[5] == 1);
    ast_dataset_free(&d);
}

/* A dataset compressed with a filter libhdf5 lacks: the error names the
 * filter, not damage. Written here with a stand-in filter registered in
 * this process only for the write. */
static size_t pass_through(unsigned flags, size_t n, const unsigned p[], size_t nbytes, size_t *size, void **buf)
{
    return nbytes;
}

Test(anndata, a_missing_compression_filter_is_named)
{
    char dir[] = "/tmp/alphast-anndata-XXXXXX", path[300], cmd[700];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/filtered.h5ad", dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", ANNDATA "index_named.h5ad", path);
    cr_assert_eq(system(cmd), 0);
    const H5Z_class2_t fake = {H5Z_CLASS_T_VERS, 40000, 1, 1, "stand-in", NULL, NULL, pass_through};
    cr_assert(H5Zregister(&fake) >= 0);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), p = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t dims[2] = {6, 4}, chunk[2] = {6, 4};
    float x[24] = {0};
    H5Pset_chunk(p, 2, chunk);
    H5Pset_filter(p, 40000, H5Z_FLAG_MANDATORY, 0, NULL);
    H5Ldelete(f, "X", H5P_DEFAULT);
    hid_t s = H5Screate_simple(2, dims, NULL), d = H5Dcreate2(f, "X", H5T_IEEE_F32LE, s, H5P_DEFAULT, p, H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, x);
    H5Dclose(d), H5Sclose(s), H5Pclose(p), H5Fclose(f);
    cr_assert(H5Zunregister(40000) >= 0);
    ast_data_opts o = opts();
    expect_error(path, &o, "X is compressed with HDF5 filter 40000 ('stand-in'), which this libhdf5 cannot decode; "
                           "write the file again with compression='gzip' or 'lzf'");
}

/* ---- obs ------------------------------------------------------------------- */

Test(anndata, every_obs_column_is_read)
{
    ast_data_opts o = opts();
    ast_dataset d = load(ANNDATA "obs_columns.h5ad", &o);
    cr_assert_eq(d.n_obs, 8);
    const ast_obs_column *c = column(&d, "category");
    const int codes[6] = {0, 1, 0, -1, 1, 0}, int_codes[6] = {1, 0, 1, 0, 0, 1};
    cr_assert(c->kind == AST_OBS_CATEGORY && c->n_categories == 2);
    cr_assert(!strcmp(c->categories[0], "b") && !strcmp(c->categories[1], "a"), "categories in the file's order");
    cr_assert_eq(memcmp(c->codes, codes, sizeof codes), 0, "codes, NaN as -1");
    c = column(&d, "int_category");
    cr_assert(c->kind == AST_OBS_CATEGORY && c->n_categories == 2);
    cr_assert(!strcmp(c->categories[0], "1") && !strcmp(c->categories[1], "3"), "number categories as text");
    cr_assert_eq(memcmp(c->codes, int_codes, sizeof int_codes), 0);
    c = column(&d, "label"); /* unique strings: a string array, not a categorical */
    cr_assert(c->kind == AST_OBS_CATEGORY && c->n_categories == 6);
    cr_assert(!strcmp(c->categories[c->codes[4]], "id4"));
    const double counts[6] = {0, 10, 20, 30, 40, 50}, flags[6] = {1, 0, 1, 0, 1, 0};
    c = column(&d, "count");
    cr_assert(c->kind == AST_OBS_NUMBER && !memcmp(c->numbers, counts, sizeof counts));
    c = column(&d, "flag"); /* numpy bool: an HDF5 enum */
    cr_assert(c->kind == AST_OBS_NUMBER && !memcmp(c->numbers, flags, sizeof flags));
    c = column(&d, "score");
    cr_assert(c->kind == AST_OBS_NUMBER && isnan(c->numbers[1]) && c->numbers[5] == 4.5);
    c = column(&d, "nullable_int");
    cr_assert(c->kind == AST_OBS_NUMBER && c->numbers[0] == 1 && isnan(c->numbers[1]) && isnan(c->numbers[4]) &&
              c->numbers[5] == 6);
    c = column(&d, "nullable_bool");
    cr_assert(c->kind == AST_OBS_NUMBER && c->numbers[0] == 1 && isnan(c->numbers[1]) && c->numbers[2] == 0);
    cr_assert_str_eq(d.cell_names[3], "cell3");
    ast_dataset_free(&d);
}

Test(anndata, slices_from_category_or_number_columns)
{
    ast_data_opts o = opts();
    o.slice_key = "int_category";
    ast_dataset d = load(ANNDATA "obs_columns.h5ad", &o);
    cr_assert_eq(d.n_slices, 2);
    cr_assert(d.slice[0] == 1 && d.slice[1] == 0, "slices are the codes");
    ast_dataset_free(&d);
    o.slice_key = "flag";
    d = load(ANNDATA "obs_columns.h5ad", &o);
    cr_assert_eq(d.n_slices, 2);
    cr_assert(d.slice[0] == 1 && d.slice[1] == 0, "distinct numbers, increasing");
    ast_dataset_free(&d);
    o.slice_key = "section";
    expect_error(ANNDATA "obs_columns.h5ad", &o, "no obs column 'section' (columns: category, int_category, label, "
                                                 "count, score, flag, nullable_int, nullable_bool); set data.slice_key");
}

Test(anndata, missing_categories_are_unknown_cell_types_but_no_slice)
{
    /* They were a silent slice -1: never normalised, and read out of
     * bounds with data.set_size: 0. */
    ast_data_opts o = opts();
    o.cell_type_key = "cell_type";
    ast_dataset d = load(ANNDATA "nan_category.h5ad", &o);
    cr_assert_eq(d.n_types, 2);
    const int types[6] = {0, -1, 1, 0, -1, 1};
    cr_assert_eq(memcmp(d.cell_type, types, sizeof types), 0, "NaN is an unknown type (-1)");
    ast_dataset_free(&d);
    o.slice_key = "slice";
    expect_error(ANNDATA "nan_category.h5ad", &o, "obs/slice: 1 of 6 cells have no slice (a missing value, NaN in "
                                                  "pandas; the first is cell 2 'cell2'); every cell needs one: fill "
                                                  "them in, or drop those cells (adata = adata[adata.obs['slice'].notna()])");
}

/* ---- which matrix ----------------------------------------------------------------- */

/* stderr into a file while f runs; returns what was written (static). */
static const char *stderr_of(void (*f)(void *), void *arg)
{
    static char text[4096];
    char path[] = "/tmp/alphast-anndata-log-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    f(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = 0;
    close(fd), unlink(path);
    return text;
}

static void preprocess(void *d)
{
    ast_data_opts o = opts();
    o.scale = 0;
    ast_error e = {""};
    cr_assert(ast_data_preprocess(d, &o, &e) == 0, "%s", e.msg);
}

Test(anndata, log_normalised_x_is_reported_not_normalised_again)
{
    ast_data_opts o = opts();
    ast_dataset d = load(ANNDATA "scanpy_state.h5ad", &o);
    cr_assert_eq(d.n_genes, 3);
    float before[6 * 3], after[6 * 3];
    for (int c = 0; c < 6; c++) ast_data_row(&d, c, before + c * 3);
    const char *log = stderr_of(preprocess, &d);
    for (int c = 0; c < 6; c++) ast_data_row(&d, c, after + c * 3);
    cr_assert(strstr(log, "scanpy_state.h5ad: the expression matrix holds values that are not counts") &&
              strstr(log, "taken as already log-normalised") && strstr(log, "set data.layer (e.g. counts) or "
                                                                              "data.use_raw: true"), "%s", log);
    cr_assert_eq(memcmp(before, after, sizeof before), 0, "used as it is, not log1p'd twice");
    ast_dataset_free(&d);
}

Test(anndata, data_layer_and_use_raw_choose_the_matrix)
{
    ast_data_opts o = opts();
    o.layer = "counts";
    ast_dataset d = load(ANNDATA "scanpy_state.h5ad", &o);
    expect_counts(&d, 3); /* the counts of X's 3 genes */
    ast_dataset_free(&d);
    o.layer = NULL, o.use_raw = 1;
    d = load(ANNDATA "scanpy_state.h5ad", &o);
    expect_counts(&d, 4); /* raw: all 4 genes, named by raw/var */
    ast_dataset_free(&d);
}

Test(anndata, a_matrix_that_is_not_there_is_named)
{
    ast_data_opts o = opts();
    o.layer = "spliced";
    expect_error(ANNDATA "scanpy_state.h5ad", &o, "no layer 'spliced' (layers: counts); set data.layer to one of "
                                                  "them, or to null for X");
    o.use_raw = 1, o.layer = "counts";
    expect_error(ANNDATA "scanpy_state.h5ad", &o, "data.layer ('counts') and data.use_raw both choose the matrix; "
                                                  "set one of them");
    o.layer = NULL;
    expect_error(ANNDATA "index_named.h5ad", &o, "no raw/X (the file was written without adata.raw); set "
                                                 "data.use_raw: false");
}

Test(anndata, a_layer_or_raw_of_other_cells_is_named)
{
    /* It was "obsm/spatial is [6, 2]; expected [8, 2]", blaming the coordinates. */
    ast_data_opts o = opts();
    o.layer = "counts";
    expect_error(ANNDATA "layer_rows.h5ad", &o, "layers/counts has 8 rows, obs has 6 (obs/_index); every matrix has "
                                                "one row per cell");
    o.layer = NULL, o.use_raw = 1;
    expect_error(ANNDATA "layer_rows.h5ad", &o, "raw/X has 5 rows, obs has 6 (obs/_index)");
}

Test(anndata, data_layer_and_use_raw_are_config_keys)
{
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string("data: {layer: counts, use_raw: true}\n", "keys.yaml", &e);
    cr_assert(cfg, "%s", e.msg);
    ast_data_opts o;
    ast_data_opts_from_cfg(cfg, &o);
    cr_assert_str_eq(o.layer, "counts");
    cr_assert_eq(o.use_raw, 1);
    ast_cfg_free(cfg);
    cfg = ast_cfg_load_string("data: {path: x.h5ad}\n", "defaults.yaml", &e);
    cr_assert(cfg, "%s", e.msg);
    ast_data_opts_from_cfg(cfg, &o);
    cr_assert(!o.layer && !o.use_raw, "X by default");
    ast_cfg_free(cfg);
}

/* ---- anndata 0.7 ------------------------------------------------------------------- */

Test(anndata, anndata_07_layout)
{
    ast_data_opts o = opts();
    o.slice_key = "slice";
    const char *files[] = {ANNDATA "anndata_0.7.h5ad", ANNDATA "anndata_0.7.0.h5ad"}; /* CSR; h5sparse CSC */
    for (int i = 0; i < 2; i++) {
        ast_dataset d = load(files[i], &o);
        expect_counts(&d, 4);
        cr_assert_eq(d.n_slices, 2, "%s: the categorical through its reference", files[i]);
        cr_assert(d.slice[2] == 0 && d.slice[3] == 1);
        cr_assert(column(&d, "depth")->kind == AST_OBS_NUMBER && column(&d, "depth")->numbers[4] == 4.0);
        ast_dataset_free(&d);
        o.use_raw = 1;
        d = load(files[i], &o);
        expect_counts(&d, 4);
        ast_dataset_free(&d);
        o.use_raw = 0;
    }
}

/* ---- what was missing ----------------------------------------------------------------- */

Test(anndata, missing_parts_are_named_not_called_damage)
{
    ast_data_opts o = opts();
    expect_error(ANNDATA "x_without_indptr.h5ad", &o, "X has no 'indptr' (expected a 1-D array of offsets there; the "
                                                      "file was written without it, or not by anndata)");
    expect_error(ANNDATA "var_index_missing.h5ad", &o, "var: its '_index' attribute names 'gene_symbol' as the "
                                                       "index, but there is no var/gene_symbol");
}

/* ---- what anndata refuses or warns about ----------------------------------------------- */

Test(anndata, repeated_categories_are_refused)
{
    /* They trained as 2 slices both called s0, and sample wrote them into
     * a file that anndata could not read back. */
    ast_data_opts o = opts();
    expect_error(ANNDATA "dup_categories.h5ad", &o, "obs/slice: category 's0' appears twice, which pandas refuses; "
                                                    "merge the two or rename one");
}

Test(anndata, strings_that_are_not_utf8_are_refused)
{
    /* sample wrote them into a UTF-8 string dataset, which anndata could
     * not decode. */
    ast_data_opts o = opts();
    expect_error(ANNDATA "not_utf8.h5ad", &o, "obs/_index: string 0 ('caf\\xe90') is not UTF-8 text, which anndata "
                                              "cannot read either");
}

static void load_repeated_genes(void *d)
{
    ast_data_opts o = opts();
    *(ast_dataset *)d = load(ANNDATA "dup_var_names.h5ad", &o);
}

Test(anndata, repeated_gene_names_are_a_warning)
{
    ast_dataset d;
    const char *log = stderr_of(load_repeated_genes, &d);
    cr_assert(strstr(log, "dup_var_names.h5ad: var: 1 gene name is repeated (the first: 'Gad1'); genes are "
                          "matched by name") && strstr(log, "adata.var_names_make_unique()"), "%s", log);
    cr_assert_eq(d.n_genes, 4, "and the file loads");
    ast_dataset_free(&d);
}

Test(anndata, nullable_string_columns_are_read)
{
    /* anndata >= 0.11 writes string columns so; they were left out. */
    ast_data_opts o = opts();
    o.cell_type_key = "slice";
    ast_dataset d = load(ANNDATA "nullable_strings.h5ad", &o);
    cr_assert_eq(d.n_obs, 2);
    const ast_obs_column *c = column(&d, "slice");
    const int codes[6] = {0, 0, -1, 1, 1, 1};
    cr_assert(c->kind == AST_OBS_CATEGORY && c->n_categories == 2);
    cr_assert(!strcmp(c->categories[0], "s0") && !strcmp(c->categories[1], "s1"));
    cr_assert_eq(memcmp(c->codes, codes, sizeof codes), 0, "the masked value is missing");
    cr_assert_eq(memcmp(d.cell_type, codes, sizeof codes), 0, "a cell type key");
    c = column(&d, "label");
    cr_assert(c->kind == AST_OBS_CATEGORY && c->n_categories == 6 && !strcmp(c->categories[c->codes[4]], "id4"));
    ast_dataset_free(&d);
}

/* ---- the reader child and the cache carry everything ------------------------------------ */

static void expect_same_obs(const ast_dataset *a, const ast_dataset *b)
{
    cr_assert_eq(a->n_obs, b->n_obs);
    cr_assert_eq(!a->cell_names, !b->cell_names);
    for (int64_t c = 0; a->cell_names && c < a->n_cells; c++) cr_assert_str_eq(a->cell_names[c], b->cell_names[c]);
    for (int j = 0; j < a->n_obs; j++) {
        const ast_obs_column *x = &a->obs[j], *y = &b->obs[j];
        cr_assert_str_eq(x->name, y->name);
        cr_assert_eq(x->kind, y->kind, "%s", x->name);
        if (x->kind == AST_OBS_NUMBER) {
            cr_assert_eq(memcmp(x->numbers, y->numbers, (size_t)a->n_cells * sizeof(double)), 0, "%s", x->name);
            continue;
        }
        cr_assert_eq(x->n_categories, y->n_categories, "%s", x->name);
        cr_assert_eq(memcmp(x->codes, y->codes, (size_t)a->n_cells * sizeof(int)), 0, "%s", x->name);
        for (int k = 0; k < x->n_categories; k++) cr_assert_str_eq(x->categories[k], y->categories[k]);
    }
}

Test(anndata, the_reader_child_carries_cell_names_and_obs)
{
    ast_data_opts o = opts();
    ast_dataset child = load(ANNDATA "obs_columns.h5ad", &o), direct;
    ast_error e = {""};
    cr_assert(ast_data_read_h5ad_direct(ANNDATA "obs_columns.h5ad", &o, &direct, &e) == 0, "%s", e.msg);
    cr_assert_eq(child.n_obs, 8);
    expect_same_obs(&child, &direct);
    ast_dataset_free(&child), ast_dataset_free(&direct);
}

Test(anndata, the_cache_carries_cell_names_and_obs)
{
    char dir[] = "/tmp/alphast-anndata-XXXXXX";
    cr_assert(mkdtemp(dir));
    ast_data_opts o = opts();
    ast_dataset fresh, hit;
    ast_error e = {""};
    cr_assert(ast_data_load(ANNDATA "obs_columns.h5ad", &o, dir, &fresh, &e) == 0, "%s", e.msg);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "test $(ls %s/*.safetensors | wc -l) -eq 1", dir);
    cr_assert_eq(system(cmd), 0, "the first load writes the cache the second reads");
    cr_assert(ast_data_load(ANNDATA "obs_columns.h5ad", &o, dir, &hit, &e) == 0, "%s", e.msg);
    cr_assert_eq(hit.n_obs, 8);
    expect_same_obs(&fresh, &hit);
    ast_dataset_free(&fresh), ast_dataset_free(&hit);
}
