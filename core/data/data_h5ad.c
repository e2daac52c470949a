/* AnnData .h5ad through libhdf5: X dense or CSR/CSC, obsm coordinates, obs
 * categorical or string columns, var names — the encodings anndata >= 0.8
 * writes ("encoding-type" attributes). */
#include <hdf5.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

typedef struct h5ad {
    hid_t file;
    const char *path;
    ast_error *e;
    int coord_dims;
} h5ad;

static int exists(hid_t loc, const char *name)
{
    return H5Lexists(loc, name, H5P_DEFAULT) > 0;
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

/* "encoding-type" of a group or dataset, "" when absent. */
static void encoding_type(hid_t obj, char *buf, size_t n)
{
    buf[0] = 0;
    if (H5Aexists(obj, "encoding-type") <= 0) return;
    hid_t a = H5Aopen(obj, "encoding-type", H5P_DEFAULT), t = H5Aget_type(a);
    if (H5Tis_variable_str(t) > 0) {
        char *s = NULL;
        hid_t mt = vlen_string_type(t);
        if (H5Aread(a, mt, &s) >= 0 && s) {
            snprintf(buf, n, "%s", s);
            H5free_memory(s);
        }
        H5Tclose(mt);
    } else {
        size_t size = H5Tget_size(t);
        char *s = ast_xcalloc(size + 1, 1);
        if (H5Aread(a, t, s) >= 0) snprintf(buf, n, "%s", s);
        free(s);
    }
    H5Tclose(t);
    H5Aclose(a);
}

/* Reads a whole 1-D or 2-D numeric dataset, converted to `memtype`. */
static void *read_numeric(h5ad *h, hid_t loc, const char *name, hid_t memtype, size_t elem, int64_t dims[2], int *ndim)
{
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) {
        ast_error_set(h->e, "%s: cannot open dataset '%s' (file damaged or truncated?)", h->path, name);
        return NULL;
    }
    hid_t sp = H5Dget_space(d);
    hsize_t hd[2] = {1, 1};
    *ndim = H5Sget_simple_extent_ndims(sp);
    void *buf = NULL;
    if (*ndim < 1 || *ndim > 2) {
        ast_error_set(h->e, "%s: dataset '%s' has %d dimensions, expected 1 or 2", h->path, name, *ndim);
    } else {
        H5Sget_simple_extent_dims(sp, hd, NULL);
        dims[0] = (int64_t)hd[0];
        dims[1] = *ndim == 2 ? (int64_t)hd[1] : 1;
        buf = ast_xmalloc((size_t)(dims[0] * dims[1]) * elem);
        if (H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
            ast_error_set(h->e, "%s: cannot read dataset '%s' as numbers (file damaged or truncated?)", h->path, name);
            free(buf);
            buf = NULL;
        }
    }
    H5Sclose(sp);
    H5Dclose(d);
    return buf;
}

/* Reads a 1-D string dataset (variable or fixed length) into n strdup'd strings. */
static char **read_strings(h5ad *h, hid_t loc, const char *name, int64_t *n)
{
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) {
        ast_error_set(h->e, "%s: cannot open '%s'", h->path, name);
        return NULL;
    }
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    hsize_t dim = 0;
    H5Sget_simple_extent_dims(sp, &dim, NULL);
    *n = (int64_t)dim;
    char **out = NULL;
    if (H5Tget_class(t) != H5T_STRING) {
        ast_error_set(h->e, "%s: '%s' should hold strings", h->path, name);
    } else if (H5Tis_variable_str(t) > 0) {
        char **raw = ast_xcalloc(dim ? dim : 1, sizeof *raw);
        hid_t mt = vlen_string_type(t);
        if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0) {
            out = ast_xcalloc(dim ? dim : 1, sizeof *out);
            for (hsize_t i = 0; i < dim; i++) out[i] = ast_xstrdup(raw[i] ? raw[i] : "");
            H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, raw);
        } else {
            ast_error_set(h->e, "%s: cannot read strings of '%s'", h->path, name);
        }
        H5Tclose(mt);
        free(raw);
    } else {
        size_t size = H5Tget_size(t);
        char *raw = ast_xcalloc(dim * size + 1, 1);
        if (H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0) {
            out = ast_xcalloc(dim ? dim : 1, sizeof *out);
            for (hsize_t i = 0; i < dim; i++) {
                out[i] = ast_xcalloc(size + 1, 1);
                memcpy(out[i], raw + i * size, size);
            }
        } else {
            ast_error_set(h->e, "%s: cannot read strings of '%s'", h->path, name);
        }
        free(raw);
    }
    H5Tclose(t);
    H5Sclose(sp);
    H5Dclose(d);
    return out;
}

static void free_strings(char **s, int64_t n)
{
    if (!s) return;
    for (int64_t i = 0; i < n; i++) free(s[i]);
    free(s);
}

/* X as a dense [cells, genes] float matrix: dense dataset, csr_matrix or csc_matrix group. */
static float *read_x(h5ad *h, int64_t *cells, int64_t *genes)
{
    if (!exists(h->file, "X")) {
        ast_error_set(h->e, "%s: no X matrix (not an AnnData file?)", h->path);
        return NULL;
    }
    H5O_info_t info;
    H5Oget_info_by_name(h->file, "X", &info, H5P_DEFAULT);
    int ndim;
    int64_t dims[2];
    if (info.type == H5O_TYPE_DATASET) {
        float *x = read_numeric(h, h->file, "X", H5T_NATIVE_FLOAT, sizeof(float), dims, &ndim);
        *cells = dims[0], *genes = dims[1];
        return x;
    }
    hid_t g = H5Gopen2(h->file, "X", H5P_DEFAULT);
    char enc[64];
    encoding_type(g, enc, sizeof enc);
    int csr = !strcmp(enc, "csr_matrix"), csc = !strcmp(enc, "csc_matrix");
    float *dense = NULL;
    if (!csr && !csc) {
        ast_error_set(h->e, "%s: X has encoding '%s'; supported: dense, csr_matrix, csc_matrix", h->path, enc);
        H5Gclose(g);
        return NULL;
    }
    int64_t shape[2] = {0, 0};
    hid_t a = H5Aexists(g, "shape") > 0 ? H5Aopen(g, "shape", H5P_DEFAULT) : -1;
    if (a < 0 || H5Aread(a, H5T_NATIVE_INT64, shape) < 0) {
        ast_error_set(h->e, "%s: X (%s) has no readable 'shape' attribute", h->path, enc);
    } else {
        int64_t nd[2], ni[2], np[2];
        float *data = read_numeric(h, g, "data", H5T_NATIVE_FLOAT, sizeof(float), nd, &ndim);
        int64_t *idx = data ? read_numeric(h, g, "indices", H5T_NATIVE_INT64, 8, ni, &ndim) : NULL;
        int64_t *ptr = idx ? read_numeric(h, g, "indptr", H5T_NATIVE_INT64, 8, np, &ndim) : NULL;
        int64_t outer = csr ? shape[0] : shape[1], inner = csr ? shape[1] : shape[0];
        if (ptr && (np[0] != outer + 1 || ni[0] != nd[0] || ptr[outer] != nd[0] || ptr[0] != 0)) {
            ast_error_set(h->e, "%s: X (%s) is inconsistent: indptr has %lld entries for %lld rows, %lld values",
                          h->path, enc, (long long)np[0], (long long)outer, (long long)nd[0]);
        } else if (ptr) {
            dense = ast_xcalloc((size_t)(shape[0] * shape[1]), sizeof(float));
            for (int64_t o = 0; o < outer && dense; o++)
                for (int64_t k = ptr[o]; k < ptr[o + 1]; k++) {
                    if (idx[k] < 0 || idx[k] >= inner || ptr[o + 1] < ptr[o]) {
                        ast_error_set(h->e, "%s: X (%s) has index %lld outside 0..%lld", h->path, enc,
                                      (long long)idx[k], (long long)inner - 1);
                        free(dense);
                        dense = NULL;
                        break;
                    }
                    int64_t r = csr ? o : idx[k], c = csr ? idx[k] : o;
                    dense[r * shape[1] + c] = data[k];
                }
        }
        free(data), free(idx), free(ptr);
    }
    if (a >= 0) H5Aclose(a);
    H5Gclose(g);
    *cells = shape[0], *genes = shape[1];
    return dense;
}

/* obs column as integer codes with names: categorical (codes + categories) or strings. */
static int *read_obs_labels(h5ad *h, const char *key, int64_t cells, char ***names, int *n_names)
{
    char path[512];
    snprintf(path, sizeof path, "obs/%s", key);
    if (!exists(h->file, "obs") || !exists(h->file, path)) {
        ast_error_set(h->e, "%s: no obs column '%s'; set data.preprocessing key to an existing column", h->path, key);
        return NULL;
    }
    H5O_info_t info;
    H5Oget_info_by_name(h->file, path, &info, H5P_DEFAULT);
    int64_t n = 0;
    int *codes = ast_xcalloc((size_t)cells, sizeof *codes);
    if (info.type == H5O_TYPE_GROUP) { /* categorical */
        hid_t g = H5Gopen2(h->file, path, H5P_DEFAULT);
        int ndim;
        int64_t dims[2];
        int64_t *raw = read_numeric(h, g, "codes", H5T_NATIVE_INT64, 8, dims, &ndim);
        *names = raw ? read_strings(h, g, "categories", &n) : NULL;
        H5Gclose(g);
        if (!*names || dims[0] != cells) {
            if (*names) ast_error_set(h->e, "%s: obs/%s has %lld codes for %lld cells", h->path, key, (long long)dims[0], (long long)cells);
            free(raw), free(codes);
            return NULL;
        }
        for (int64_t i = 0; i < cells; i++) codes[i] = raw[i] < 0 || raw[i] >= n ? -1 : (int)raw[i];
        free(raw);
    } else { /* plain strings: number them in order of first appearance */
        int64_t m = 0;
        char **vals = read_strings(h, h->file, path, &m);
        if (!vals || m != cells) {
            free_strings(vals, m), free(codes);
            if (vals) ast_error_set(h->e, "%s: obs/%s has %lld values for %lld cells", h->path, key, (long long)m, (long long)cells);
            return NULL;
        }
        *names = ast_xcalloc((size_t)cells, sizeof **names);
        for (int64_t i = 0; i < cells; i++) {
            int64_t j = 0;
            while (j < n && strcmp((*names)[j], vals[i])) j++;
            if (j == n) (*names)[n++] = ast_xstrdup(vals[i]);
            codes[i] = (int)j;
        }
        free_strings(vals, m);
    }
    *n_names = (int)n;
    return codes;
}

static float *read_coords(h5ad *h, const char *key, int64_t cells)
{
    char path[512];
    snprintf(path, sizeof path, "obsm/%s", key);
    if (!exists(h->file, "obsm") || !exists(h->file, path)) {
        char found[512] = "";
        if (exists(h->file, "obsm")) {
            hid_t g = H5Gopen2(h->file, "obsm", H5P_DEFAULT);
            hsize_t n = 0;
            H5Gget_num_objs(g, &n);
            for (hsize_t i = 0; i < n; i++) {
                char name[128];
                H5Gget_objname_by_idx(g, i, name, sizeof name);
                size_t off = strlen(found);
                snprintf(found + off, sizeof found - off, "%s%s", off ? ", " : "", name);
            }
            H5Gclose(g);
        }
        ast_error_set(h->e, "%s: no coordinates at obsm/%s (present: %s); set data.preprocessing.position_key",
                      h->path, key, found[0] ? found : "none");
        return NULL;
    }
    int ndim;
    int64_t dims[2];
    float *raw = read_numeric(h, h->file, path, H5T_NATIVE_FLOAT, sizeof(float), dims, &ndim);
    if (!raw) return NULL;
    if (dims[0] != cells || (dims[1] != 2 && dims[1] != 3)) {
        ast_error_set(h->e, "%s: obsm/%s is [%lld, %lld]; expected [%lld, 2] or [%lld, 3]", h->path, key,
                      (long long)dims[0], (long long)dims[1], (long long)cells, (long long)cells);
        free(raw);
        return NULL;
    }
    h->coord_dims = (int)dims[1];
    float *pos = ast_xcalloc((size_t)cells * 3, sizeof(float));
    for (int64_t i = 0; i < cells; i++)
        for (int d = 0; d < dims[1]; d++) pos[i * 3 + d] = raw[i * dims[1] + d];
    free(raw);
    return pos; /* 2-D data keep z = 0 here; preprocessing lifts slices to 3-D */
}

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

static int read_all(h5ad *h, const ast_data_opts *o, ast_dataset *d)
{
    int64_t cells = 0, genes = 0, n_var = 0;
    d->expr = read_x(h, &cells, &genes);
    if (!d->expr) return 0;
    if (cells < 1 || genes < 1) {
        ast_error_set(h->e, "%s: X is empty (%lld cells x %lld genes)", h->path, (long long)cells, (long long)genes);
        return 0;
    }
    d->n_cells = cells;
    char **names = exists(h->file, "var") && exists(h->file, "var/_index") ? read_strings(h, h->file, "var/_index", &n_var) : NULL;
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
    d->pos = read_coords(h, o->position_key, cells);
    if (!d->pos) return 0;
    d->coord_dims = h->coord_dims;
    d->slice = ast_xcalloc((size_t)cells, sizeof *d->slice);
    d->n_slices = 1;
    if (o->slice_key) {
        char **names = NULL;
        int n = 0;
        int *codes = read_obs_labels(h, o->slice_key, cells, &names, &n);
        if (!codes) return 0;
        free(d->slice);
        d->slice = codes;
        d->n_slices = n;
        free_strings(names, n);
    }
    /* Cell types are optional (docs/model.md §8.1): a missing column means none. */
    char ct_path[512];
    snprintf(ct_path, sizeof ct_path, "obs/%s", o->cell_type_key ? o->cell_type_key : "");
    if (o->cell_type_key && exists(h->file, "obs") && exists(h->file, ct_path)) {
        d->cell_type = read_obs_labels(h, o->cell_type_key, cells, &d->type_names, &d->n_types);
        if (!d->cell_type) return 0;
    }
    return check_finite(h, d);
}

int ast_data_read_h5ad(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e)
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
    memset(d, 0, sizeof *d);
}
