/* AnnData dataframes (obs, var, raw/var, an obsm DataFrame) and their
 * columns, in the layouts anndata 0.7 to 0.10 write: a group whose
 * "_index" attribute names the index dataset (anndata writes
 * var.index.name there, e.g. var/gene_symbol) and whose "column-order"
 * lists the columns; categorical columns as a group of codes and
 * categories (>= 0.8) or as a codes dataset whose "categories" attribute
 * is an object reference to __categories/<column> (0.7); strings,
 * numbers, booleans (an HDF5 enum), nullable numbers and (anndata >=
 * 0.11) nullable strings (values + mask). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "data/data_h5ad.h"
#include "data/data_labels.h"

/* Columns in the group's own order when it has no column-order: the
 * members other than the index and 0.7's __categories. */
static char **members(h5ad *h, const h5ad_frame *f, int *n)
{
    ast_strlist all = {0};
    h5ad_members(h, f->key, &all);
    char **out = ast_xcalloc((size_t)all.n + 1, sizeof *out);
    const char *index = f->index + strlen(f->key) + 1;
    *n = 0;
    for (int i = 0; i < all.n; i++)
        if (strcmp(all.v[i], index) && strcmp(all.v[i], "__categories")) out[(*n)++] = ast_xstrdup(all.v[i]);
    ast_strlist_free(&all);
    return out;
}

int h5ad_frame_open(h5ad *h, const char *key, h5ad_frame *f)
{
    memset(f, 0, sizeof *f);
    snprintf(f->key, sizeof f->key, "%s", key);
    H5O_type_t type = h5ad_object_type(h, key, "a dataframe group");
    if (type == H5O_TYPE_DATASET)
        ast_error_set(h->e, "%s: %s is a table dataset, the layout of anndata before 0.7; write the file again with "
                      "anndata 0.7 or later (anndata.read_h5ad(path).write_h5ad(path))", h->path, key);
    if (type != H5O_TYPE_GROUP) return -1;
    char index[256];
    if (h5ad_string_attr(h, key, "_index", index, sizeof index) < 0) return -1;
    f->named_index = index[0] != 0;
    h5ad_join(f->index, key, index[0] ? index : "_index");
    f->columns = H5Aexists_by_name(h->file, key, "column-order", H5P_DEFAULT) > 0
                     ? h5ad_string_array_attr(h, key, "column-order", &f->n_columns)
                     : members(h, f, &f->n_columns);
    return f->columns ? 0 : -1;
}

void h5ad_frame_close(h5ad_frame *f)
{
    h5ad_free_strings(f->columns, f->n_columns);
    memset(f, 0, sizeof *f);
}

/* ---- column readers ------------------------------------------------------------ */

static int check_length(h5ad *h, const char *path, int64_t got, int64_t want)
{
    if (got == want) return 1;
    ast_error_set(h->e, "%s: %s has %lld values for %lld rows " DAMAGED, h->path, path, (long long)got, (long long)want);
    return 0;
}

/* An HDF5 enum (how h5py stores booleans) as the numbers of its members. */
static double *read_enum(h5ad *h, const char *path, hid_t d, hid_t t, int64_t n)
{
    hid_t mt = H5Tget_native_type(t, H5T_DIR_DEFAULT), base = H5Tget_super(mt);
    size_t size = H5Tget_size(mt);
    int sign = H5Tget_sign(base) == H5T_SGN_2;
    unsigned char *raw = size <= 8 ? h5ad_alloc(h, path, h5ad_product(n, (int64_t)size), 1) : NULL;
    double *out = NULL;
    if (size > 8) ast_error_set(h->e, "%s: %s holds %zu-byte enum values " DAMAGED, h->path, path, size);
    else if (raw && H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0) h5ad_read_failed(h, d, path, "values");
    else if (raw && (out = h5ad_alloc(h, path, n, sizeof *out)))
        for (int64_t i = 0; i < n; i++) {
            int64_t v = 0;
            memcpy(&v, raw + i * (int64_t)size, size); /* little-endian hosts (x86-64, arm64) */
            if (sign && size < 8 && (v >> (8 * size - 1)) & 1) v -= (int64_t)1 << (8 * size);
            out[i] = (double)v;
        }
    free(raw);
    H5Tclose(base), H5Tclose(mt);
    return out;
}

/* A 1-D dataset of n numbers, integers, floats or booleans, as doubles. */
static double *read_numbers(h5ad *h, const char *path, int64_t n)
{
    extent x;
    hid_t d = h5ad_open_dataset(h, path, 1, "a 1-D column", &x);
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(t);
    double *out = NULL;
    int ok = check_length(h, path, x.n, n);
    if (ok && cls == H5T_ENUM) {
        out = read_enum(h, path, d, t, n);
    } else if (ok && cls != H5T_INTEGER && cls != H5T_FLOAT) {
        ast_error_set(h->e, "%s: %s does not hold numbers " DAMAGED, h->path, path);
    } else if (ok && (out = h5ad_alloc(h, path, n, sizeof *out)) &&
               H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
        h5ad_read_failed(h, d, path, "numbers");
        free(out);
        out = NULL;
    }
    H5Tclose(t);
    H5Dclose(d);
    return out;
}

/* Categories as strings: strings as they are, numbers as "%g". */
static char **read_categories(h5ad *h, const char *path, int64_t *n)
{
    extent x;
    hid_t d = h5ad_open_dataset(h, path, 1, "a 1-D array of categories", &x);
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d);
    int strings = H5Tget_class(t) == H5T_STRING;
    H5Tclose(t), H5Dclose(d);
    if (strings) return h5ad_read_strings(h, path, "a 1-D array of categories", n);
    double *v = read_numbers(h, path, x.n);
    if (!v) return NULL;
    char **out = ast_xcalloc((size_t)x.n + 1, sizeof *out);
    for (int64_t i = 0; i < x.n; i++) out[i] = ast_number_label(v[i]);
    free(v);
    *n = x.n;
    return out;
}

/* pandas refuses a categorical whose categories repeat, so anndata
 * cannot read the file, and the codes of the two could not be told
 * apart (2 slices both called s0). */
static int distinct_categories(h5ad *h, const char *column, char **cats, int64_t m)
{
    char **names;
    int n_names;
    int *codes = ast_labels_of_strings(cats, m, &names, &n_names);
    int64_t twice = -1;
    for (int64_t i = 0; i < m && twice < 0; i++)
        if (codes[i] != i) twice = i;
    if (twice >= 0) {
        char shown[64];
        ast_cfg_escape(cats[twice], shown, sizeof shown);
        ast_error_set(h->e, "%s: %s: category '%s' appears twice, which pandas refuses; merge the two or rename one "
                      "and save the file again", h->path, column, shown);
    }
    free(codes);
    h5ad_free_strings(names, n_names);
    return twice < 0;
}

/* Codes at codes_path into categories at cats_path, those of `column`; a
 * code outside the categories (pandas writes -1 for NaN) is missing. */
static int read_categorical(h5ad *h, const char *column, const char *codes_path, const char *cats_path, int64_t n,
                            ast_obs_column *out)
{
    int64_t m = 0;
    double *codes = read_numbers(h, codes_path, n);
    if (codes && (out->categories = read_categories(h, cats_path, &m)) && m > INT32_MAX) {
        ast_error_set(h->e, "%s: %s has %lld categories; at most %d are supported", h->path, cats_path, (long long)m,
                      INT32_MAX);
        h5ad_free_strings(out->categories, m);
        out->categories = NULL;
    }
    if (out->categories && !distinct_categories(h, column, out->categories, m)) {
        h5ad_free_strings(out->categories, m);
        out->categories = NULL;
    }
    if (out->categories) {
        out->kind = AST_OBS_CATEGORY;
        out->n_categories = (int)m;
        out->codes = ast_xmalloc((size_t)(n ? n : 1) * sizeof *out->codes);
        for (int64_t i = 0; i < n; i++) out->codes[i] = codes[i] >= 0 && codes[i] < (double)m ? (int)codes[i] : -1;
    }
    free(codes);
    return out->categories ? 1 : -1;
}

/* anndata 0.7: the codes dataset's "categories" attribute references the
 * categories dataset (__categories/<column>). */
static int read_categorical_07(h5ad *h, const char *path, int64_t n, ast_obs_column *out)
{
    hobj_ref_t ref;
    char cats[H5AD_PATH] = "";
    hid_t a = H5Aopen_by_name(h->file, path, "categories", H5P_DEFAULT, H5P_DEFAULT), t = a >= 0 ? H5Aget_type(a) : -1;
    hid_t sp = a >= 0 ? H5Aget_space(a) : -1, o = -1;
    if (a >= 0 && H5Tget_class(t) == H5T_REFERENCE && H5Sget_simple_extent_npoints(sp) == 1 &&
        H5Aread(a, H5T_STD_REF_OBJ, &ref) >= 0 && (o = H5Rdereference2(a, H5P_DEFAULT, H5R_OBJECT, &ref)) >= 0)
        H5Iget_name(o, cats, sizeof cats);
    if (o >= 0) H5Oclose(o);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    if (!cats[0]) {
        ast_error_set(h->e, "%s: %s: attribute 'categories' is not a reference to the categories " DAMAGED, h->path, path);
        return -1;
    }
    return read_categorical(h, path, path, cats, n, out);
}

/* A string column: its distinct strings, in order of appearance, are the
 * categories. With a mask (anndata >= 0.11's nullable-string-array:
 * values and mask, pandas' StringDtype) the masked ones are missing. */
static int read_string_column(h5ad *h, const char *path, const char *mask, int64_t n, ast_obs_column *out)
{
    int64_t m = 0;
    char **s = h5ad_read_strings(h, path, "a 1-D column", &m);
    double *missing = NULL;
    int ok = s && check_length(h, path, m, n) && (!mask || (missing = read_numbers(h, mask, n)));
    for (int64_t i = 0; ok && missing && i < n; i++)
        if (missing[i] != 0) free(s[i]), s[i] = NULL;
    if (ok) {
        out->kind = AST_OBS_CATEGORY;
        out->codes = ast_labels_of_strings(s, n, &out->categories, &out->n_categories);
    }
    h5ad_free_strings(s, m);
    free(missing);
    return ok ? 1 : -1;
}

/* anndata >= 0.8's nullable-integer and nullable-boolean: values with a
 * mask of the missing ones (NaN here). */
static int read_nullable(h5ad *h, const char *path, int64_t n, ast_obs_column *out)
{
    char values[H5AD_PATH], mask[H5AD_PATH];
    h5ad_join(values, path, "values");
    h5ad_join(mask, path, "mask");
    double *v = read_numbers(h, values, n), *m = v ? read_numbers(h, mask, n) : NULL;
    if (m)
        for (int64_t i = 0; i < n; i++)
            if (m[i] != 0) v[i] = NAN;
    free(m);
    if (!m) {
        free(v);
        return -1;
    }
    out->kind = AST_OBS_NUMBER;
    out->numbers = v;
    return 1;
}

static int read_group_column(h5ad *h, const char *path, int64_t n, ast_obs_column *out)
{
    char enc[64], codes[H5AD_PATH], cats[H5AD_PATH];
    if (h5ad_encoding(h, path, enc, sizeof enc) < 0) return -1;
    if (!strcmp(enc, "categorical")) {
        h5ad_join(codes, path, "codes");
        h5ad_join(cats, path, "categories");
        return read_categorical(h, path, codes, cats, n, out);
    }
    if (!strcmp(enc, "nullable-integer") || !strcmp(enc, "nullable-boolean")) return read_nullable(h, path, n, out);
    if (!strcmp(enc, "nullable-string-array")) {
        char values[H5AD_PATH], mask[H5AD_PATH];
        h5ad_join(values, path, "values");
        h5ad_join(mask, path, "mask");
        return read_string_column(h, values, mask, n, out);
    }
    ast_log(AST_LOG_WARN, "%s: %s has encoding '%s', which alphast does not read; the column is left out", h->path,
            path, enc[0] ? enc : "(none)");
    return 0;
}

static int read_dataset_column(h5ad *h, const char *path, int64_t n, ast_obs_column *out)
{
    if (H5Aexists_by_name(h->file, path, "categories", H5P_DEFAULT) > 0) return read_categorical_07(h, path, n, out);
    extent x;
    hid_t d = h5ad_open_dataset(h, path, 1, "a 1-D column", &x);
    if (d < 0) return -1;
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(t);
    H5Tclose(t), H5Dclose(d);
    if (cls == H5T_STRING) return read_string_column(h, path, NULL, n, out);
    if (cls == H5T_INTEGER || cls == H5T_FLOAT || cls == H5T_ENUM) {
        out->kind = AST_OBS_NUMBER;
        /* an enum is how h5py stores numpy.bool_ */
        out->stored = cls == H5T_INTEGER ? AST_OBS_INTS : cls == H5T_ENUM ? AST_OBS_BOOLS : AST_OBS_FLOATS;
        return (out->numbers = read_numbers(h, path, n)) ? 1 : -1;
    }
    ast_log(AST_LOG_WARN, "%s: %s holds neither strings nor numbers; the column is left out", h->path, path);
    return 0;
}

int h5ad_frame_column(h5ad *h, const h5ad_frame *f, const char *name, int64_t n_rows, ast_obs_column *out)
{
    char path[H5AD_PATH];
    memset(out, 0, sizeof *out);
    out->kind = -1;
    h5ad_join(path, f->key, name);
    H5O_type_t type = h5ad_object_type(h, path, "a column named in column-order");
    int rc = type == H5O_TYPE_GROUP     ? read_group_column(h, path, n_rows, out)
             : type == H5O_TYPE_DATASET ? read_dataset_column(h, path, n_rows, out)
                                        : -1;
    if (rc == 1) out->name = ast_xstrdup(name);
    return rc;
}

/* ---- the index ----------------------------------------------------------------- */

/* An index that is not a string dataset (a categorical index of 0.7 or
 * >= 0.8, numbers): read as a column, one string per row. */
static char **index_as_column(h5ad *h, const h5ad_frame *f, int64_t n)
{
    ast_obs_column c;
    int rc = h5ad_frame_column(h, f, f->index + strlen(f->key) + 1, n, &c);
    char **out = NULL;
    if (rc == 0)
        ast_error_set(h->e, "%s: %s holds neither strings nor numbers; expected the index " DAMAGED, h->path, f->index);
    if (rc == 1) {
        out = ast_xcalloc((size_t)n + 1, sizeof *out);
        for (int64_t i = 0; i < n; i++)
            out[i] = c.kind == AST_OBS_NUMBER ? ast_number_label(c.numbers[i])
                                               : ast_xstrdup(c.codes[i] >= 0 ? c.categories[c.codes[i]] : "nan");
    }
    ast_obs_column_free(&c);
    return out;
}

int h5ad_string_dataset(h5ad *h, const char *path)
{
    hid_t d = H5Dopen2(h->file, path, H5P_DEFAULT), t = d >= 0 ? H5Dget_type(d) : -1;
    int yes = t >= 0 && H5Tget_class(t) == H5T_STRING &&
              H5Aexists_by_name(h->file, path, "categories", H5P_DEFAULT) <= 0;
    if (t >= 0) H5Tclose(t);
    if (d >= 0) H5Dclose(d);
    return yes;
}

char **h5ad_frame_index(h5ad *h, const h5ad_frame *f, int64_t n_rows, int64_t *n)
{
    *n = 0;
    if (!h5ad_exists(h, f->index)) {
        if (f->named_index)
            ast_error_set(h->e, "%s: %s: its '_index' attribute names '%s' as the index, but there is no %s " DAMAGED,
                          h->path, f->key, f->index + strlen(f->key) + 1, f->index);
        else
            ast_error_set(h->e, "%s: %s has no index: no %s and no '_index' attribute naming another dataset " DAMAGED,
                          h->path, f->key, f->index);
        return NULL;
    }
    if (h5ad_string_dataset(h, f->index)) return h5ad_read_strings(h, f->index, "a 1-D array of names", n);
    char **s = index_as_column(h, f, n_rows);
    if (s) *n = n_rows;
    return s;
}
