/* Opening a safetensors file: the whole file is read into memory and its
 * header validated once, so the accessors never see an inconsistent entry.
 * Data is little-endian as on every host alphast targets. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/safetensors.h"

/* The reference implementation refuses larger headers too. */
#define MAX_HEADER_BYTES 100000000ull
/* Integers in the header are JSON numbers (doubles): exact up to 2^53. */
#define MAX_JSON_INT 9007199254740992.0

typedef struct st_entry {
    char *name;
    ast_st_dtype dtype;
    int ndim;
    int64_t shape[AST_ST_MAX_DIMS];
    int64_t numel;
    uint64_t begin, end;
} st_entry;

struct ast_st_file {
    char *path;
    unsigned char *bytes;
    size_t size;
    const unsigned char *buffer; /* the data after the header */
    uint64_t buffer_size;
    st_entry *t;
    int n;
    const st_entry **by_name; /* sorted by name, for lookups */
    char **meta;  /* key, value, key, value, ... */
    int n_meta;
};

/* ---- reading the bytes ---------------------------------------------------- */

static unsigned char *read_all(const char *path, size_t *size, ast_error *e)
{
    FILE *in = ast_fopen_regular(path, e);
    if (!in) return NULL;
    struct stat st;
    if (fstat(fileno(in), &st) != 0) {
        ast_error_set(e, "%s: cannot read (%s); check the disk", path, strerror(errno));
        fclose(in);
        return NULL;
    }
    *size = (size_t)st.st_size;
    unsigned char *bytes = ast_xmalloc(*size);
    size_t got = fread(bytes, 1, *size, in);
    int err = ferror(in) ? errno : 0;
    fclose(in);
    if (got != *size) {
        ast_error_set(e, "%s: read %zu of %zu bytes (%s); check the disk", path, got, *size,
                      err ? strerror(err) : "file shrank while reading");
        free(bytes);
        return NULL;
    }
    return bytes;
}

static uint64_t le64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

/* ---- one header entry ----------------------------------------------------- */

static int json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= MAX_JSON_INT) || d != (double)(uint64_t)d) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int parse_dtype(const char *path, const char *name, const cJSON *item, st_entry *t, ast_error *e)
{
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    if (!cJSON_IsString(dt)) {
        ast_error_set(e, "%s: tensor '%s' has no \"dtype\" string; every entry needs dtype, shape and data_offsets",
                      path, name);
        return -1;
    }
    if (ast_st_dtype_parse(dt->valuestring, &t->dtype) != 0) {
        ast_error_set(e, "%s: tensor '%s' has unknown dtype '%s'; use one of BOOL U8 I8 I16 U16 F16 BF16 I32 U32 "
                      "F32 F64 I64 U64", path, name, dt->valuestring);
        return -1;
    }
    return 0;
}

static int parse_shape(const char *path, const char *name, const cJSON *item, st_entry *t, ast_error *e)
{
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    int ndim = cJSON_IsArray(shape) ? cJSON_GetArraySize(shape) : -1;
    /* Keeps numel * dtype size far from overflowing uint64 and int64. */
    uint64_t numel = 1, limit = UINT64_MAX / 8 / ast_st_dtype_size(t->dtype);
    const cJSON *d;
    if (ndim < 0 || ndim > AST_ST_MAX_DIMS) goto bad;
    t->ndim = ndim;
    ndim = 0;
    cJSON_ArrayForEach(d, shape)
    {
        uint64_t v;
        if (json_uint(d, &v) != 0 || (v && numel > limit / v)) goto bad;
        numel *= v;
        t->shape[ndim++] = (int64_t)v;
    }
    t->numel = (int64_t)numel;
    return 0;
bad:
    ast_error_set(e, "%s: tensor '%s' has a \"shape\" that is not a list of at most %d non-negative integers "
                  "of sane size; fix the exporter", path, name, AST_ST_MAX_DIMS);
    return -1;
}

static int parse_offsets(const char *path, const char *name, const cJSON *item, uint64_t buffer_size,
                         st_entry *t, ast_error *e)
{
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || json_uint(off->child, &t->begin) != 0 ||
        json_uint(off->child->next, &t->end) != 0 || t->begin > t->end) {
        ast_error_set(e, "%s: tensor '%s' has \"data_offsets\" that are not [begin, end] with 0 <= begin <= end; "
                      "fix the exporter", path, name);
        return -1;
    }
    if (t->end > buffer_size) {
        ast_error_set(e, "%s: tensor '%s' data_offsets [%llu, %llu) lie outside the %llu-byte data buffer; the "
                      "file is truncated or corrupt", path, name, (unsigned long long)t->begin,
                      (unsigned long long)t->end, (unsigned long long)buffer_size);
        return -1;
    }
    uint64_t need = (uint64_t)t->numel * ast_st_dtype_size(t->dtype);
    if (t->end - t->begin != need) {
        char s[160];
        ast_error_set(e, "%s: tensor '%s' has %llu bytes but %s %s needs %llu; the shape or data_offsets are "
                      "wrong", path, name, (unsigned long long)(t->end - t->begin), ast_st_dtype_name(t->dtype),
                      ast_st_shape_str(t->ndim, t->shape, s, sizeof s), (unsigned long long)need);
        return -1;
    }
    return 0;
}

static int parse_entry(ast_st_file *f, const cJSON *item, ast_error *e)
{
    st_entry *t = &f->t[f->n];
    memset(t, 0, sizeof *t);
    if (!cJSON_IsObject(item)) {
        ast_error_set(e, "%s: tensor '%s' is not an object; expected {\"dtype\", \"shape\", \"data_offsets\"}",
                      f->path, item->string);
        return -1;
    }
    if (parse_dtype(f->path, item->string, item, t, e) || parse_shape(f->path, item->string, item, t, e) ||
        parse_offsets(f->path, item->string, item, f->buffer_size, t, e))
        return -1;
    t->name = ast_xstrdup(item->string);
    f->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* A key written twice would read as its first value here and as its last
 * in Python's json (the reference tools): refused, like a tensor written
 * twice. Sorted, so a header of many keys costs n log n. */
static int check_unique_metadata(ast_st_file *f, ast_error *e)
{
    char **keys = ast_xmalloc(((size_t)f->n_meta + 1) * sizeof *keys);
    for (int i = 0; i < f->n_meta; i++) keys[i] = f->meta[2 * i];
    qsort(keys, (size_t)f->n_meta, sizeof *keys, cmp_str);
    int rc = 0;
    for (int i = 1; i < f->n_meta && !rc; i++)
        if (!strcmp(keys[i], keys[i - 1])) {
            ast_error_set(e, "%s: \"__metadata__\" has the key '%s' twice; keep one", f->path, keys[i]);
            rc = -1;
        }
    free(keys);
    return rc;
}

static int parse_metadata(ast_st_file *f, const cJSON *item, ast_error *e)
{
    const cJSON *kv;
    if (f->meta) {
        ast_error_set(e, "%s: \"__metadata__\" appears twice in the header; keep one", f->path);
        return -1;
    }
    if (!cJSON_IsObject(item)) goto bad;
    f->meta = ast_xcalloc(2 * (size_t)cJSON_GetArraySize(item) + 1, sizeof *f->meta);
    cJSON_ArrayForEach(kv, item)
    {
        if (!cJSON_IsString(kv)) goto bad;
        f->meta[2 * f->n_meta] = ast_xstrdup(kv->string);
        f->meta[2 * f->n_meta + 1] = ast_xstrdup(kv->valuestring);
        f->n_meta++;
    }
    return check_unique_metadata(f, e);
bad:
    ast_error_set(e, "%s: \"__metadata__\" must map strings to strings; fix the exporter", f->path);
    return -1;
}

/* ---- whole-header checks -------------------------------------------------- */

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

static const st_entry **sorted_entries(const ast_st_file *f, int (*cmp)(const void *, const void *))
{
    const st_entry **v = ast_xmalloc(((size_t)f->n + 1) * sizeof *v);
    for (int i = 0; i < f->n; i++) v[i] = &f->t[i];
    qsort(v, (size_t)f->n, sizeof *v, cmp);
    return v;
}

static int check_unique(ast_st_file *f, ast_error *e)
{
    f->by_name = sorted_entries(f, cmp_name);
    for (int i = 1; i < f->n; i++)
        if (!strcmp(f->by_name[i]->name, f->by_name[i - 1]->name)) {
            ast_error_set(e, "%s: tensor '%s' appears twice in the header; keep one", f->path, f->by_name[i]->name);
            return -1;
        }
    return 0;
}

/* Every byte of the buffer belongs to exactly one tensor. */
static int check_tiling(const ast_st_file *f, ast_error *e)
{
    const st_entry **order = sorted_entries(f, cmp_offset);
    uint64_t cursor = 0;
    int rc = 0;
    for (int k = 0; k < f->n && !rc; k++) {
        const st_entry *t = order[k];
        if (t->begin < cursor) {
            ast_error_set(e, "%s: tensors '%s' and '%s' overlap at bytes [%llu, %llu); each byte of the data "
                          "buffer must belong to one tensor", f->path, order[k - 1]->name, t->name,
                          (unsigned long long)t->begin, (unsigned long long)cursor);
            rc = -1;
        } else if (t->begin > cursor) {
            ast_error_set(e, "%s: bytes [%llu, %llu) of the data buffer, before tensor '%s', belong to no tensor; "
                          "the file is corrupt", f->path, (unsigned long long)cursor,
                          (unsigned long long)t->begin, t->name);
            rc = -1;
        }
        cursor = t->end;
    }
    free(order);
    if (!rc && cursor != f->buffer_size) {
        ast_error_set(e, "%s: the last %llu bytes of the data buffer belong to no tensor; the file is corrupt",
                      f->path, (unsigned long long)(f->buffer_size - cursor));
        rc = -1;
    }
    return rc;
}

/* ---- the header ----------------------------------------------------------- */

static int parse_json(ast_st_file *f, const char *text, size_t n, ast_error *e)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    while (root && end < text + n && *end == ' ') end++;
    if (!cJSON_IsObject(root) || end != text + n) {
        ast_error_set(e, "%s: the %zu-byte header is not a JSON object (parsing stopped at file byte %ld); the "
                      "file is not safetensors or is corrupt", f->path, n, end ? (long)(end - text) + 8 : 8L);
        cJSON_Delete(root);
        return -1;
    }
    f->t = ast_xcalloc((size_t)cJSON_GetArraySize(root) + 1, sizeof *f->t);
    int rc = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
    {
        rc = !strcmp(item->string, "__metadata__") ? parse_metadata(f, item, e) : parse_entry(f, item, e);
        if (rc) break;
    }
    cJSON_Delete(root);
    return rc;
}

static int parse_header(ast_st_file *f, ast_error *e)
{
    if (f->size < 8) {
        ast_error_set(e, "%s: truncated file (%zu bytes; a safetensors file starts with an 8-byte header "
                      "length); re-export or re-copy it", f->path, f->size);
        return -1;
    }
    uint64_t n = le64(f->bytes);
    if (n > f->size - 8) {
        ast_error_set(e, "%s: header length %llu exceeds the %zu bytes that follow it; the file is truncated "
                      "or not safetensors", f->path, (unsigned long long)n, f->size - 8);
        return -1;
    }
    if (n > MAX_HEADER_BYTES) {
        ast_error_set(e, "%s: header length %llu is over the format's limit of %llu bytes; the file is not "
                      "safetensors", f->path, (unsigned long long)n, MAX_HEADER_BYTES);
        return -1;
    }
    f->buffer = f->bytes + 8 + n;
    f->buffer_size = f->size - 8 - n;
    if (parse_json(f, (const char *)f->bytes + 8, (size_t)n, e)) return -1;
    return check_unique(f, e) || check_tiling(f, e) ? -1 : 0;
}

ast_st_file *ast_st_open(const char *path, ast_error *e)
{
    ast_st_file *f = ast_xcalloc(1, sizeof *f);
    f->path = ast_xstrdup(path);
    f->bytes = read_all(path, &f->size, e);
    if (!f->bytes || parse_header(f, e)) {
        ast_st_close(f);
        return NULL;
    }
    return f;
}

void ast_st_close(ast_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->t[i].name);
    for (int i = 0; i < 2 * f->n_meta; i++) free(f->meta[i]);
    free(f->meta);
    free(f->by_name);
    free(f->t);
    free(f->bytes);
    free(f->path);
    free(f);
}

/* ---- accessors ------------------------------------------------------------ */

static const st_entry *entry(const ast_st_file *f, int i)
{
    AST_ASSERT(i >= 0 && i < f->n, "%s: tensor index %d out of range [0, %d)", f->path, i, f->n);
    return &f->t[i];
}

const char *ast_st_path(const ast_st_file *f) { return f->path; }
int ast_st_count(const ast_st_file *f) { return f->n; }
const char *ast_st_name(const ast_st_file *f, int i) { return entry(f, i)->name; }
ast_st_dtype ast_st_dtype_of(const ast_st_file *f, int i) { return entry(f, i)->dtype; }
int ast_st_ndim(const ast_st_file *f, int i) { return entry(f, i)->ndim; }
const int64_t *ast_st_shape(const ast_st_file *f, int i) { return entry(f, i)->shape; }
int64_t ast_st_numel(const ast_st_file *f, int i) { return entry(f, i)->numel; }
const void *ast_st_data(const ast_st_file *f, int i) { return f->buffer + entry(f, i)->begin; }
size_t ast_st_nbytes(const ast_st_file *f, int i) { return (size_t)(entry(f, i)->end - entry(f, i)->begin); }

int ast_st_find(const ast_st_file *f, const char *name)
{
    int lo = 0, hi = f->n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
        if (!c) return (int)(f->by_name[mid] - f->t);
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

const char *ast_st_metadata(const ast_st_file *f, const char *key)
{
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[2 * i], key)) return f->meta[2 * i + 1];
    return NULL;
}

int ast_st_metadata_count(const ast_st_file *f) { return f->n_meta; }

const char *ast_st_metadata_key(const ast_st_file *f, int i)
{
    AST_ASSERT(i >= 0 && i < f->n_meta, "%s: metadata index %d out of range", f->path, i);
    return f->meta[2 * i];
}

const char *ast_st_metadata_value(const ast_st_file *f, int i)
{
    AST_ASSERT(i >= 0 && i < f->n_meta, "%s: metadata index %d out of range", f->path, i);
    return f->meta[2 * i + 1];
}
