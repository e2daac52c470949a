/* AnnData .h5ad through libhdf5, as anndata 0.7 to 0.10 write it: the
 * expression matrix (X, or the layer or raw/X that data.layer and
 * data.use_raw choose), the genes (the var index), the coordinates
 * (obsm/<key>, an array or a DataFrame), and obs: the cell names (its
 * index) and every column, from which the slices and cell types come.
 *
 * This is the parse itself, in the calling process; ast_data_read_h5ad
 * (data_h5ad_child.c) runs it in a child process under a time limit.
 * Nothing read from the file is trusted (data_h5ad_io.c checks every
 * size), and a file that fails a check gets one error naming the file,
 * the dataset or attribute and what to do. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_h5ad.h"
#include "data/data_labels.h"

/* ---- the matrix and its genes ------------------------------------------------- */

/* The matrix data.layer / data.use_raw choose and the dataframe that
 * names its genes, as scanpy's layer= and use_raw= do. */
static int choose_matrix(h5ad *h, const ast_data_opts *o, char *key, char *var, size_t n)
{
    int layer = o->layer && o->layer[0];
    snprintf(key, n, "%s%s", layer ? "layers/" : o->use_raw ? "raw/X" : "X", layer ? o->layer : "");
    snprintf(var, n, "%s", o->use_raw && !layer ? "raw/var" : "var");
    if (layer && o->use_raw)
        ast_error_set(h->e, "%s: data.layer ('%s') and data.use_raw both choose the matrix; set one of them (scanpy "
                      "refuses both too)", h->path, o->layer);
    else if (h5ad_exists(h, key))
        return 0;
    else if (layer) {
        ast_strlist found = {0};
        char list[512];
        h5ad_members(h, "layers", &found);
        ast_error_set(h->e, "%s: no layer '%s' (layers: %s); set data.layer to one of them, or to null for X",
                      h->path, o->layer, ast_strlist_join(&found, ", ", "none", list, sizeof list));
        ast_strlist_free(&found);
    } else if (o->use_raw)
        ast_error_set(h->e, "%s: no raw/X (the file was written without adata.raw); set data.use_raw: false",
                      h->path);
    else if (o->expression_optional) {
        key[0] = 0; /* none: read_all reads the cells alone */
        return 0;
    } else
        ast_error_set(h->e, "%s: no X matrix (not an AnnData file?)", h->path);
    return -1;
}

static int check_finite(h5ad *h, const char *key, const ast_dataset *d)
{
    const ast_csr *m = &d->x;
    for (int64_t c = 0; c < d->n_cells; c++)
        for (int64_t k = m->indptr[c]; k < m->indptr[c + 1]; k++)
            if (!isfinite(m->values[k])) {
                ast_error_set(h->e, "%s: %s[%lld, %d] (gene %s) is %g; clean the matrix before training", h->path,
                              key, (long long)c, m->indices[k], d->genes[m->indices[k]], m->values[k]);
                return 0;
            }
    return 1;
}

/* anndata warns about repeated gene names, and so does alphast: genes
 * are matched by name (data.genes, training.init_from), which cannot
 * tell two of one name apart. */
static void warn_repeated_genes(h5ad *h, const char *var, const ast_dataset *d)
{
    char **names;
    int n_names;
    int *codes = ast_labels_of_strings(d->genes, d->n_genes, &names, &n_names);
    int first = 0;
    while (first < d->n_genes && codes[first] == first) first++;
    if (n_names < d->n_genes)
        ast_log(AST_LOG_WARN, "%s: %s: %d gene name%s repeated (the first: '%s'); genes are matched by name "
                "(data.genes, training.init_from), which is ambiguous for them: make the names unique "
                "(adata.var_names_make_unique()) and save the file again", h->path, var, d->n_genes - n_names,
                d->n_genes - n_names == 1 ? " is" : "s are", d->genes[first]);
    free(codes);
    h5ad_free_strings(names, n_names);
}

/* The var columns alphast can read, kept only to be written back: a
 * damaged one leaves them all out with a warning, never fails the read. */
static void read_var_columns(h5ad *h, h5ad_frame *f, ast_dataset *d)
{
    d->var = ast_xcalloc((size_t)f->n_columns + 1, sizeof *d->var);
    for (int j = 0; j < f->n_columns; j++) {
        int rc = h5ad_frame_column(h, f, f->columns[j], d->n_genes, &d->var[d->n_var]);
        d->n_var += rc == 1;
        if (rc >= 0) continue;
        ast_log(AST_LOG_WARN, "%s (the var columns are left out of what alphast writes)", h->e->msg);
        h->e->msg[0] = 0;
        for (int k = 0; k <= d->n_var; k++) ast_obs_column_free(&d->var[k]); /* the failed one too */
        d->n_var = 0;
        return;
    }
}

static int read_genes(h5ad *h, const char *var, const char *key, ast_dataset *d)
{
    h5ad_frame f;
    int64_t n = 0;
    if (h5ad_frame_open(h, var, &f) < 0) return 0;
    d->genes = h5ad_frame_index(h, &f, d->n_genes, &n);
    if (d->genes && n != d->n_genes) {
        ast_error_set(h->e, "%s: %s has %lld genes but %s has %d columns", h->path, var, (long long)n, key, d->n_genes);
        h5ad_free_strings(d->genes, n);
        d->genes = NULL;
    }
    if (d->genes) warn_repeated_genes(h, var, d);
    if (d->genes) read_var_columns(h, &f, d);
    h5ad_frame_close(&f);
    return d->genes != NULL;
}

static int read_matrix(h5ad *h, const char *key, const char *var, ast_dataset *d)
{
    int64_t genes;
    if (h5ad_read_matrix(h, key, &d->x, &d->n_cells, &genes) < 0) return 0;
    d->n_genes = (int)genes;
    return read_genes(h, var, key, d) && check_finite(h, key, d);
}

/* A file without the matrix (ast_data_opts.expression_optional): the
 * cells are counted by the obs names, and have no genes. */
static int read_cells_only(h5ad *h, ast_dataset *d)
{
    h5ad_frame f;
    int64_t n = 0;
    if (!h5ad_exists(h, "obs")) {
        ast_error_set(h->e, "%s: no X matrix and no obs to count the cells by; write the file from an AnnData object",
                      h->path);
        return 0;
    }
    if (h5ad_frame_open(h, "obs", &f) < 0) return 0;
    char **names = h5ad_exists(h, f.index) && h5ad_string_dataset(h, f.index) ? h5ad_frame_index(h, &f, 0, &n) : NULL;
    if (!names && !h->e->msg[0])
        ast_error_set(h->e, "%s: no X matrix, and obs has no names to count the cells by; give obs an index of cell "
                      "names", h->path);
    h5ad_frame_close(&f);
    if (names) h5ad_free_strings(names, n);
    d->n_cells = n;
    d->x = (ast_csr){ast_xcalloc((size_t)n + 1, sizeof(int64_t)), ast_xcalloc(1, sizeof(int32_t)),
                     ast_xcalloc(1, sizeof(float))};
    d->genes = ast_xcalloc(1, sizeof *d->genes);
    return names != NULL;
}

/* ---- coordinates ---------------------------------------------------------------- */

static void coords_missing(h5ad *h, const char *key)
{
    ast_strlist found = {0};
    char list[512];
    h5ad_members(h, "obsm", &found);
    ast_error_set(h->e, "%s: no coordinates at obsm/%s (present: %s); set data.preprocessing.position_key "
                  "(alphast-run predict: --position-key)", h->path,
                  key, ast_strlist_join(&found, ", ", "none", list, sizeof list));
    ast_strlist_free(&found);
}

static float *coords_of_array(h5ad *h, const char *path, int64_t cells, int *dims)
{
    extent x;
    float *raw = h5ad_read_numeric(h, path, 2, "[cells, 2] or [cells, 3] coordinates", H5T_NATIVE_FLOAT, &x);
    if (!raw) return NULL;
    if (x.dims[0] != cells || (x.dims[1] != 2 && x.dims[1] != 3)) {
        ast_error_set(h->e, "%s: %s is [%lld, %lld]; expected [%lld, 2] or [%lld, 3]", h->path, path,
                      (long long)x.dims[0], (long long)x.dims[1], (long long)cells, (long long)cells);
        free(raw);
        return NULL;
    }
    *dims = (int)x.dims[1];
    float *pos = ast_xcalloc((size_t)cells * 3, sizeof(float));
    for (int64_t i = 0; i < cells; i++)
        for (int k = 0; k < *dims; k++) pos[i * 3 + k] = raw[i * *dims + k];
    free(raw);
    return pos;
}

/* Column k of an obsm DataFrame into coordinate k of pos. */
static int frame_coord(h5ad *h, const h5ad_frame *f, int k, int64_t cells, float *pos)
{
    ast_obs_column c;
    int rc = h5ad_frame_column(h, f, f->columns[k], cells, &c), ok = rc == 1 && c.kind == AST_OBS_NUMBER;
    if (rc >= 0 && !ok)
        ast_error_set(h->e, "%s: %s/%s does not hold numbers; expected a coordinate", h->path, f->key, f->columns[k]);
    for (int64_t i = 0; ok && i < cells; i++) pos[i * 3 + k] = (float)c.numbers[i];
    ast_obs_column_free(&c);
    return ok;
}

/* An obsm DataFrame (e.g. columns x, y): 2 or 3 columns of numbers. */
static float *coords_of_frame(h5ad *h, const char *path, int64_t cells, int *dims)
{
    h5ad_frame f;
    if (h5ad_frame_open(h, path, &f) < 0) return NULL;
    float *pos = NULL;
    if (f.n_columns != 2 && f.n_columns != 3)
        ast_error_set(h->e, "%s: %s is a DataFrame of %d columns; expected 2 or 3 coordinate columns (x, y[, z])",
                      h->path, path, f.n_columns);
    else
        pos = ast_xcalloc((size_t)cells * 3, sizeof(float));
    for (int k = 0; pos && k < f.n_columns; k++)
        if (!frame_coord(h, &f, k, cells, pos)) free(pos), pos = NULL;
    *dims = f.n_columns;
    h5ad_frame_close(&f);
    return pos;
}

/* 2-D data keep z = 0 here; preprocessing lifts slices to 3-D. */
static int read_coords(h5ad *h, const ast_data_opts *o, ast_dataset *d)
{
    char path[H5AD_PATH];
    h5ad_join(path, "obsm", o->position_key);
    if (!h5ad_exists(h, path) && o->positions_optional) {
        d->pos = ast_xcalloc((size_t)d->n_cells * 3, sizeof(float)); /* coord_dims 0: none */
        return 1;
    }
    if (!h5ad_exists(h, path)) {
        coords_missing(h, o->position_key);
        return 0;
    }
    H5O_type_t type = h5ad_object_type(h, path, "coordinates");
    if (type == H5O_TYPE_DATASET) d->pos = coords_of_array(h, path, d->n_cells, &d->coord_dims);
    else if (type == H5O_TYPE_GROUP) d->pos = coords_of_frame(h, path, d->n_cells, &d->coord_dims);
    for (int64_t i = 0; d->pos && i < d->n_cells * 3; i++)
        if (!isfinite(d->pos[i])) {
            ast_error_set(h->e, "%s: coordinate of cell %lld is %g", h->path, (long long)(i / 3), d->pos[i]);
            return 0;
        }
    return d->pos != NULL;
}

/* ---- obs -------------------------------------------------------------------------- */

/* scanpy's colours of a categorical column, uns/<name>_colors: one
 * string per category, else they are not the column's (and left out). */
static int read_colors(h5ad *h, ast_obs_column *c)
{
    char path[H5AD_PATH], key[H5AD_PATH];
    snprintf(key, sizeof key, "%s_colors", c->name);
    h5ad_join(path, "uns", key);
    if (c->kind != AST_OBS_CATEGORY || !h5ad_exists(h, path) || !h5ad_string_dataset(h, path)) return 1;
    int64_t n = 0;
    char **colors = h5ad_read_strings(h, path, "a 1-D array of colours", &n);
    if (colors && n == c->n_categories) c->colors = colors;
    else if (colors) h5ad_free_strings(colors, n);
    return colors != NULL;
}

/* obs: the cell names (its index) and every column alphast can read. A
 * file without obs (written by hand) has neither. The names are counted
 * against the rows of the matrix at `key` before anything else is: a
 * layer or raw/X of other cells is what is wrong then, not the obs
 * columns or the coordinates. */
static int read_obs(h5ad *h, const char *key, ast_dataset *d)
{
    h5ad_frame f;
    if (!h5ad_exists(h, "obs")) return 1;
    if (h5ad_frame_open(h, "obs", &f) < 0) return 0;
    int64_t n = 0;
    if (h5ad_exists(h, f.index) && (d->cell_names = h5ad_frame_index(h, &f, d->n_cells, &n)) && n != d->n_cells) {
        ast_error_set(h->e, "%s: %s has %lld rows, obs has %lld (%s); every matrix has one row per cell: write the "
                      "file again from the AnnData object", h->path, key, (long long)d->n_cells, (long long)n, f.index);
        h5ad_free_strings(d->cell_names, n);
        d->cell_names = NULL;
    }
    int ok = !h->e->msg[0];
    d->obs = ast_xcalloc((size_t)f.n_columns + 1, sizeof *d->obs);
    for (int j = 0; ok && j < f.n_columns; j++) {
        int rc = h5ad_frame_column(h, &f, f.columns[j], d->n_cells, &d->obs[d->n_obs]);
        ok = rc >= 0 && (rc == 0 || read_colors(h, &d->obs[d->n_obs]));
        d->n_obs += rc == 1;
    }
    h5ad_frame_close(&f);
    return ok;
}

static const ast_obs_column *obs_column(const ast_dataset *d, const char *key)
{
    for (int j = 0; j < d->n_obs; j++)
        if (!strcmp(d->obs[j].name, key)) return &d->obs[j];
    return NULL;
}

static void no_obs_column(h5ad *h, const ast_dataset *d, const char *key, const char *setting)
{
    ast_strlist names = {0};
    char list[512];
    for (int j = 0; j < d->n_obs; j++) ast_strlist_push(&names, d->obs[j].name);
    ast_error_set(h->e, "%s: no obs column '%s' (columns: %s); set %s to one of them", h->path, key,
                  ast_strlist_join(&names, ", ", "none", list, sizeof list), setting);
    ast_strlist_free(&names);
}

/* Every cell needs a slice, since slices index arrays downstream: cells
 * with a missing value (NaN in pandas, code -1) are an error, not a
 * slice -1. */
static int read_slices(h5ad *h, const char *key, ast_dataset *d)
{
    const ast_obs_column *c = obs_column(d, key);
    if (!c) {
        no_obs_column(h, d, key, "data.slice_key");
        return 0;
    }
    char **names;
    int n;
    int *codes = ast_labels_of_column(c, d->n_cells, &names, &n);
    int64_t missing = 0, first = -1;
    for (int64_t i = 0; i < d->n_cells; i++)
        if (codes[i] < 0 && !missing++) first = i;
    if (missing) {
        ast_error_set(h->e, "%s: obs/%s: %lld of %lld cells have no slice (a missing value, NaN in pandas; the first is "
                      "cell %lld%s%s%s); every cell needs one: fill them in, or drop those cells "
                      "(adata = adata[adata.obs['%s'].notna()])", h->path, key, (long long)missing,
                      (long long)d->n_cells, (long long)first, d->cell_names ? " '" : "",
                      d->cell_names ? d->cell_names[first] : "", d->cell_names ? "'" : "", key);
        free(codes);
        h5ad_free_strings(names, n);
        return 0;
    }
    d->slice = codes, d->n_slices = n;
    h5ad_free_strings(names, n);
    return 1;
}

static int read_all(h5ad *h, const ast_data_opts *o, ast_dataset *d)
{
    char key[H5AD_PATH], var[H5AD_PATH];
    if (choose_matrix(h, o, key, var, sizeof key) < 0 || !(key[0] ? read_matrix(h, key, var, d) : read_cells_only(h, d)) ||
        !read_obs(h, key[0] ? key : "obs", d) || !read_coords(h, o, d))
        return 0;
    if (o->slice_key && !read_slices(h, o->slice_key, d)) return 0;
    if (!o->slice_key) d->slice = ast_xcalloc((size_t)d->n_cells, sizeof *d->slice), d->n_slices = 1;
    /* Cell types are optional (docs/model.md §8.1): a missing column means none. */
    const ast_obs_column *types = o->cell_type_key ? obs_column(d, o->cell_type_key) : NULL;
    if (types) d->cell_type = ast_labels_of_column(types, d->n_cells, &d->type_names, &d->n_types);
    return 1;
}

int ast_data_read_h5ad_direct(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e)
{
    memset(out, 0, sizeof *out);
    e->msg[0] = 0;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported once, by us */
    ast_data_register_lzf();
    if (ast_check_regular(path, e) < 0) return -1;
    if (H5Fis_hdf5(path) <= 0) {
        ast_error_set(e, "%s: not an HDF5/AnnData file (missing, truncated or another format)", path);
        return -1;
    }
    h5ad h = {H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), path, e};
    if (h.file < 0) {
        ast_error_set(e, "%s: cannot open as HDF5 (truncated or damaged?)", path);
        return -1;
    }
    int ok = read_all(&h, o, out);
    H5Fclose(h.file);
    out->source = ast_xstrdup(path);
    if (!ok) ast_dataset_free(out);
    return ok ? 0 : -1;
}
