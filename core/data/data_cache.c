/* The preprocessing cache: a parsed and preprocessed dataset saved as a
 * safetensors file named by a hash of everything that determines it (the
 * input files' identity and the preprocessing options), so repeated runs
 * on a large .h5ad skip parsing. A stale or damaged cache is never trusted:
 * any inconsistency means re-parsing. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data.h"
#include "io/safetensors.h"
#include "base/hash.h"

/* Bump when the layout or the preprocessing code changes what is stored. */
/* 2: the readers validate what 1 accepted (negative counts, repeated coordinate columns, truncated
 * gzip, damaged .h5ad sizes), so data cached by 1 is read again. */
#define CACHE_FORMAT "alphast-data-cache 2"

const char *ast_data_default_cache_dir(char *buf, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(buf, n, "%s/alphast", xdg);
    else if (home && home[0]) snprintf(buf, n, "%s/.cache/alphast", home);
    else return NULL;
    return buf;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    return ast_fnv1a(h, s ? s : "\x01null", (s ? strlen(s) : 5) + 1); /* the NUL separates fields */
}

/* A file is identified by its absolute path, size and modification time. */
static uint64_t hash_file(uint64_t h, const char *path)
{
    char abs[PATH_MAX];
    struct stat st;
    if (!path) return hash_str(h, NULL);
    h = hash_str(h, realpath(path, abs) ? abs : path);
    if (stat(path, &st) == 0) {
        int64_t id[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec};
        h = ast_fnv1a(h, id, sizeof id);
    }
    return h;
}

static uint64_t cache_key(const char *path, const ast_data_opts *o)
{
    uint64_t h = hash_str(AST_FNV_OFFSET, CACHE_FORMAT);
    h = hash_file(h, path);
    h = hash_file(h, o->coords_file);
    h = hash_str(hash_str(hash_str(h, o->position_key), o->cell_type_key), o->slice_key);
    int flags[3] = {o->genes_by_cells, o->log_normalize, o->scale};
    float values[2] = {o->clip, o->z_spacing};
    h = ast_fnv1a(ast_fnv1a(h, flags, sizeof flags), values, sizeof values);
    h = ast_fnv1a(h, &o->n_genes, sizeof o->n_genes);
    for (int g = 0; g < o->n_genes; g++) h = hash_str(h, o->genes[g]);
    return h;
}

static char *names_json(char *const *names, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(names[i]));
    char *s = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return s;
}

static int save(const char *file, const ast_dataset *d, ast_error *e)
{
    ast_st_writer *w = ast_st_writer_new();
    int64_t ncg[2] = {d->n_cells, d->n_genes}, nc3[2] = {d->n_cells, 3}, nc[1] = {d->n_cells};
    ast_st_writer_add(w, "expr", AST_ST_F32, 2, ncg, d->expr);
    ast_st_writer_add(w, "pos", AST_ST_F32, 2, nc3, d->pos);
    ast_st_writer_add(w, "slice", AST_ST_I32, 1, nc, d->slice);
    if (d->cell_type) ast_st_writer_add(w, "cell_type", AST_ST_I32, 1, nc, d->cell_type);
    char *genes = names_json(d->genes, d->n_genes), *types = names_json(d->type_names, d->n_types), num[32];
    ast_st_writer_metadata(w, "format", CACHE_FORMAT);
    ast_st_writer_metadata(w, "genes", genes);
    ast_st_writer_metadata(w, "type_names", types);
    snprintf(num, sizeof num, "%d", d->coord_dims);
    ast_st_writer_metadata(w, "coord_dims", num);
    snprintf(num, sizeof num, "%d", d->n_slices);
    ast_st_writer_metadata(w, "n_slices", num);
    int rc = ast_st_writer_write(w, file, e);
    cJSON_free(genes), cJSON_free(types);
    ast_st_writer_free(w);
    return rc;
}

/* A JSON array of n strings (n = -1: any length) into a fresh array. */
static char **names_parse(const char *json, int *n)
{
    cJSON *a = json ? cJSON_Parse(json) : NULL;
    int m = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    char **out = NULL;
    if (m >= 0 && (*n < 0 || m == *n)) {
        out = ast_xcalloc((size_t)m + 1, sizeof *out);
        for (int i = 0; i < m; i++) {
            const char *s = cJSON_GetStringValue(cJSON_GetArrayItem(a, i));
            out[i] = ast_xstrdup(s ? s : "");
        }
        *n = m;
    }
    cJSON_Delete(a);
    return out;
}

/* The tensor's bytes, if it is there with this dtype and shape. */
static const void *tensor(const ast_st_file *f, const char *name, ast_st_dtype t, int ndim, const int64_t *shape)
{
    int i = ast_st_find(f, name);
    if (i < 0 || ast_st_dtype_of(f, i) != t || ast_st_ndim(f, i) != ndim) return NULL;
    for (int k = 0; k < ndim; k++)
        if (ast_st_shape(f, i)[k] != shape[k]) return NULL;
    return ast_st_data(f, i);
}

static void *copy(const void *src, size_t bytes)
{
    void *p = ast_xmalloc(bytes ? bytes : 1);
    memcpy(p, src, bytes);
    return p;
}

static int ints_in_range(const int *v, int64_t n, int lo, int hi)
{
    for (int64_t i = 0; i < n; i++)
        if (v[i] < lo || v[i] >= hi) return 0;
    return 1;
}

/* Fills d from the cache file; 0 on success, -1 (d left empty) on any
 * inconsistency, with why in e. */
static int restore(const ast_st_file *f, const char *path, ast_dataset *d, ast_error *e)
{
    memset(d, 0, sizeof *d);
    const char *fmt = ast_st_metadata(f, "format"), *cd = ast_st_metadata(f, "coord_dims"), *ns = ast_st_metadata(f, "n_slices");
    int e_idx = ast_st_find(f, "expr");
    int n_genes = -1, n_types = -1;
    char **genes = names_parse(ast_st_metadata(f, "genes"), &n_genes);
    char **types = names_parse(ast_st_metadata(f, "type_names"), &n_types);
    int64_t n_cells = e_idx >= 0 && ast_st_ndim(f, e_idx) == 2 ? ast_st_shape(f, e_idx)[0] : 0;
    int64_t ncg[2] = {n_cells, n_genes}, nc3[2] = {n_cells, 3}, nc[1] = {n_cells};
    const void *expr = tensor(f, "expr", AST_ST_F32, 2, ncg), *pos = tensor(f, "pos", AST_ST_F32, 2, nc3);
    const void *slice = tensor(f, "slice", AST_ST_I32, 1, nc), *type = tensor(f, "cell_type", AST_ST_I32, 1, nc);
    int want_types = ast_st_find(f, "cell_type") >= 0; /* saved only when the data had types */
    d->genes = genes, d->type_names = types, d->n_genes = n_genes, d->n_types = n_types > 0 ? n_types : 0;
    if (!fmt || strcmp(fmt, CACHE_FORMAT) || !cd || !ns || !genes || !types || n_cells < 1 || !expr || !pos ||
        !slice || (want_types && !type)) {
        ast_error_set(e, "%s: missing or misshapen entries", ast_st_path(f));
        ast_dataset_free(d);
        return -1;
    }
    d->n_cells = n_cells;
    d->coord_dims = atoi(cd), d->n_slices = atoi(ns);
    d->expr = copy(expr, (size_t)(n_cells * n_genes) * sizeof(float));
    d->pos = copy(pos, (size_t)n_cells * 3 * sizeof(float));
    d->slice = copy(slice, (size_t)n_cells * sizeof(int));
    if (want_types) d->cell_type = copy(type, (size_t)n_cells * sizeof(int));
    d->source = ast_xstrdup(path);
    if ((d->coord_dims != 2 && d->coord_dims != 3) || d->n_slices < 1 || !ints_in_range(d->slice, n_cells, 0, d->n_slices) ||
        (d->cell_type && !ints_in_range(d->cell_type, n_cells, -1, d->n_types))) {
        ast_error_set(e, "%s: slice or cell type indices out of range", ast_st_path(f));
        ast_dataset_free(d);
        return -1;
    }
    return 0;
}

static int parse(const char *path, const ast_data_opts *o, ast_dataset *d, ast_error *e)
{
    return ast_data_read(path, o, d, e) < 0 || ast_data_preprocess(d, o, e) < 0 ? -1 : 0;
}

int ast_data_load(const char *path, const ast_data_opts *o, const char *cache_dir, ast_dataset *d, ast_error *e)
{
    if (!cache_dir) return parse(path, o, d, e);
    char file[PATH_MAX];
    snprintf(file, sizeof file, "%s/%016" PRIx64 ".safetensors", cache_dir, cache_key(path, o));
    struct stat st;
    if (stat(file, &st) == 0) {
        ast_error why;
        ast_st_file *f = ast_st_open(file, &why);
        int ok = f && restore(f, path, d, &why) == 0;
        ast_st_close(f);
        if (ok) {
            ast_log(AST_LOG_INFO, "using cached preprocessing from %s", file);
            return 0;
        }
        ast_log(AST_LOG_WARN, "ignoring a damaged preprocessing cache: %s; re-parsing %s", why.msg, path);
    }
    if (parse(path, o, d, e) < 0) return -1;
    ast_error why;
    if (ast_make_dirs(cache_dir, &why) < 0 || save(file, d, &why) < 0)
        ast_log(AST_LOG_WARN, "cannot write the preprocessing cache (%s); data.cache_dir: null turns it off", why.msg);
    return 0;
}
