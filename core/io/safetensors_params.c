/* Saving and loading a parameter store as safetensors, by state_dict name:
 * the parameters and the buffers plugins keep (host->buffer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

/* What a weights file holds: the parameters, then the buffers. */
static int n_saved(const ast_params *p) { return ast_params_count(p) + ast_params_n_buffers(p); }

static ast_tensor *saved_at(const ast_params *p, int i)
{
    int n = ast_params_count(p);
    return i < n ? ast_params_at(p, i) : ast_params_buffer_at(p, i - n);
}

/* Tensor i of the saved ones into host memory, or from it: a parameter
 * through its backend (device memory after ast_params_to_backend), a
 * buffer as it is (buffers stay on the host). */
static void saved_to_host(const ast_params *p, int i, float *dst)
{
    const ast_tensor *t = saved_at(p, i);
    if (i < ast_params_count(p)) ast_params_read(p, t, dst);
    else memcpy(dst, t->data, (size_t)t->size * sizeof *dst);
}

static void saved_from_host(ast_params *p, int i, const float *src)
{
    ast_tensor *t = saved_at(p, i);
    if (i < ast_params_count(p)) ast_params_write(p, t, src);
    else memcpy(t->data, src, (size_t)t->size * sizeof *src);
}

static int64_t saved_numel(const ast_params *p)
{
    int64_t total = 0;
    for (int i = 0; i < n_saved(p); i++) total += saved_at(p, i)->size;
    return total;
}

float *ast_params_host_copy(const ast_params *p)
{
    float *host = ast_xmalloc((size_t)(saved_numel(p) + 1) * sizeof *host), *at = host;
    for (int i = 0; i < n_saved(p); i++) {
        saved_to_host(p, i, at);
        at += saved_at(p, i)->size;
    }
    return host;
}

int ast_params_save(const ast_params *p, const char *path, const char *const *metadata, ast_error *e)
{
    ast_st_writer *w = ast_st_writer_new();
    float *host = ast_params_host_copy(p), *at = host;
    for (int i = 0; i < n_saved(p); i++) {
        const ast_tensor *t = saved_at(p, i);
        ast_st_writer_add(w, t->name, AST_ST_F32, t->ndim, t->shape, at);
        at += t->size;
    }
    for (const char *const *kv = metadata; kv && kv[0]; kv += 2) {
        AST_ASSERT(kv[1], "metadata key %s has no value", kv[0]);
        ast_st_writer_metadata(w, kv[0], kv[1]);
    }
    int rc = ast_st_writer_write(w, path, e);
    ast_st_writer_free(w);
    free(host);
    return rc;
}

/* The first few names of a list, for a one-line message. */
#define LIST_SHOWN 3

typedef struct name_list {
    const char *first[LIST_SHOWN];
    int n;
} name_list;

static void note(name_list *l, const char *name)
{
    if (l->n < LIST_SHOWN) l->first[l->n] = name;
    l->n++;
}

static const char *list_str(const name_list *l, char *buf, size_t cap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < l->n && i < LIST_SHOWN && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s'%s'", i ? ", " : "", l->first[i]);
    if (l->n > LIST_SHOWN && used < cap) snprintf(buf + used, cap - used, " and %d more", l->n - LIST_SHOWN);
    return buf;
}

/* Where the model's tensor `name` is in f: under that name, or under the
 * prefix a PyTorch Lightning checkpoint's state_dict gives the model's
 * parameters. NULL if under neither. */
static const char *stored_name(const ast_st_file *f, const char *name, char *buf, size_t n)
{
    if (ast_st_find(f, name) >= 0) return name;
    snprintf(buf, n, "%s%s", AST_LIGHTNING_PREFIX, name);
    return ast_st_find(f, buf) >= 0 ? buf : NULL;
}

static int in_model(const ast_params *p, const char *name)
{
    return ast_params_find(p, name) || ast_params_find_buffer(p, name);
}

/* 1 if the file's tensor `name` is one of the model's, under either name. */
static int known(const ast_params *p, const char *name)
{
    size_t k = strlen(AST_LIGHTNING_PREFIX);
    return in_model(p, name) || (!strncmp(name, AST_LIGHTNING_PREFIX, k) && in_model(p, name + k));
}

static int check_names(const ast_params *p, const ast_st_file *f, int flags, int n_required, ast_error *e)
{
    name_list missing = {{0}, 0}, extra = {{0}, 0}, buffers = {{0}, 0};
    char buf[1024];
    for (int i = 0; i < n_required; i++)
        if (!stored_name(f, ast_params_at(p, i)->name, buf, sizeof buf)) note(&missing, ast_params_at(p, i)->name);
    for (int i = 0; (flags & AST_LOAD_STRICT) && i < ast_st_count(f); i++)
        if (!known(p, ast_st_name(f, i))) note(&extra, ast_st_name(f, i));
    for (int i = 0; (flags & AST_LOAD_BUFFERS) && i < ast_params_n_buffers(p); i++)
        if (!stored_name(f, ast_params_buffer_at(p, i)->name, buf, sizeof buf))
            note(&buffers, ast_params_buffer_at(p, i)->name);
    char a[400], b[400];
    if (missing.n && extra.n)
        ast_error_set(e, "%s: %d model parameters missing (%s) and %d tensors not in the model (%s); the file "
                      "was saved from another model configuration", ast_st_path(f), missing.n,
                      list_str(&missing, a, sizeof a), extra.n, list_str(&extra, b, sizeof b));
    else if (missing.n)
        ast_error_set(e, "%s: %d model parameters missing (%s); the file was saved from another model "
                      "configuration", ast_st_path(f), missing.n, list_str(&missing, a, sizeof a));
    else if (extra.n)
        ast_error_set(e, "%s: %d tensors not in the model (%s); check the model configuration or load "
                      "non-strictly", ast_st_path(f), extra.n, list_str(&extra, b, sizeof b));
    else if (buffers.n)
        ast_error_set(e, "%s: %d model buffers missing (%s); resuming needs the state plugins keep between steps "
                      "(e.g. the MoE's balance: bias), and this file was saved without it by an older alphast or "
                      "from another model configuration", ast_st_path(f), buffers.n,
                      list_str(&buffers, a, sizeof a));
    return missing.n || extra.n || buffers.n ? -1 : 0;
}

/* Values are staged and copied only once every tensor has been read and
 * checked, so a failed load leaves the model as it was. Buffers the file
 * lacks (allowed without AST_LOAD_BUFFERS) go back to zero; parameters
 * from n_required on that it lacks keep their values. */
int ast_params_load_from(ast_params *p, const ast_st_file *f, int flags, int n_required, ast_error *e)
{
    AST_ASSERT(n_required >= 0 && n_required <= ast_params_count(p), "n_required %d of %d parameters", n_required,
               ast_params_count(p));
    float *staged = ast_xmalloc((size_t)(saved_numel(p) + 1) * sizeof *staged);
    int rc = check_names(p, f, flags, n_required, e);
    int64_t at = 0;
    char buf[1024];
    for (int i = 0; !rc && i < n_saved(p); i++) {
        const ast_tensor *t = saved_at(p, i);
        const char *name = stored_name(f, t->name, buf, sizeof buf);
        if (name)
            rc = ast_st_read_f32(f, name, t->ndim, t->shape, staged + at, e);
        else if (i < ast_params_count(p))
            saved_to_host(p, i, staged + at);
        else
            memset(staged + at, 0, (size_t)t->size * sizeof *staged);
        at += t->size;
    }
    at = 0;
    for (int i = 0; !rc && i < n_saved(p); i++) {
        saved_from_host(p, i, staged + at);
        at += saved_at(p, i)->size;
    }
    free(staged);
    return rc;
}

int ast_params_load(ast_params *p, const char *path, int flags, ast_error *e)
{
    ast_st_file *f = ast_st_open(path, e);
    if (!f) return -1;
    int rc = ast_params_load_from(p, f, flags, ast_params_count(p), e);
    ast_st_close(f);
    return rc;
}
