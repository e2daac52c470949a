/* Writing safetensors files with the golden exports' exact layout, so that
 * a file read and written back is byte-identical. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic_file.h"
#include "io/safetensors.h"

typedef struct st_item {
    char *name;
    ast_st_dtype dtype;
    int ndim;
    int64_t shape[AST_ST_MAX_DIMS];
    const void *data;
    size_t nbytes;
} st_item;

struct ast_st_writer {
    st_item *items;
    int n, cap;
    char **meta; /* key, value, key, value, ... */
    int n_meta, cap_meta;
};

ast_st_writer *ast_st_writer_new(void) { return ast_xcalloc(1, sizeof(ast_st_writer)); }

void ast_st_writer_free(ast_st_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->n; i++) free(w->items[i].name);
    for (int i = 0; i < 2 * w->n_meta; i++) free(w->meta[i]);
    free(w->items);
    free(w->meta);
    free(w);
}

void ast_st_writer_add(ast_st_writer *w, const char *name, ast_st_dtype dtype, int ndim, const int64_t *shape,
                       const void *data)
{
    AST_ASSERT(ndim >= 0 && ndim <= AST_ST_MAX_DIMS, "tensor %s has %d dims", name, ndim);
    for (int i = 0; i < w->n; i++) AST_ASSERT(strcmp(w->items[i].name, name), "tensor %s added twice", name);
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->items = ast_xrealloc(w->items, (size_t)w->cap * sizeof *w->items);
    }
    st_item *t = &w->items[w->n++];
    t->name = ast_xstrdup(name);
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->data = data;
    t->nbytes = (size_t)ast_shape_size(ndim, shape) * ast_st_dtype_size(dtype);
}

void ast_st_writer_metadata(ast_st_writer *w, const char *key, const char *value)
{
    for (int i = 0; i < w->n_meta; i++)
        if (!strcmp(w->meta[2 * i], key)) {
            free(w->meta[2 * i + 1]);
            w->meta[2 * i + 1] = ast_xstrdup(value);
            return;
        }
    if (w->n_meta == w->cap_meta) {
        w->cap_meta = w->cap_meta ? 2 * w->cap_meta : 16;
        w->meta = ast_xrealloc(w->meta, 2 * (size_t)w->cap_meta * sizeof *w->meta);
    }
    w->meta[2 * w->n_meta] = ast_xstrdup(key);
    w->meta[2 * w->n_meta + 1] = ast_xstrdup(value);
    w->n_meta++;
}

static cJSON *int_array(int n, const int64_t *v)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

/* Compact JSON: entries in the order added, "__metadata__" last. */
static char *header_json(const ast_st_writer *w)
{
    cJSON *root = cJSON_CreateObject();
    int64_t offset = 0;
    for (int i = 0; i < w->n; i++) {
        const st_item *t = &w->items[i];
        int64_t span[2] = {offset, offset + (int64_t)t->nbytes};
        cJSON *entry = cJSON_AddObjectToObject(root, t->name);
        cJSON_AddStringToObject(entry, "dtype", ast_st_dtype_name(t->dtype));
        cJSON_AddItemToObject(entry, "shape", int_array(t->ndim, t->shape));
        cJSON_AddItemToObject(entry, "data_offsets", int_array(2, span));
        offset = span[1];
    }
    if (w->n_meta) {
        cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < w->n_meta; i++) cJSON_AddStringToObject(meta, w->meta[2 * i], w->meta[2 * i + 1]);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    AST_ASSERT(text, "out of memory printing a safetensors header");
    return text;
}

typedef struct st_output {
    const ast_st_writer *w;
    const char *json;
} st_output;

/* Length, header padded with spaces to a multiple of 8 (so the buffer
 * starts aligned), then each tensor's bytes. */
static int write_file(FILE *out, void *ud)
{
    const st_output *o = ud;
    size_t len = strlen(o->json), padded = (len + 7) / 8 * 8;
    unsigned char n8[8];
    for (int i = 0; i < 8; i++) n8[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    if (fwrite(n8, 1, 8, out) != 8 || fwrite(o->json, 1, len, out) != len) return -1;
    for (size_t i = len; i < padded; i++)
        if (fputc(' ', out) == EOF) return -1;
    for (int i = 0; i < o->w->n; i++) {
        const st_item *t = &o->w->items[i];
        if (t->nbytes && fwrite(t->data, 1, t->nbytes, out) != t->nbytes) return -1;
    }
    return 0;
}

int ast_st_writer_write(const ast_st_writer *w, const char *path, ast_error *e)
{
    st_output o = {w, header_json(w)};
    int rc = ast_atomic_write(path, write_file, &o, e);
    cJSON_free((void *)o.json);
    return rc;
}
