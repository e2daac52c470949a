/* AnnData .h5ad through libhdf5: X dense or CSR/CSC, obsm coordinates, obs
 * categorical or string columns, var names — the encodings anndata >= 0.8
 * writes ("encoding-type" attributes).
 *
 * This is the parse itself, in the calling process; ast_data_read_h5ad
 * (data_h5ad_child.c) runs it in a child process under a time limit.
 * Nothing read from the file is trusted: every extent, attribute size,
 * shape and offset is checked before it sizes an allocation or indexes a
 * buffer, and a file that fails a check gets one error naming the file,
 * the dataset or attribute and what to do. */
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/data.h"

/* The usual cause of a file that is valid HDF5 but not valid AnnData. */
#define DAMAGED "(damaged or not written by anndata?)"

typedef struct h5ad {
    hid_t file;
    const char *path;
    ast_error *e;
    int coord_dims;
} h5ad;

/* A dataset's extent as read from the file, already checked to be
 * addressable: n = the product of the dims, which fits in int64_t. */
typedef struct extent {
    int ndim;
    int64_t dims[2];
    int64_t n;
} extent;

static int exists(hid_t loc, const char *name)
{
    return H5Lexists(loc, name, H5P_DEFAULT) > 0;
}

/* ---- checked sizes --------------------------------------------------------- */

static double physical_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : INFINITY;
}

/* Zeroed room for n elements of `size` bytes, or NULL with the error set.
 * A file can declare any extent: more than the machine's memory is
 * refused here, with the size named, instead of ending in the
 * out-of-memory killer or in ast_xmalloc's exit. */
static void *alloc_checked(h5ad *h, const char *what, int64_t n, size_t size)
{
    double bytes = (double)n * (double)size;
    if (n < 0) {
        ast_error_set(h->e, "%s: %s is too large to address " DAMAGED, h->path, what);
        return NULL;
    }
    if (bytes > physical_bytes() || bytes >= (double)SIZE_MAX) {
        ast_error_set(h->e, "%s: %s needs %.3g GiB, more than this machine's %.3g GiB of memory (damaged, or too large "
                      "to load here?)", h->path, what, bytes / 1073741824.0, physical_bytes() / 1073741824.0);
        return NULL;
    }
    void *p = calloc(n ? (size_t)n : 1, size);
    if (!p) ast_error_set(h->e, "%s: out of memory allocating %.3g GiB for %s", h->path, bytes / 1073741824.0, what);
    return p;
}

/* rows x cols as an element count, or -1 if negative or past int64_t. */
static int64_t product(int64_t rows, int64_t cols)
{
    int64_t n;
    if (rows < 0 || cols < 0 || __builtin_mul_overflow(rows, cols, &n)) return -1;
    return n;
}

static void shape_text(const extent *x, char *buf, size_t n)
{
    if (x->ndim == 0) snprintf(buf, n, "a scalar");
    else if (x->ndim == 1) snprintf(buf, n, "[%lld]", (long long)x->dims[0]);
    else if (x->ndim == 2) snprintf(buf, n, "[%lld, %lld]", (long long)x->dims[0], (long long)x->dims[1]);
    else if (x->ndim > 2) snprintf(buf, n, "%d-D", x->ndim);
    else snprintf(buf, n, "of unreadable shape");
}

/* ---- datasets -------------------------------------------------------------- */

/* Opens dataset `name` (a path from the file's root) and checks that it
 * has exactly `ndim` dimensions, `want` saying what it should hold. */
static hid_t open_dataset(h5ad *h, const char *name, int ndim, const char *want, extent *x)
{
    hid_t d = H5Dopen2(h->file, name, H5P_DEFAULT);
    if (d < 0) {
        ast_error_set(h->e, "%s: cannot open dataset '%s' (file damaged or truncated?)", h->path, name);
        return -1;
    }
    hid_t sp = H5Dget_space(d);
    hsize_t hd[H5S_MAX_RANK] = {0};
    x->ndim = H5Sget_simple_extent_ndims(sp);
    int ok = x->ndim > 0 && H5Sget_simple_extent_dims(sp, hd, NULL) == x->ndim && x->ndim == ndim;
    H5Sclose(sp);
    x->dims[0] = (int64_t)(hd[0] > INT64_MAX ? -1 : (int64_t)hd[0]);
    x->dims[1] = x->ndim == 2 ? (int64_t)(hd[1] > INT64_MAX ? -1 : (int64_t)hd[1]) : 1;
    x->n = product(x->dims[0], x->dims[1]);
    char shape[64];
    shape_text(x, shape, sizeof shape);
    if (!ok) ast_error_set(h->e, "%s: %s is %s; expected %s " DAMAGED, h->path, name, shape, want);
    else if (x->n < 0) ast_error_set(h->e, "%s: %s has shape %s, too large to address " DAMAGED, h->path, name, shape);
    if (ok && x->n >= 0) return d;
    H5Dclose(d);
    return -1;
}

/* Reads a whole `ndim`-D numeric dataset converted to `memtype`. */
static void *read_numeric(h5ad *h, const char *name, int ndim, const char *want, hid_t memtype, extent *x)
{
    hid_t d = open_dataset(h, name, ndim, want, x);
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(t);
    H5Tclose(t);
    void *buf = NULL;
    if (cls != H5T_INTEGER && cls != H5T_FLOAT)
        ast_error_set(h->e, "%s: %s does not hold numbers; expected %s " DAMAGED, h->path, name, want);
    else if ((buf = alloc_checked(h, name, x->n, H5Tget_size(memtype))) &&
             H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        ast_error_set(h->e, "%s: cannot read dataset '%s' as numbers (file damaged or truncated?)", h->path, name);
        free(buf);
        buf = NULL;
    }
    H5Dclose(d);
    return buf;
}

static void free_strings(char **s, int64_t n)
{
    if (!s) return;
    for (int64_t i = 0; i < n; i++) free(s[i]);
    free(s);
}

/* A variable-length string memory type in the stored type's character set
 * (anndata writes UTF-8; HDF5 will not convert between character sets). */
static hid_t vlen_string_type(hid_t stored)
{
    hid_t mt = H5Tcopy(H5T_C_S1);
    H5Tset_size(mt, H5T_VARIABLE);
    H5Tset_cset(mt, H5Tget_cset(stored));
    return mt;
}

/* The n variable-length strings of dataset d, copied to our allocation
 * (libhdf5 owns what it read; it is handed back through H5Dvlen_reclaim). */
static char **read_vlen_strings(h5ad *h, hid_t d, hid_t t, const char *name, int64_t n)
{
    char **raw = alloc_checked(h, name, n, sizeof *raw), **out = NULL;
    if (!raw) return NULL;
    hid_t mt = vlen_string_type(t), sp = H5Dget_space(d);
    if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0) {
        if ((out = alloc_checked(h, name, n, sizeof *out)))
            for (int64_t i = 0; i < n; i++) out[i] = ast_xstrdup(raw[i] ? raw[i] : "");
        H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, raw);
    } else {
        ast_error_set(h->e, "%s: cannot read the strings of '%s' (file damaged or truncated?)", h->path, name);
    }
    H5Sclose(sp);
    H5Tclose(mt);
    free(raw);
    return out;
}

/* The n fixed-length strings of dataset d, each NUL-terminated. */
static char **read_fixed_strings(h5ad *h, hid_t d, hid_t t, const char *name, int64_t n)
{
    size_t size = H5Tget_size(t);
    char *raw = size ? alloc_checked(h, name, product(n, (int64_t)size), 1) : NULL, **out = NULL;
    if (!raw) {
        if (!size) ast_error_set(h->e, "%s: %s holds strings of length 0 " DAMAGED, h->path, name);
        return NULL;
    }
    if (H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0)
        ast_error_set(h->e, "%s: cannot read the strings of '%s' (file damaged or truncated?)", h->path, name);
    else if ((out = alloc_checked(h, name, n, sizeof *out)))
        for (int64_t i = 0; i < n; i++) {
            out[i] = ast_xcalloc(size + 1, 1);
            memcpy(out[i], raw + (size_t)i * size, size);
        }
    free(raw);
    return out;
}

/* Reads a 1-D string dataset (variable or fixed length) into *n strings. */
static char **read_strings(h5ad *h, const char *name, const char *want, int64_t *n)
{
    extent x;
    hid_t d = open_dataset(h, name, 1, want, &x);
    *n = 0;
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d);
    char **out = NULL;
    if (H5Tget_class(t) != H5T_STRING)
        ast_error_set(h->e, "%s: %s does not hold strings; expected %s " DAMAGED, h->path, name, want);
    else if (H5Tis_variable_str(t) > 0)
        out = read_vlen_strings(h, d, t, name, x.n);
    else
        out = read_fixed_strings(h, d, t, name, x.n);
    if (out) *n = x.n;
    H5Tclose(t);
    H5Dclose(d);
    return out;
}

/* ---- attributes ------------------------------------------------------------ */

/* Opens attribute `attr` of `obj` (named `name` in errors) and checks that
 * it holds exactly `count` values of class `cls`: H5Aread writes as many
 * values as the file says, whatever room the caller has. */
static hid_t open_attribute(h5ad *h, hid_t obj, const char *name, const char *attr, hssize_t count, H5T_class_t cls,
                            const char *want)
{
    hid_t a = H5Aopen(obj, attr, H5P_DEFAULT);
    if (a < 0) {
        ast_error_set(h->e, "%s: %s: cannot read attribute '%s' (file damaged or truncated?)", h->path, name, attr);
        return -1;
    }
    hid_t sp = H5Aget_space(a), t = H5Aget_type(a);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    H5T_class_t c = H5Tget_class(t);
    H5Sclose(sp);
    H5Tclose(t);
    if (n == count && c == cls) return a;
    if (c != cls)
        ast_error_set(h->e, "%s: %s: attribute '%s' is not %s " DAMAGED, h->path, name, attr, want);
    else
        ast_error_set(h->e, "%s: %s: attribute '%s' has %lld values; expected %s " DAMAGED, h->path, name, attr,
                      (long long)n, want);
    H5Aclose(a);
    return -1;
}

/* "encoding-type" of a group or dataset into buf ("" when absent); -1 with
 * the error set when it is not a single string. A fixed-length string is
 * read through a memory type of buf's size, so libhdf5 truncates it to
 * the room there is rather than writing as many bytes as the file says. */
static int encoding_type(h5ad *h, hid_t obj, const char *name, char *buf, size_t n)
{
    buf[0] = 0;
    if (H5Aexists(obj, "encoding-type") <= 0) return 0;
    hid_t a = open_attribute(h, obj, name, "encoding-type", 1, H5T_STRING, "one string");
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a), mt;
    char *s = NULL;
    int vlen = H5Tis_variable_str(t) > 0, ok;
    if (vlen) {
        mt = vlen_string_type(t);
        ok = H5Aread(a, mt, &s) >= 0;
        if (ok && s) snprintf(buf, n, "%s", s);
        if (s) H5free_memory(s);
    } else {
        mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, n);
        H5Tset_strpad(mt, H5T_STR_NULLTERM);
        H5Tset_cset(mt, H5Tget_cset(t));
        ok = H5Aread(a, mt, buf) >= 0;
        buf[n - 1] = 0;
    }
    if (!ok) ast_error_set(h->e, "%s: %s: cannot read attribute 'encoding-type' " DAMAGED, h->path, name);
    H5Tclose(mt);
    H5Tclose(t);
    H5Aclose(a);
    return ok ? 0 : -1;
}

/* X's "shape" attribute: two sizes >= 0 whose product is addressable. */
static int read_shape(h5ad *h, hid_t g, int64_t shape[2])
{
    if (H5Aexists(g, "shape") <= 0) {
        ast_error_set(h->e, "%s: X has no 'shape' attribute " DAMAGED, h->path);
        return -1;
    }
    hid_t a = open_attribute(h, g, "X", "shape", 2, H5T_INTEGER, "2 integers [cells, genes]");
    if (a < 0) return -1;
    int ok = H5Aread(a, H5T_NATIVE_INT64, shape) >= 0;
    H5Aclose(a);
    if (!ok)
        ast_error_set(h->e, "%s: X: cannot read attribute 'shape' " DAMAGED, h->path);
    else if (product(shape[0], shape[1]) < 0)
        ast_error_set(h->e, "%s: X: attribute 'shape' is [%lld, %lld]; %s " DAMAGED, h->path, (long long)shape[0],
                      (long long)shape[1],
                      shape[0] < 0 || shape[1] < 0 ? "sizes cannot be negative" : "too large to address");
    return ok && product(shape[0], shape[1]) >= 0 ? 0 : -1;
}

/* ---- X ----------------------------------------------------------------------- */

/* A compressed-sparse X, with everything the scatter below relies on
 * checked: one offset per row (column for CSC) plus one, starting at 0,
 * never decreasing and ending at the number of values, and every index
 * inside the matrix. */
typedef struct sparse {
    const char *unit; /* "row" (CSR) or "column" (CSC): what indptr indexes */
    int64_t outer, inner, nnz;
    float *data;
    int64_t *indices, *indptr;
} sparse;

static int check_indptr(h5ad *h, const sparse *s, int64_t n_ptr)
{
    const int64_t *p = s->indptr;
    if (n_ptr != s->outer + 1) {
        ast_error_set(h->e, "%s: X/indptr has %lld entries; X's shape says %lld %ss, so expected %lld " DAMAGED, h->path,
                      (long long)n_ptr, (long long)s->outer, s->unit, (long long)s->outer + 1);
        return -1;
    }
    if (p[0] != 0) {
        ast_error_set(h->e, "%s: X/indptr starts at %lld; expected 0 " DAMAGED, h->path, (long long)p[0]);
        return -1;
    }
    for (int64_t i = 0; i < s->outer; i++) {
        if (p[i + 1] < 0) {
            ast_error_set(h->e, "%s: X/indptr[%lld] is %lld; offsets cannot be negative " DAMAGED, h->path,
                          (long long)i + 1, (long long)p[i + 1]);
            return -1;
        }
        if (p[i + 1] < p[i]) {
            ast_error_set(h->e, "%s: X/indptr is not non-decreasing at %s %lld (%lld after %lld) " DAMAGED, h->path,
                          s->unit, (long long)i, (long long)p[i + 1], (long long)p[i]);
            return -1;
        }
    }
    if (p[s->outer] != s->nnz) {
        ast_error_set(h->e, "%s: X/indptr ends at %lld but X/data has %lld values " DAMAGED, h->path,
                      (long long)p[s->outer], (long long)s->nnz);
        return -1;
    }
    return 0;
}

static int check_indices(h5ad *h, const sparse *s, int64_t n_idx)
{
    if (n_idx != s->nnz) {
        ast_error_set(h->e, "%s: X/indices has %lld entries but X/data has %lld " DAMAGED, h->path, (long long)n_idx,
                      (long long)s->nnz);
        return -1;
    }
    for (int64_t k = 0; k < s->nnz; k++)
        if (s->indices[k] < 0 || s->indices[k] >= s->inner) {
            ast_error_set(h->e, "%s: X/indices[%lld] is %lld, outside 0..%lld (%s) " DAMAGED, h->path, (long long)k,
                          (long long)s->indices[k], (long long)s->inner - 1,
                          strcmp(s->unit, "row") ? "the cells" : "the genes");
            return -1;
        }
    return 0;
}

/* Reads data, indices and indptr of X and checks them against each other. */
static int read_sparse_parts(h5ad *h, sparse *s)
{
    extent xd, xi, xp;
    s->data = read_numeric(h, "X/data", 1, "a 1-D array of values", H5T_NATIVE_FLOAT, &xd);
    if (!s->data) return -1;
    s->nnz = xd.n;
    s->indices = read_numeric(h, "X/indices", 1, "a 1-D array of indices", H5T_NATIVE_INT64, &xi);
    if (!s->indices || check_indices(h, s, xi.n) < 0) return -1;
    s->indptr = read_numeric(h, "X/indptr", 1, "a 1-D array of offsets", H5T_NATIVE_INT64, &xp);
    if (!s->indptr || check_indptr(h, s, xp.n) < 0) return -1;
    return 0;
}

/* X as a csr_matrix or csc_matrix group, made dense. */
static float *read_sparse(h5ad *h, hid_t g, const char *enc, int64_t shape[2])
{
    int csr = !strcmp(enc, "csr_matrix");
    if (read_shape(h, g, shape) < 0) return NULL;
    sparse s = {csr ? "row" : "column", csr ? shape[0] : shape[1], csr ? shape[1] : shape[0], 0, NULL, NULL, NULL};
    float *dense = NULL;
    if (read_sparse_parts(h, &s) == 0 &&
        (dense = alloc_checked(h, "X as a dense matrix", product(shape[0], shape[1]), sizeof(float))))
        for (int64_t o = 0; o < s.outer; o++)
            for (int64_t k = s.indptr[o]; k < s.indptr[o + 1]; k++) {
                int64_t r = csr ? o : s.indices[k], c = csr ? s.indices[k] : o;
                dense[r * shape[1] + c] += s.data[k]; /* duplicates add up, as in scipy */
            }
    free(s.data), free(s.indices), free(s.indptr);
    return dense;
}

/* X as a dense [cells, genes] float matrix: dense dataset, csr_matrix or csc_matrix group. */
static float *read_x(h5ad *h, int64_t *cells, int64_t *genes)
{
    H5O_info_t info;
    if (!exists(h->file, "X")) {
        ast_error_set(h->e, "%s: no X matrix (not an AnnData file?)", h->path);
        return NULL;
    }
    if (H5Oget_info_by_name(h->file, "X", &info, H5P_DEFAULT) < 0) {
        ast_error_set(h->e, "%s: X cannot be opened (a dangling link, or the file is damaged)", h->path);
        return NULL;
    }
    int64_t shape[2] = {0, 0};
    float *x = NULL;
    if (info.type == H5O_TYPE_DATASET) {
        extent e = {0, {0, 0}, 0};
        x = read_numeric(h, "X", 2, "a [cells, genes] matrix", H5T_NATIVE_FLOAT, &e);
        shape[0] = e.dims[0], shape[1] = e.dims[1];
    } else {
        hid_t g = H5Gopen2(h->file, "X", H5P_DEFAULT);
        char enc[64];
        if (g < 0)
            ast_error_set(h->e, "%s: X is neither a dataset nor a group " DAMAGED, h->path);
        else if (encoding_type(h, g, "X", enc, sizeof enc) == 0 && strcmp(enc, "csr_matrix") && strcmp(enc, "csc_matrix"))
            ast_error_set(h->e, "%s: X has encoding '%s'; supported: dense, csr_matrix, csc_matrix", h->path,
                          enc[0] ? enc : "(none: no encoding-type attribute)");
        else if (!h->e->msg[0])
            x = read_sparse(h, g, enc, shape);
        if (g >= 0) H5Gclose(g);
    }
    *cells = shape[0], *genes = shape[1];
    return x;
}

/* ---- obs and obsm ------------------------------------------------------------ */

/* A categorical obs column: codes into categories, -1 (or any code
 * outside the categories) meaning missing. */
static int *read_categorical(h5ad *h, const char *path, int64_t cells, char ***names, int64_t *n)
{
    char codes_path[600], cats_path[600];
    snprintf(codes_path, sizeof codes_path, "%s/codes", path);
    snprintf(cats_path, sizeof cats_path, "%s/categories", path);
    extent x;
    int64_t *raw = read_numeric(h, codes_path, 1, "a 1-D array of category codes", H5T_NATIVE_INT64, &x);
    if (!raw) return NULL;
    int *codes = NULL;
    if (x.n != cells)
        ast_error_set(h->e, "%s: %s has %lld codes for %lld cells " DAMAGED, h->path, path, (long long)x.n, (long long)cells);
    else if ((*names = read_strings(h, cats_path, "a 1-D array of category names", n)) && *n > INT_MAX)
        ast_error_set(h->e, "%s: %s has %lld categories; at most %d are supported", h->path, cats_path, (long long)*n,
                      INT_MAX);
    else if (*names && (codes = alloc_checked(h, codes_path, cells, sizeof *codes)))
        for (int64_t i = 0; i < cells; i++) codes[i] = raw[i] < 0 || raw[i] >= *n ? -1 : (int)raw[i];
    free(raw);
    return codes;
}

/* A string obs column, numbered in order of first appearance. */
static int *read_string_labels(h5ad *h, const char *path, int64_t cells, char ***names, int64_t *n)
{
    int64_t m = 0;
    char **vals = read_strings(h, path, "a 1-D array of labels, or a categorical group", &m);
    if (!vals) return NULL;
    if (m != cells) {
        ast_error_set(h->e, "%s: %s has %lld values for %lld cells " DAMAGED, h->path, path, (long long)m, (long long)cells);
        free_strings(vals, m);
        return NULL;
    }
    int *codes = ast_xcalloc((size_t)cells, sizeof *codes);
    *names = ast_xcalloc((size_t)cells, sizeof **names);
    for (int64_t i = 0; i < cells; i++) {
        int64_t j = 0;
        while (j < *n && strcmp((*names)[j], vals[i])) j++;
        if (j == *n) (*names)[(*n)++] = ast_xstrdup(vals[i]);
        codes[i] = (int)j;
    }
    free_strings(vals, m);
    return codes;
}

/* obs column as integer codes with names: categorical (codes + categories) or strings. */
static int *read_obs_labels(h5ad *h, const char *key, int64_t cells, char ***names, int *n_names)
{
    char path[512];
    snprintf(path, sizeof path, "obs/%s", key);
    H5O_info_t info;
    *names = NULL;
    if (!exists(h->file, "obs") || !exists(h->file, path)) {
        ast_error_set(h->e, "%s: no obs column '%s'; set data.preprocessing key to an existing column", h->path, key);
        return NULL;
    }
    if (H5Oget_info_by_name(h->file, path, &info, H5P_DEFAULT) < 0) {
        ast_error_set(h->e, "%s: %s cannot be opened (a dangling link, or the file is damaged)", h->path, path);
        return NULL;
    }
    int64_t n = 0;
    int *codes = info.type == H5O_TYPE_GROUP ? read_categorical(h, path, cells, names, &n)
                                             : read_string_labels(h, path, cells, names, &n);
    if (!codes) {
        free_strings(*names, n);
        *names = NULL;
        return NULL;
    }
    *n_names = (int)n;
    return codes;
}

/* The names under obsm, for the error that says the key is not there. */
static void list_obsm(h5ad *h, char *found, size_t size)
{
    found[0] = 0;
    hid_t g = exists(h->file, "obsm") ? H5Gopen2(h->file, "obsm", H5P_DEFAULT) : -1;
    hsize_t n = 0;
    if (g < 0 || H5Gget_num_objs(g, &n) < 0) n = 0;
    for (hsize_t i = 0; i < n; i++) {
        char name[128] = "";
        H5Gget_objname_by_idx(g, i, name, sizeof name);
        size_t off = strlen(found);
        snprintf(found + off, size - off, "%s%s", off ? ", " : "", name);
    }
    if (g >= 0) H5Gclose(g);
}

static float *read_coords(h5ad *h, const char *key, int64_t cells)
{
    char path[512];
    snprintf(path, sizeof path, "obsm/%s", key);
    if (!exists(h->file, "obsm") || !exists(h->file, path)) {
        char found[512];
        list_obsm(h, found, sizeof found);
        ast_error_set(h->e, "%s: no coordinates at obsm/%s (present: %s); set data.preprocessing.position_key",
                      h->path, key, found[0] ? found : "none");
        return NULL;
    }
    extent x;
    float *raw = read_numeric(h, path, 2, "[cells, 2] or [cells, 3] coordinates", H5T_NATIVE_FLOAT, &x);
    if (!raw) return NULL;
    if (x.dims[0] != cells || (x.dims[1] != 2 && x.dims[1] != 3)) {
        ast_error_set(h->e, "%s: obsm/%s is [%lld, %lld]; expected [%lld, 2] or [%lld, 3]", h->path, key,
                      (long long)x.dims[0], (long long)x.dims[1], (long long)cells, (long long)cells);
        free(raw);
        return NULL;
    }
    h->coord_dims = (int)x.dims[1];
    float *pos = ast_xcalloc((size_t)cells * 3, sizeof(float));
    for (int64_t i = 0; i < cells; i++)
        for (int d = 0; d < x.dims[1]; d++) pos[i * 3 + d] = raw[i * x.dims[1] + d];
    free(raw);
    return pos; /* 2-D data keep z = 0 here; preprocessing lifts slices to 3-D */
}

/* ---- the whole file ---------------------------------------------------------- */

static int check_finite(h5ad *h, const ast_dataset *d)
{
    for (int64_t i = 0; i < d->n_cells * d->n_genes; i++)
        if (!isfinite(d->expr[i])) {
            ast_error_set(h->e, "%s: X[%lld, %lld] (gene %s) is %g; clean the matrix before training", h->path,
                          (long long)(i / d->n_genes), (long long)(i % d->n_genes), d->genes[i % d->n_genes], d->expr[i]);
            return 0;
        }
    for (int64_t i = 0; i < d->n_cells * 3; i++)
        if (!isfinite(d->pos[i])) {
            ast_error_set(h->e, "%s: coordinate of cell %lld is %g", h->path, (long long)(i / 3), d->pos[i]);
            return 0;
        }
    return 1;
}

/* X and the gene names: at least one cell and gene, a name per column,
 * and a gene count that fits ast_dataset's int. */
static int read_matrix(h5ad *h, ast_dataset *d)
{
    int64_t cells = 0, genes = 0, n_var = 0;
    d->expr = read_x(h, &cells, &genes);
    if (!d->expr) return 0;
    if (cells < 1 || genes < 1 || genes > INT_MAX) {
        ast_error_set(h->e, "%s: X is %lld cells x %lld genes; expected at least one of each and at most %d genes",
                      h->path, (long long)cells, (long long)genes, INT_MAX);
        return 0;
    }
    d->n_cells = cells;
    char **names = exists(h->file, "var") && exists(h->file, "var/_index")
                       ? read_strings(h, "var/_index", "a 1-D array of gene names", &n_var)
                       : NULL;
    if (!names) {
        if (!h->e->msg[0]) ast_error_set(h->e, "%s: no gene names at var/_index", h->path);
        return 0;
    }
    if (n_var != genes) {
        ast_error_set(h->e, "%s: var has %lld genes but X has %lld columns", h->path, (long long)n_var, (long long)genes);
        free_strings(names, n_var);
        return 0;
    }
    d->genes = names;
    d->n_genes = (int)genes;
    return 1;
}

/* The slice column: every cell needs a slice, since slices index arrays
 * downstream (a missing categorical label would be slice -1). */
static int read_slices(h5ad *h, const char *key, ast_dataset *d)
{
    char **names = NULL;
    int n = 0;
    int *codes = read_obs_labels(h, key, d->n_cells, &names, &n);
    if (!codes) return 0;
    free_strings(names, n);
    for (int64_t i = 0; i < d->n_cells; i++)
        if (codes[i] < 0) {
            ast_error_set(h->e, "%s: obs/%s: cell %lld has no slice (a missing category); every cell needs one", h->path,
                          key, (long long)i);
            free(codes);
            return 0;
        }
    free(d->slice);
    d->slice = codes;
    d->n_slices = n;
    return 1;
}

static int read_all(h5ad *h, const ast_data_opts *o, ast_dataset *d)
{
    if (!read_matrix(h, d)) return 0;
    d->pos = read_coords(h, o->position_key, d->n_cells);
    if (!d->pos) return 0;
    d->coord_dims = h->coord_dims;
    d->slice = ast_xcalloc((size_t)d->n_cells, sizeof *d->slice);
    d->n_slices = 1;
    if (o->slice_key && !read_slices(h, o->slice_key, d)) return 0;
    /* Cell types are optional (docs/model.md §8.1): a missing column means none. */
    char ct_path[512];
    snprintf(ct_path, sizeof ct_path, "obs/%s", o->cell_type_key ? o->cell_type_key : "");
    if (o->cell_type_key && exists(h->file, "obs") && exists(h->file, ct_path)) {
        d->cell_type = read_obs_labels(h, o->cell_type_key, d->n_cells, &d->type_names, &d->n_types);
        if (!d->cell_type) return 0;
    }
    return check_finite(h, d);
}

int ast_data_read_h5ad_direct(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e)
{
    memset(out, 0, sizeof *out);
    e->msg[0] = 0;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are reported once, by us */
    if (H5Fis_hdf5(path) <= 0) {
        ast_error_set(e, "%s: not an HDF5/AnnData file (missing, truncated or another format)", path);
        return -1;
    }
    h5ad h = {H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), path, e, 0};
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

void ast_dataset_free(ast_dataset *d)
{
    free(d->expr), free(d->pos), free(d->slice), free(d->cell_type), free(d->source);
    free_strings(d->genes, d->n_genes);
    free_strings(d->type_names, d->n_types);
    free_strings(d->cell_names, d->n_cells);
    for (int j = 0; j < d->n_obs; j++) {
        free(d->obs[j].name), free(d->obs[j].numbers), free(d->obs[j].codes);
        free_strings(d->obs[j].categories, d->obs[j].n_categories);
    }
    free(d->obs);
    memset(d, 0, sizeof *d);
}
