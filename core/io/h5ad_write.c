/* AnnData .h5ad output through libhdf5, with the encoding attributes
 * anndata >= 0.8 writes ("encoding-type"/"encoding-version") so that both
 * anndata and our own reader (data_h5ad.c) take it. */
#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "io/h5ad_write.h"

static hid_t utf8_vlen(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

/* A 1-D attribute of n variable-length strings, or a scalar one (n < 0). */
static int attr_strings(hid_t obj, const char *name, const char *const *v, int n)
{
    hid_t t = utf8_vlen(), sp = n < 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, (hsize_t[]){(hsize_t)n}, NULL);
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && (n == 0 || H5Awrite(a, t, v) >= 0);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp), H5Tclose(t);
    return ok ? 0 : -1;
}

static int attr_str(hid_t obj, const char *name, const char *value) { return attr_strings(obj, name, &value, -1); }

static int encoding(hid_t obj, const char *type, const char *version)
{
    return attr_str(obj, "encoding-type", type) || attr_str(obj, "encoding-version", version) ? -1 : 0;
}

static int dataset(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data,
                   const char *enc)
{
    hid_t sp = H5Screate_simple(rank, dims, NULL), d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int ok = d >= 0 && H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0 && encoding(d, enc, "0.2.0") == 0;
    if (d >= 0) H5Dclose(d);
    H5Sclose(sp);
    return ok ? 0 : -1;
}

static int strings(hid_t loc, const char *name, const char *const *v, int64_t n)
{
    hid_t t = utf8_vlen();
    int rc = dataset(loc, name, t, 1, (hsize_t[]){(hsize_t)n}, v, "string-array");
    H5Tclose(t);
    return rc;
}

/* A dataframe group: the index and integer columns. */
static int dataframe(hid_t file, const char *name, const char *const *index, int64_t n, const char *const *cols,
                     const int64_t *const *values, int n_cols)
{
    hid_t g = H5Gcreate2(file, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = g < 0 || encoding(g, "dataframe", "0.2.0") || attr_str(g, "_index", "_index") ||
             attr_strings(g, "column-order", cols, n_cols) || strings(g, "_index", index, n);
    for (int i = 0; i < n_cols && !rc; i++)
        rc = dataset(g, cols[i], H5T_NATIVE_INT64, 1, (hsize_t[]){(hsize_t)n}, values[i], "array");
    if (g >= 0) H5Gclose(g);
    return rc ? -1 : 0;
}

static int write_all(hid_t f, const ast_h5ad_table *t)
{
    hsize_t n = (hsize_t)t->n_cells;
    if (encoding(f, "anndata", "0.1.0") ||
        dataset(f, "X", H5T_NATIVE_FLOAT, 2, (hsize_t[]){n, (hsize_t)t->n_genes}, t->X, "array") ||
        dataframe(f, "obs", t->cells, t->n_cells, t->obs_names, t->obs, t->n_obs) ||
        dataframe(f, "var", t->genes, t->n_genes, NULL, NULL, 0))
        return -1;
    static const char *const dicts[] = {"obsm", "uns", "layers", "obsp", "varm", "varp"};
    for (int i = 0; i < 6; i++) {
        hid_t g = H5Gcreate2(f, dicts[i], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        int rc = g < 0 || encoding(g, "dict", "0.1.0");
        for (int j = 0; i == 0 && j < t->n_obsm && !rc; j++)
            rc = dataset(g, t->obsm_names[j], H5T_NATIVE_FLOAT, 2, (hsize_t[]){n, 3}, t->obsm[j], "array");
        if (g >= 0) H5Gclose(g);
        if (rc) return -1;
    }
    return 0;
}

int ast_h5ad_write(const char *path, const ast_h5ad_table *t, ast_error *e)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported once, by us */
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (f < 0) {
        ast_error_set(e, "%s: cannot create (does the directory exist and is it writable?)", path);
        return -1;
    }
    int rc = write_all(f, t);
    if (H5Fclose(f) < 0) rc = -1;
    if (rc == 0 && rename(tmp, path) < 0) {
        ast_error_set(e, "%s: cannot replace: %s", path, strerror(errno));
        rc = -2;
    } else if (rc < 0) {
        ast_error_set(e, "%s: writing the AnnData file failed (disk full?)", path);
    }
    if (rc) unlink(tmp);
    return rc ? -1 : 0;
}
