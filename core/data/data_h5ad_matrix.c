/* The expression matrix of a .h5ad file (X, a layer or raw/X) as canonical
 * CSR: a dense dataset read a block of rows at a time, or a CSR/CSC
 * group as anndata writes it (encoding-type csr_matrix / csc_matrix and
 * a shape attribute; anndata 0.7.0's h5sparse_format and h5sparse_shape).
 * Everything the conversion relies on is checked first: one offset per
 * row (column for CSC) plus one, starting at 0, never decreasing and
 * ending at the number of values, and every index inside the matrix. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_csr.h"
#include "data/data_h5ad.h"

/* Dense rows are read this many values at a time. */
#define BLOCK_VALUES (1 << 20)

/* A compressed group as stored: CSR, or CSC (the same arrays, by column). */
typedef struct stored {
    const char *key;  /* "X", "layers/counts", "raw/X" */
    const char *unit; /* "row" (CSR) or "column" (CSC): what indptr indexes */
    int64_t outer, inner, nnz;
    ast_csr a;
} stored;

static int matrix_size_ok(h5ad *h, const char *key, int64_t cells, int64_t genes)
{
    if (cells >= 1 && genes >= 1 && genes <= INT_MAX && cells <= INT32_MAX) return 1;
    ast_error_set(h->e, "%s: %s is %lld cells x %lld genes; expected at least one of each, at most %d cells and %d "
                  "genes", h->path, key, (long long)cells, (long long)genes, INT32_MAX, INT_MAX);
    return 0;
}

/* ---- dense ------------------------------------------------------------------- */

static int read_dense(h5ad *h, const char *key, ast_csr *m, int64_t *cells, int64_t *genes)
{
    extent x;
    hid_t d = h5ad_open_dataset(h, key, 2, "a [cells, genes] matrix", &x);
    if (d < 0) return -1;
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(t);
    H5Tclose(t);
    *cells = x.dims[0], *genes = x.dims[1];
    int64_t block = x.dims[1] < BLOCK_VALUES ? BLOCK_VALUES / (x.dims[1] ? x.dims[1] : 1) : 1;
    float *buf = NULL;
    ast_csr_builder b = {{0}, 0, 0, 0};
    int ok = 0;
    if (cls != H5T_INTEGER && cls != H5T_FLOAT)
        ast_error_set(h->e, "%s: %s does not hold numbers; expected a [cells, genes] matrix " DAMAGED, h->path, key);
    /* Read in blocks, but refused as before when it could not be held
     * dense: the file may declare any extent at no cost on disk. */
    else if (matrix_size_ok(h, key, x.dims[0], x.dims[1]) && h5ad_affordable(h, key, x.n, sizeof(float)) &&
             (buf = h5ad_alloc(h, key, h5ad_product(block, x.dims[1]), sizeof *buf))) {
        ok = 1;
        for (int64_t r = 0; ok && r < x.dims[0]; r += block) {
            int64_t n = x.dims[0] - r < block ? x.dims[0] - r : block;
            ok = h5ad_read_rows(h, d, key, &x, r, n, buf) == 0;
            for (int64_t i = 0; ok && i < n; i++) ast_csr_append_dense(&b, buf + i * x.dims[1], (int)x.dims[1]);
        }
    }
    free(buf);
    H5Dclose(d);
    if (ok) *m = b.m;
    else ast_csr_free(&b.m);
    return ok ? 0 : -1;
}

/* ---- compressed ---------------------------------------------------------------- */

static int check_indptr(h5ad *h, const stored *s, int64_t n_ptr)
{
    const int64_t *p = s->a.indptr;
    if (n_ptr != s->outer + 1) {
        ast_error_set(h->e, "%s: %s/indptr has %lld entries; %s's shape says %lld %ss, so expected %lld " DAMAGED,
                      h->path, s->key, (long long)n_ptr, s->key, (long long)s->outer, s->unit, (long long)s->outer + 1);
        return -1;
    }
    if (p[0] != 0) {
        ast_error_set(h->e, "%s: %s/indptr starts at %lld; expected 0 " DAMAGED, h->path, s->key, (long long)p[0]);
        return -1;
    }
    for (int64_t i = 0; i < s->outer; i++) {
        if (p[i + 1] < 0) {
            ast_error_set(h->e, "%s: %s/indptr[%lld] is %lld; offsets cannot be negative " DAMAGED, h->path, s->key,
                          (long long)i + 1, (long long)p[i + 1]);
            return -1;
        }
        if (p[i + 1] < p[i]) {
            ast_error_set(h->e, "%s: %s/indptr is not non-decreasing at %s %lld (%lld after %lld) " DAMAGED, h->path,
                          s->key, s->unit, (long long)i, (long long)p[i + 1], (long long)p[i]);
            return -1;
        }
    }
    if (p[s->outer] != s->nnz) {
        ast_error_set(h->e, "%s: %s/indptr ends at %lld but %s/data has %lld values " DAMAGED, h->path, s->key,
                      (long long)p[s->outer], s->key, (long long)s->nnz);
        return -1;
    }
    return 0;
}

/* Indices are read as int32, which the matrix's limits allow; a larger
 * stored index converts to INT32_MAX or INT32_MIN and fails here. */
static int check_indices(h5ad *h, const stored *s, int64_t n_idx)
{
    if (n_idx != s->nnz) {
        ast_error_set(h->e, "%s: %s/indices has %lld entries but %s/data has %lld " DAMAGED, h->path, s->key,
                      (long long)n_idx, s->key, (long long)s->nnz);
        return -1;
    }
    for (int64_t k = 0; k < s->nnz; k++)
        if (s->a.indices[k] < 0 || s->a.indices[k] >= s->inner) {
            ast_error_set(h->e, "%s: %s/indices[%lld] is %lld, outside 0..%lld (%s) " DAMAGED, h->path, s->key,
                          (long long)k, (long long)s->a.indices[k], (long long)s->inner - 1,
                          strcmp(s->unit, "row") ? "the cells" : "the genes");
            return -1;
        }
    return 0;
}

/* Reads data, indices and indptr and checks them against each other. */
static int read_parts(h5ad *h, stored *s)
{
    char path[H5AD_PATH];
    extent xd, xi, xp;
    h5ad_join(path, s->key, "data");
    if (!(s->a.values = h5ad_read_numeric(h, path, 1, "a 1-D array of values", H5T_NATIVE_FLOAT, &xd))) return -1;
    s->nnz = xd.n;
    h5ad_join(path, s->key, "indices");
    s->a.indices = h5ad_read_numeric(h, path, 1, "a 1-D array of indices", H5T_NATIVE_INT32, &xi);
    if (!s->a.indices || check_indices(h, s, xi.n) < 0) return -1;
    h5ad_join(path, s->key, "indptr");
    s->a.indptr = h5ad_read_numeric(h, path, 1, "a 1-D array of offsets", H5T_NATIVE_INT64, &xp);
    if (!s->a.indptr || check_indptr(h, s, xp.n) < 0) return -1;
    return 0;
}

/* The format ("csr"/"csc") and shape of a compressed group: anndata's
 * encoding-type and shape, or 0.7.0's h5sparse_format and h5sparse_shape. */
static int sparse_format(h5ad *h, const char *key, char *fmt, size_t n, int64_t shape[2])
{
    char enc[64];
    if (h5ad_encoding(h, key, enc, sizeof enc) < 0) return -1;
    if (!enc[0]) {
        if (h5ad_string_attr(h, key, "h5sparse_format", fmt, n) < 0) return -1;
        if (fmt[0] && strcmp(fmt, "csr") && strcmp(fmt, "csc")) {
            ast_error_set(h->e, "%s: %s has h5sparse_format '%s'; supported: csr, csc", h->path, key, fmt);
            return -1;
        }
        if (fmt[0]) return h5ad_shape_attr(h, key, "h5sparse_shape", shape);
    } else if (!strcmp(enc, "csr_matrix") || !strcmp(enc, "csc_matrix")) {
        snprintf(fmt, n, "%.3s", enc);
        return h5ad_shape_attr(h, key, "shape", shape);
    }
    ast_error_set(h->e, "%s: %s has encoding '%s'; supported: dense, csr_matrix, csc_matrix", h->path, key,
                  enc[0] ? enc : "(none: no encoding-type attribute)");
    return -1;
}

static int read_compressed(h5ad *h, const char *key, ast_csr *m, int64_t *cells, int64_t *genes)
{
    char fmt[16];
    int64_t shape[2];
    if (sparse_format(h, key, fmt, sizeof fmt, shape) < 0) return -1;
    *cells = shape[0], *genes = shape[1];
    if (!matrix_size_ok(h, key, shape[0], shape[1])) return -1;
    int csr = !strcmp(fmt, "csr");
    stored s = {key, csr ? "row" : "column", csr ? shape[0] : shape[1], csr ? shape[1] : shape[0], 0, {0}};
    if (read_parts(h, &s) < 0) {
        ast_csr_free(&s.a);
        return -1;
    }
    if (csr) *m = s.a;
    else ast_csr_from_csc(&s.a, shape[0], shape[1], m);
    ast_csr_canonicalize(m, shape[0]);
    return 0;
}

int h5ad_read_matrix(h5ad *h, const char *key, ast_csr *m, int64_t *cells, int64_t *genes)
{
    memset(m, 0, sizeof *m);
    *cells = *genes = 0;
    H5O_type_t type = h5ad_object_type(h, key, "the expression matrix");
    if (type == H5O_TYPE_DATASET) return read_dense(h, key, m, cells, genes);
    if (type == H5O_TYPE_GROUP) return read_compressed(h, key, m, cells, genes);
    return -1; /* h5ad_object_type said why */
}
