/* The obs and var dataframes of a .h5ad file in anndata 0.8's encoding: a
 * group with its index in `_index`, the column names in `column-order`,
 * and one element per column: an int64 or float64 array, or a categorical
 * group (int32 codes, a string-array of categories, `ordered` false). */
#include <stdint.h>
#include <stdlib.h>

#include "io/h5ad_internal.h"

/* `ordered` as h5py stores a bool: an int8 enum of FALSE and TRUE, which
 * anndata reads as numpy.bool_ (a plain integer fails pandas' check). */
static hid_t bool_type(void)
{
    int8_t no = 0, yes = 1;
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    H5Tenum_insert(t, "FALSE", &no);
    H5Tenum_insert(t, "TRUE", &yes);
    return t;
}

static int attr_false(hid_t obj, const char *name)
{
    int8_t no = 0;
    hid_t t = bool_type(), sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, t, &no) >= 0;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp), H5Tclose(t);
    return ok ? 0 : -1;
}

static int categorical(hid_t loc, const ast_h5ad_column *c, hsize_t n)
{
    hid_t g = H5Gcreate2(loc, c->name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = g < 0 || h5w_encoding(g, "categorical", "0.2.0") || attr_false(g, "ordered") ||
             h5w_dataset(g, "codes", H5T_NATIVE_INT, 1, &n, c->codes, "array") ||
             h5w_strings(g, "categories", c->categories, c->n_categories);
    if (g >= 0) H5Gclose(g);
    return rc ? -1 : 0;
}

/* A boolean column as h5py writes numpy.bool_: the same enum. */
static int booleans(hid_t loc, const ast_h5ad_column *c, hsize_t n)
{
    int8_t *v = ast_xmalloc(n ? n : 1);
    for (hsize_t i = 0; i < n; i++) v[i] = c->ints[i] != 0;
    hid_t t = bool_type();
    int rc = h5w_dataset(loc, c->name, t, 1, &n, v, "array");
    H5Tclose(t);
    free(v);
    return rc;
}

static int column(hid_t loc, const ast_h5ad_column *c, hsize_t n)
{
    switch (c->kind) {
    case AST_H5AD_INT: return h5w_dataset(loc, c->name, H5T_NATIVE_INT64, 1, &n, c->ints, "array");
    case AST_H5AD_NUMBER: return h5w_dataset(loc, c->name, H5T_NATIVE_DOUBLE, 1, &n, c->numbers, "array");
    case AST_H5AD_CATEGORY: return categorical(loc, c, n);
    case AST_H5AD_BOOL: return booleans(loc, c, n);
    }
    return -1;
}

static int dataframe(hid_t file, const char *name, const char *const *index, int64_t n, const ast_h5ad_column *cols,
                     int n_cols)
{
    const char **order = ast_xmalloc((size_t)(n_cols > 0 ? n_cols : 1) * sizeof *order);
    for (int i = 0; i < n_cols; i++) order[i] = cols[i].name;
    hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = g < 0 || h5w_encoding(g, "dataframe", "0.2.0") || h5w_attr_str(g, "_index", "_index") ||
             h5w_attr_strings(g, "column-order", order, n_cols) || h5w_strings(g, "_index", index, n);
    for (int i = 0; i < n_cols && !rc; i++) rc = column(g, &cols[i], (hsize_t)n);
    if (g >= 0) H5Gclose(g);
    free(order);
    return rc ? -1 : 0;
}

int h5w_obs(hid_t file, const ast_h5ad_table *t)
{
    return dataframe(file, "obs", t->cells, t->n_cells, t->obs, t->n_obs);
}

int h5w_var(hid_t file, const ast_h5ad_table *t)
{
    return dataframe(file, "var", t->genes, t->n_genes, t->var, t->n_var);
}
