/* Checked reads of .h5ad datasets and attributes. Nothing read from the
 * file is trusted: every extent, attribute size and string length is
 * checked before it sizes an allocation or indexes a buffer, and a read
 * that fails says what was missing (a part of the file, a compression
 * filter) before it suspects damage. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "data/data_h5ad.h"

/* ---- checked sizes --------------------------------------------------------- */

static double physical_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size : INFINITY;
}

int64_t h5ad_product(int64_t rows, int64_t cols)
{
    int64_t n;
    if (rows < 0 || cols < 0 || __builtin_mul_overflow(rows, cols, &n)) return -1;
    return n;
}

/* A file can declare any extent: more than the machine's memory is
 * refused with the size named, instead of ending in the out-of-memory
 * killer or in ast_xmalloc's exit. */
int h5ad_affordable(h5ad *h, const char *what, int64_t n, size_t size)
{
    double bytes = (double)n * (double)size;
    if (n < 0) {
        ast_error_set(h->e, "%s: %s is too large to address " DAMAGED, h->path, what);
        return 0;
    }
    if (bytes > physical_bytes() || bytes >= (double)SIZE_MAX) {
        ast_error_set(h->e, "%s: %s needs %.3g GiB, more than this machine's %.3g GiB of memory (damaged, or too large "
                      "to load here?)", h->path, what, bytes / 1073741824.0, physical_bytes() / 1073741824.0);
        return 0;
    }
    return 1;
}

void *h5ad_alloc(h5ad *h, const char *what, int64_t n, size_t size)
{
    if (!h5ad_affordable(h, what, n, size)) return NULL;
    void *p = calloc(n ? (size_t)n : 1, size);
    if (!p) ast_error_set(h->e, "%s: out of memory allocating %.3g GiB for %s", h->path, (double)n * size / 1073741824.0, what);
    return p;
}

/* ---- objects ----------------------------------------------------------------- */

void h5ad_join(char *out, const char *group, const char *name)
{
    snprintf(out, H5AD_PATH, "%s/%s", group, name);
}

/* H5Lexists wants every group on the way to exist: checked link by link. */
int h5ad_exists(h5ad *h, const char *name)
{
    char prefix[H5AD_PATH];
    for (const char *p = name;; p++) {
        if (*p && *p != '/') continue;
        size_t n = (size_t)(p - name);
        if (n >= sizeof prefix) return 0;
        memcpy(prefix, name, n);
        prefix[n] = 0;
        if (n && H5Lexists(h->file, prefix, H5P_DEFAULT) <= 0) return 0;
        if (!*p) return 1;
    }
}

/* The first part of `name` that is not in the file: "X/indptr" -> X has
 * no 'indptr'. */
static void say_missing(h5ad *h, const char *name, const char *want)
{
    const char *slash = strrchr(name, '/');
    char parent[H5AD_PATH];
    snprintf(parent, sizeof parent, "%.*s", slash ? (int)(slash - name) : 0, name);
    if (slash && !h5ad_exists(h, parent)) {
        say_missing(h, parent, "a group");
        return;
    }
    if (slash)
        ast_error_set(h->e, "%s: %s has no '%s' (expected %s there; the file was written without it, or not by "
                      "anndata)", h->path, parent, slash + 1, want);
    else
        ast_error_set(h->e, "%s: no '%s' at the top of the file (expected %s; not an AnnData file?)", h->path, name, want);
}

H5O_type_t h5ad_object_type(h5ad *h, const char *name, const char *want)
{
    H5O_info_t info;
    if (!h5ad_exists(h, name)) {
        say_missing(h, name, want);
        return H5O_TYPE_UNKNOWN;
    }
    if (H5Oget_info_by_name(h->file, name, &info, H5P_DEFAULT) < 0) {
        ast_error_set(h->e, "%s: %s cannot be opened (a dangling link, or the file is damaged)", h->path, name);
        return H5O_TYPE_UNKNOWN;
    }
    /* A named datatype (or what a damaged header makes of one): AnnData
     * stores nothing but groups and datasets. */
    if (info.type != H5O_TYPE_GROUP && info.type != H5O_TYPE_DATASET) {
        ast_error_set(h->e, "%s: %s is neither a dataset nor a group; expected %s " DAMAGED, h->path, name, want);
        return H5O_TYPE_UNKNOWN;
    }
    return info.type;
}

void h5ad_members(h5ad *h, const char *key, ast_strlist *out)
{
    hid_t g = h5ad_exists(h, key) ? H5Gopen2(h->file, key, H5P_DEFAULT) : -1;
    H5G_info_t info = {0};
    if (g >= 0 && H5Gget_info(g, &info) >= 0)
        for (hsize_t i = 0; i < info.nlinks; i++) {
            char name[256] = "";
            if (H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) >= 0)
                ast_strlist_push(out, name);
        }
    if (g >= 0) H5Gclose(g);
}

/* ---- datasets ---------------------------------------------------------------- */

static void shape_text(const extent *x, char *buf, size_t n)
{
    if (x->ndim == 0) snprintf(buf, n, "a scalar");
    else if (x->ndim == 1) snprintf(buf, n, "[%lld]", (long long)x->dims[0]);
    else if (x->ndim == 2) snprintf(buf, n, "[%lld, %lld]", (long long)x->dims[0], (long long)x->dims[1]);
    else if (x->ndim > 2) snprintf(buf, n, "%d-D", x->ndim);
    else snprintf(buf, n, "of unreadable shape");
}

static int read_extent(hid_t d, int ndim, extent *x)
{
    hid_t sp = H5Dget_space(d);
    hsize_t hd[H5S_MAX_RANK] = {0};
    x->ndim = H5Sget_simple_extent_ndims(sp);
    int ok = x->ndim > 0 && H5Sget_simple_extent_dims(sp, hd, NULL) == x->ndim && x->ndim == ndim;
    H5Sclose(sp);
    x->dims[0] = hd[0] > INT64_MAX ? -1 : (int64_t)hd[0];
    x->dims[1] = x->ndim == 2 ? (hd[1] > INT64_MAX ? -1 : (int64_t)hd[1]) : 1;
    x->n = h5ad_product(x->dims[0], x->dims[1]);
    return ok;
}

hid_t h5ad_open_dataset(h5ad *h, const char *name, int ndim, const char *want, extent *x)
{
    H5O_type_t type = h5ad_object_type(h, name, want);
    if (type == H5O_TYPE_UNKNOWN) return -1;
    if (type != H5O_TYPE_DATASET) {
        ast_error_set(h->e, "%s: %s is a group; expected %s " DAMAGED, h->path, name, want);
        return -1;
    }
    hid_t d = H5Dopen2(h->file, name, H5P_DEFAULT);
    if (d < 0) {
        ast_error_set(h->e, "%s: cannot open dataset '%s' (file damaged or truncated?)", h->path, name);
        return -1;
    }
    int ok = read_extent(d, ndim, x);
    char shape[64];
    shape_text(x, shape, sizeof shape);
    if (!ok) ast_error_set(h->e, "%s: %s is %s; expected %s " DAMAGED, h->path, name, shape, want);
    else if (x->n < 0) ast_error_set(h->e, "%s: %s has shape %s, too large to address " DAMAGED, h->path, name, shape);
    if (ok && x->n >= 0) return d;
    H5Dclose(d);
    return -1;
}

/* The first compression filter of d that this libhdf5 cannot run, or -1. */
static H5Z_filter_t missing_filter(hid_t d, char *name, size_t n)
{
    hid_t p = H5Dget_create_plist(d);
    int count = p < 0 ? 0 : H5Pget_nfilters(p);
    H5Z_filter_t missing = -1;
    for (int i = 0; i < count && missing < 0; i++) {
        unsigned flags = 0, config = 0;
        size_t nv = 0;
        H5Z_filter_t f = H5Pget_filter2(p, (unsigned)i, &flags, &nv, NULL, n, name, &config);
        if (f >= 0 && H5Zfilter_avail(f) <= 0) missing = f;
    }
    if (p >= 0) H5Pclose(p);
    return missing;
}

void h5ad_read_failed(h5ad *h, hid_t d, const char *name, const char *what)
{
    char filter[128] = "";
    H5Z_filter_t f = missing_filter(d, filter, sizeof filter);
    if (f >= 0)
        ast_error_set(h->e, "%s: %s is compressed with HDF5 filter %d ('%s'), which this libhdf5 cannot decode; "
                      "write the file again with compression='gzip' or 'lzf' (adata.write_h5ad(path, "
                      "compression='gzip'))", h->path, name, (int)f, filter[0] ? filter : "unnamed");
    else
        ast_error_set(h->e, "%s: cannot read the %s of '%s' (file damaged or truncated?)", h->path, what, name);
}

void *h5ad_read_numeric(h5ad *h, const char *name, int ndim, const char *want, hid_t memtype, extent *x)
{
    hid_t d = h5ad_open_dataset(h, name, ndim, want, x);
    if (d < 0) return NULL;
    hid_t t = H5Dget_type(d);
    H5T_class_t cls = H5Tget_class(t);
    H5Tclose(t);
    void *buf = NULL;
    if (cls != H5T_INTEGER && cls != H5T_FLOAT)
        ast_error_set(h->e, "%s: %s does not hold numbers; expected %s " DAMAGED, h->path, name, want);
    else if ((buf = h5ad_alloc(h, name, x->n, H5Tget_size(memtype))) &&
             H5Dread(d, memtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        h5ad_read_failed(h, d, name, "numbers");
        free(buf);
        buf = NULL;
    }
    H5Dclose(d);
    return buf;
}

int h5ad_read_rows(h5ad *h, hid_t d, const char *name, const extent *x, int64_t row0, int64_t rows, float *out)
{
    hsize_t start[2] = {(hsize_t)row0, 0}, count[2] = {(hsize_t)rows, (hsize_t)x->dims[1]};
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(2, count, NULL);
    int ok = H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
             H5Dread(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, out) >= 0;
    H5Sclose(ms), H5Sclose(fs);
    if (!ok) h5ad_read_failed(h, d, name, "numbers");
    return ok ? 0 : -1;
}

void h5ad_free_strings(char **s, int64_t n)
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
    char **raw = h5ad_alloc(h, name, n, sizeof *raw), **out = NULL;
    if (!raw) return NULL;
    hid_t mt = vlen_string_type(t), sp = H5Dget_space(d);
    if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) >= 0) {
        if ((out = h5ad_alloc(h, name, n, sizeof *out)))
            for (int64_t i = 0; i < n; i++) out[i] = ast_xstrdup(raw[i] ? raw[i] : "");
        H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, raw);
    } else {
        h5ad_read_failed(h, d, name, "strings");
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
    char *raw = size ? h5ad_alloc(h, name, h5ad_product(n, (int64_t)size), 1) : NULL, **out = NULL;
    if (!raw) {
        if (!size) ast_error_set(h->e, "%s: %s holds strings of length 0 " DAMAGED, h->path, name);
        return NULL;
    }
    if (H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw) < 0)
        h5ad_read_failed(h, d, name, "strings");
    else if ((out = h5ad_alloc(h, name, n, sizeof *out)))
        for (int64_t i = 0; i < n; i++) {
            out[i] = ast_xcalloc(size + 1, 1);
            memcpy(out[i], raw + (size_t)i * size, size);
        }
    free(raw);
    return out;
}

/* anndata decodes every string it reads, and fails on the file at the
 * first that is not UTF-8; alphast would write such a string into a file
 * anndata cannot read. */
static int utf8_strings(h5ad *h, const char *name, char *const *s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!ast_utf8_text(s[i])) {
            char shown[64];
            ast_cfg_escape(s[i], shown, sizeof shown);
            ast_error_set(h->e, "%s: %s: string %lld ('%s') is not UTF-8 text, which anndata cannot read either; "
                          "write the strings as UTF-8 (e.g. decoded from latin-1 in Python) and save the file again",
                          h->path, name, (long long)i, shown);
            return 0;
        }
    return 1;
}

char **h5ad_read_strings(h5ad *h, const char *name, const char *want, int64_t *n)
{
    extent x;
    hid_t d = h5ad_open_dataset(h, name, 1, want, &x);
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
    if (out && !utf8_strings(h, name, out, x.n)) {
        h5ad_free_strings(out, x.n);
        out = NULL;
    }
    if (out) *n = x.n;
    H5Tclose(t);
    H5Dclose(d);
    return out;
}

/* ---- attributes ---------------------------------------------------------------- */

/* Opens attribute `attr` of object `name` and checks that it holds
 * exactly `count` values (-1: any number) of class `cls`: H5Aread writes
 * as many values as the file says, whatever room the caller has. */
static hid_t open_attribute(h5ad *h, const char *name, const char *attr, hssize_t count, H5T_class_t cls,
                            const char *want, hssize_t *got)
{
    hid_t a = H5Aopen_by_name(h->file, name, attr, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) {
        ast_error_set(h->e, "%s: %s: cannot read attribute '%s' (file damaged or truncated?)", h->path, name, attr);
        return -1;
    }
    hid_t sp = H5Aget_space(a), t = H5Aget_type(a);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    H5T_class_t c = H5Tget_class(t);
    H5Sclose(sp);
    H5Tclose(t);
    if (got) *got = n;
    if ((n == count || (count < 0 && n >= 0)) && c == cls) return a;
    if (c != cls)
        ast_error_set(h->e, "%s: %s: attribute '%s' is not %s " DAMAGED, h->path, name, attr, want);
    else
        ast_error_set(h->e, "%s: %s: attribute '%s' has %lld values; expected %s " DAMAGED, h->path, name, attr,
                      (long long)n, want);
    H5Aclose(a);
    return -1;
}

static int has_attr(h5ad *h, const char *name, const char *attr)
{
    return H5Aexists_by_name(h->file, name, attr, H5P_DEFAULT) > 0;
}

/* A fixed-length string is read through a memory type of buf's size, so
 * libhdf5 truncates it to the room there is rather than writing as many
 * bytes as the file says. */
int h5ad_string_attr(h5ad *h, const char *name, const char *attr, char *buf, size_t n)
{
    buf[0] = 0;
    if (!has_attr(h, name, attr)) return 0;
    hid_t a = open_attribute(h, name, attr, 1, H5T_STRING, "one string", NULL);
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a), mt;
    char *s = NULL;
    int ok;
    if (H5Tis_variable_str(t) > 0) {
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
    if (!ok) ast_error_set(h->e, "%s: %s: cannot read attribute '%s' " DAMAGED, h->path, name, attr);
    H5Tclose(mt);
    H5Tclose(t);
    H5Aclose(a);
    return ok ? 0 : -1;
}

int h5ad_encoding(h5ad *h, const char *name, char *buf, size_t n)
{
    return h5ad_string_attr(h, name, "encoding-type", buf, n);
}

/* h5py writes an empty list as a float64 array of no values. */
static int empty_attr(h5ad *h, const char *name, const char *attr)
{
    hid_t a = H5Aopen_by_name(h->file, name, attr, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t sp = H5Aget_space(a);
    int empty = H5Sget_simple_extent_npoints(sp) == 0;
    H5Sclose(sp);
    H5Aclose(a);
    return empty;
}

char **h5ad_string_array_attr(h5ad *h, const char *name, const char *attr, int *n)
{
    *n = 0;
    if (!has_attr(h, name, attr) || empty_attr(h, name, attr)) return ast_xcalloc(1, sizeof(char *));
    hssize_t count = 0;
    hid_t a = open_attribute(h, name, attr, -1, H5T_STRING, "an array of strings", &count);
    if (a < 0) return NULL;
    hid_t t = H5Aget_type(a), mt = vlen_string_type(t), sp = H5Aget_space(a);
    char **raw = count <= INT32_MAX ? h5ad_alloc(h, attr, count, sizeof *raw) : NULL, **out = NULL;
    if (raw && H5Tis_variable_str(t) > 0 && H5Aread(a, mt, raw) >= 0) {
        out = ast_xcalloc((size_t)count + 1, sizeof *out);
        for (hssize_t i = 0; i < count; i++) out[i] = ast_xstrdup(raw[i] ? raw[i] : "");
        H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, raw);
        *n = (int)count;
        char where[H5AD_PATH + 64];
        snprintf(where, sizeof where, "%s: attribute '%s'", name, attr);
        if (!utf8_strings(h, where, out, count)) h5ad_free_strings(out, count), out = NULL, *n = 0;
    } else if (!h->e->msg[0]) {
        ast_error_set(h->e, "%s: %s: attribute '%s' is not an array of variable-length strings " DAMAGED, h->path,
                      name, attr);
    }
    free(raw);
    H5Sclose(sp), H5Tclose(mt), H5Tclose(t), H5Aclose(a);
    return out;
}

int h5ad_shape_attr(h5ad *h, const char *name, const char *attr, int64_t shape[2])
{
    if (!has_attr(h, name, attr)) {
        ast_error_set(h->e, "%s: %s has no '%s' attribute " DAMAGED, h->path, name, attr);
        return -1;
    }
    hid_t a = open_attribute(h, name, attr, 2, H5T_INTEGER, "2 integers", NULL);
    if (a < 0) return -1;
    int ok = H5Aread(a, H5T_NATIVE_INT64, shape) >= 0;
    H5Aclose(a);
    if (!ok) {
        ast_error_set(h->e, "%s: %s: cannot read attribute '%s' " DAMAGED, h->path, name, attr);
        return -1;
    }
    if (shape[0] < 0 || shape[1] < 0) {
        ast_error_set(h->e, "%s: %s: attribute '%s' is [%lld, %lld]; sizes cannot be negative " DAMAGED, h->path, name,
                      attr, (long long)shape[0], (long long)shape[1]);
        return -1;
    }
    if (h5ad_product(shape[0], shape[1]) < 0) {
        ast_error_set(h->e, "%s: %s: attribute '%s' is [%lld, %lld]; too large to address " DAMAGED, h->path, name,
                      attr, (long long)shape[0], (long long)shape[1]);
        return -1;
    }
    return 0;
}
