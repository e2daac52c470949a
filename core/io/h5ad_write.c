/* AnnData .h5ad output through libhdf5, with the encoding attributes
 * anndata >= 0.8 writes ("encoding-type"/"encoding-version") so that both
 * anndata and our own reader (data_h5ad.c) take it: X, obs and var
 * (h5ad_frame.c), obsm matrices and string entries in uns. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "config/config.h"
#include "io/h5ad_internal.h"

static hid_t utf8_vlen(void)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

static hid_t space(int rank, const hsize_t *dims)
{
    return rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
}

int h5w_attr_strings(hid_t obj, const char *name, const char *const *v, int n)
{
    hid_t t = utf8_vlen(), sp = n < 0 ? space(0, NULL) : space(1, (hsize_t[]){(hsize_t)n});
    hid_t a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && (n == 0 || H5Awrite(a, t, v) >= 0);
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp), H5Tclose(t);
    return ok ? 0 : -1;
}

int h5w_attr_str(hid_t obj, const char *name, const char *value) { return h5w_attr_strings(obj, name, &value, -1); }

int h5w_encoding(hid_t obj, const char *type, const char *version)
{
    return h5w_attr_str(obj, "encoding-type", type) || h5w_attr_str(obj, "encoding-version", version) ? -1 : 0;
}

int h5w_dataset(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data,
                const char *enc)
{
    hid_t sp = space(rank, dims), d = H5Dcreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int ok = d >= 0 && H5Dwrite(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0 && h5w_encoding(d, enc, "0.2.0") == 0;
    if (d >= 0) H5Dclose(d);
    H5Sclose(sp);
    return ok ? 0 : -1;
}

int h5w_strings(hid_t loc, const char *name, const char *const *v, int64_t n)
{
    hid_t t = utf8_vlen();
    int rc = h5w_dataset(loc, name, t, 1, (hsize_t[]){(hsize_t)n}, v, "string-array");
    H5Tclose(t);
    return rc;
}

static hid_t dict(hid_t loc, const char *name)
{
    hid_t g = H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g >= 0 && h5w_encoding(g, "dict", "0.1.0")) {
        H5Gclose(g);
        return -1;
    }
    return g;
}

static int obsm(hid_t g, const ast_h5ad_table *t)
{
    for (int j = 0; j < t->n_obsm; j++) {
        const ast_h5ad_matrix *m = &t->obsm[j];
        hsize_t dims[2] = {(hsize_t)t->n_cells, (hsize_t)m->cols};
        if (h5w_dataset(g, m->name, H5T_NATIVE_FLOAT, 2, dims, m->data, "array")) return -1;
    }
    return 0;
}

/* uns/<name>_colors of the obs columns that have colours, as scanpy
 * keeps them. */
static int colors(hid_t g, const ast_h5ad_table *t)
{
    for (int j = 0; j < t->n_obs; j++) {
        const ast_h5ad_column *c = &t->obs[j];
        if (!c->colors) continue;
        char *key = ast_xmalloc(strlen(c->name) + sizeof "_colors");
        sprintf(key, "%s_colors", c->name);
        int rc = h5w_strings(g, key, c->colors, c->n_categories);
        free(key);
        if (rc) return -1;
    }
    return 0;
}

/* uns/<uns_group>: one scalar string per key, as anndata writes a str. */
static int uns(hid_t g, const ast_h5ad_table *t)
{
    if (colors(g, t) < 0) return -1;
    if (!t->uns_group) return 0;
    hid_t sub = dict(g, t->uns_group), type = utf8_vlen();
    int rc = sub < 0;
    for (const char *const *kv = t->uns; !rc && kv && kv[0]; kv += 2)
        rc = h5w_dataset(sub, kv[0], type, 0, NULL, &kv[1], "string");
    if (sub >= 0) H5Gclose(sub);
    H5Tclose(type);
    return rc ? -1 : 0;
}

static int write_all(hid_t f, const ast_h5ad_table *t)
{
    hsize_t x[2] = {(hsize_t)t->n_cells, (hsize_t)t->n_genes};
    if (h5w_encoding(f, "anndata", "0.1.0") || h5w_dataset(f, "X", H5T_NATIVE_FLOAT, 2, x, t->X, "array") ||
        h5w_obs(f, t) || h5w_var(f, t))
        return -1;
    static const char *const dicts[] = {"obsm", "uns", "layers", "obsp", "varm", "varp"};
    int (*const fill[])(hid_t, const ast_h5ad_table *) = {obsm, uns, NULL, NULL, NULL, NULL};
    for (int i = 0; i < 6; i++) {
        hid_t g = dict(f, dicts[i]);
        int rc = g < 0 || (fill[i] && fill[i](g, t));
        if (g >= 0) H5Gclose(g);
        if (rc) return -1;
    }
    return 0;
}

/* The file is built in memory (the core driver, with no backing store)
 * and its image written by ast_atomic_write_bytes: a full disk then fails
 * a plain write, with errno, instead of libhdf5's close, which left a
 * half-closed file that its exit handler crashed on; and the temporary
 * file is ast_atomic_write's, not one libhdf5 opens by name. */
static void *build_image(const ast_h5ad_table *t, size_t *n)
{
    /* The image grows by the size of X and a MiB for the rest: once or
     * twice, not once per MiB (a 400 MB X took 7.7 s that way, 5.0 s so). */
    size_t increment = (size_t)t->n_cells * (size_t)t->n_genes * sizeof(float) + ((size_t)1 << 20);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, increment, 0);
    hid_t f = H5Fcreate("alphast-h5ad-image", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    H5Pclose(fapl);
    if (f < 0) return NULL;
    void *image = NULL;
    ssize_t size = write_all(f, t) == 0 && H5Fflush(f, H5F_SCOPE_LOCAL) >= 0 ? H5Fget_file_image(f, NULL, 0) : -1;
    if (size > 0) {
        image = ast_xmalloc((size_t)size);
        if (H5Fget_file_image(f, image, (size_t)size) != size) free(image), image = NULL;
    }
    if (H5Fclose(f) < 0) free(image), image = NULL;
    *n = (size_t)size;
    return image;
}

/* anndata decodes every string of the file and fails on the whole file
 * at the first that is not UTF-8 (the reader refuses such files too), so
 * none is written: -1 with e naming the first and where it is. */
static int text_ok(const char *path, const char *where, const char *s, ast_error *e)
{
    if (!s || ast_utf8_text(s)) return 0;
    char shown[64];
    ast_cfg_escape(s, shown, sizeof shown);
    ast_error_set(e, "%s: %s '%s' is not UTF-8 text, which anndata cannot read; nothing was written (give UTF-8 "
                  "names, e.g. decoded from latin-1)", path, where, shown);
    return -1;
}

static int texts_ok(const char *path, const char *where, const char *const *s, int64_t n, ast_error *e)
{
    for (int64_t i = 0; i < n; i++)
        if (text_ok(path, where, s[i], e)) return -1;
    return 0;
}

static int by_text(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The first string that appears twice in s[0..n), or NULL. */
static const char *repeated(const char *const *s, int n)
{
    const char **sorted = ast_xmalloc((size_t)(n ? n : 1) * sizeof *sorted), *twice = NULL;
    memcpy(sorted, s, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_text);
    for (int i = 1; i < n && !twice; i++)
        if (!strcmp(sorted[i], sorted[i - 1])) twice = sorted[i];
    free(sorted);
    return twice;
}

/* A column is an HDF5 member of its frame's group, named as in the file:
 * a name with '/', ".", "" or the index's is not one HDF5 can hold beside
 * the others, and a category list that repeats one pandas refuses. */
static int column_ok(const char *path, const char *frame, const ast_h5ad_column *c, ast_error *e)
{
    const char *name = c->name, *twice;
    if (!*name || !strcmp(name, ".") || strchr(name, '/') || !strcmp(name, "_index") || !strcmp(name, "__categories")) {
        ast_error_set(e, "%s: %s column '%s' cannot be an HDF5 member of %s; nothing was written (rename it)", path,
                      frame, name, frame);
        return -1;
    }
    if (c->kind == AST_H5AD_CATEGORY && (twice = repeated(c->categories, c->n_categories))) {
        ast_error_set(e, "%s: %s column '%s': category '%s' appears twice, which pandas refuses; nothing was written",
                      path, frame, name, twice);
        return -1;
    }
    return 0;
}

static int columns_ok(const char *path, const char *frame, const ast_h5ad_column *c, int n, ast_error *e)
{
    char where[64];
    const char **names = ast_xmalloc((size_t)(n ? n : 1) * sizeof *names), *twice;
    for (int j = 0; j < n; j++) names[j] = c[j].name;
    twice = repeated(names, n);
    free(names);
    if (twice) {
        ast_error_set(e, "%s: two %s columns are named '%s'; nothing was written (rename one)", path, frame, twice);
        return -1;
    }
    for (int j = 0; j < n; j++) {
        snprintf(where, sizeof where, "%s column name", frame);
        if (text_ok(path, where, c[j].name, e)) return -1;
        snprintf(where, sizeof where, "%s column %d's category", frame, j);
        if (c[j].kind == AST_H5AD_CATEGORY && texts_ok(path, where, c[j].categories, c[j].n_categories, e)) return -1;
        if (column_ok(path, frame, &c[j], e)) return -1;
    }
    return 0;
}

static int table_ok(const char *path, const ast_h5ad_table *t, ast_error *e)
{
    if (texts_ok(path, "gene name", t->genes, t->n_genes, e) || texts_ok(path, "cell name", t->cells, t->n_cells, e) ||
        columns_ok(path, "obs", t->obs, t->n_obs, e) || columns_ok(path, "var", t->var, t->n_var, e) ||
        text_ok(path, "uns group", t->uns_group, e))
        return -1;
    for (int k = 0; k < t->n_obsm; k++)
        if (text_ok(path, "obsm name", t->obsm[k].name, e)) return -1;
    for (const char *const *u = t->uns; u && *u; u++)
        if (text_ok(path, "uns string", *u, e)) return -1;
    return 0;
}

int ast_h5ad_write(const char *path, const ast_h5ad_table *t, ast_error *e)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported once, by us */
    if (table_ok(path, t, e)) return -1;
    size_t n;
    void *image = build_image(t, &n);
    if (!image) {
        ast_error_set(e, "%s: libhdf5 could not build the AnnData file in memory (out of memory?)", path);
        return -1;
    }
    int rc = ast_atomic_write_bytes(path, image, n, e);
    free(image);
    return rc;
}
