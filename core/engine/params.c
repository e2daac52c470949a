/* The parameter store: persistent tensors named as PyTorch's state_dict
 * names them, in registration order, with their gradients; and, apart,
 * the buffers plugins keep untrained but saved (host->buffer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

struct ast_scope {
    ast_params *owner;
    char *prefix; /* "" or "a.b." */
    ast_scope *next_alloc;
};

typedef struct tensor_list {
    ast_tensor **items;
    int n, cap;
} tensor_list;

struct ast_params {
    ast_tensor **items;
    int n, cap;
    tensor_list buffers;
    ast_rng init_rng;
    ast_scope *scopes; /* freed with the store */
    /* After ast_params_to_backend on a device: every parameter's data, then
     * every gradient, in one buffer each of that backend (NULL on the host). */
    const ast_backend *backend;
    float *flat_data, *flat_grad;
};

ast_params *ast_params_new(uint64_t init_seed)
{
    ast_params *p = ast_xcalloc(1, sizeof *p);
    ast_rng_seed(&p->init_rng, init_seed);
    return p;
}

static void tensor_free(ast_tensor *t, int host_memory)
{
    if (host_memory) {
        free(t->data);
        free(t->grad);
    }
    free((char *)t->name);
    free(t);
}

void ast_params_free(ast_params *p)
{
    if (!p) return;
    for (int i = 0; i < p->n; i++) tensor_free(p->items[i], !p->flat_data);
    for (int i = 0; i < p->buffers.n; i++) tensor_free(p->buffers.items[i], 1);
    if (p->flat_data) {
        p->backend->buffer_free(p->backend, p->flat_data);
        p->backend->buffer_free(p->backend, p->flat_grad);
    }
    free(p->buffers.items);
    for (ast_scope *s = p->scopes, *next; s; s = next) {
        next = s->next_alloc;
        free(s->prefix);
        free(s);
    }
    free(p->items);
    free(p);
}

int ast_params_count(const ast_params *p) { return p->n; }
ast_tensor *ast_params_at(const ast_params *p, int i) { return p->items[i]; }

ast_tensor *ast_params_find(const ast_params *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->items[i]->name, name)) return p->items[i];
    return NULL;
}

int64_t ast_params_numel(const ast_params *p)
{
    int64_t n = 0;
    for (int i = 0; i < p->n; i++) n += p->items[i]->size;
    return n;
}

const ast_backend *ast_params_backend(const ast_params *p) { return p->backend ? p->backend : ast_backend_cpu(); }

void ast_params_zero_grad(ast_params *p)
{
    const ast_backend *b = ast_params_backend(p);
    for (int i = 0; i < p->n; i++) b->zero(b, p->items[i]->grad, (size_t)p->items[i]->size * sizeof(float));
}

/* Parameters move once, after the model is built and before the first step:
 * their data and gradients into one buffer each, in registration order.
 * Buffers (host->buffer) stay on the host, where plugins update them. */
void ast_params_to_backend(ast_params *p, const ast_backend *b)
{
    AST_ASSERT(!p->backend, "parameters moved to a backend twice");
    p->backend = b;
    if (b->memory == AST_MEM_HOST) return;
    size_t bytes = (size_t)ast_params_numel(p) * sizeof(float);
    p->flat_data = b->buffer_alloc(b, bytes);
    p->flat_grad = b->buffer_alloc(b, bytes);
    if (!p->flat_data || !p->flat_grad) {
        fprintf(stderr, "alphast: out of %s memory for %zu bytes of parameters and gradients\n", b->name, 2 * bytes);
        exit(70);
    }
    b->zero(b, p->flat_grad, bytes);
    int64_t at = 0;
    for (int i = 0; i < p->n; i++) {
        ast_tensor *t = p->items[i];
        b->to_backend(b, p->flat_data + at, t->data, (size_t)t->size * sizeof(float));
        free(t->data);
        free(t->grad);
        t->data = p->flat_data + at;
        t->grad = p->flat_grad + at;
        t->memory = AST_MEM_DEVICE;
        at += t->size;
    }
}

void ast_params_read(const ast_params *p, const ast_tensor *t, float *host_dst)
{
    const ast_backend *b = ast_params_backend(p);
    b->to_host(b, host_dst, t->data, (size_t)t->size * sizeof(float));
}

void ast_params_write(ast_params *p, ast_tensor *t, const float *host_src)
{
    const ast_backend *b = ast_params_backend(p);
    b->to_backend(b, t->data, host_src, (size_t)t->size * sizeof(float));
}

static ast_scope *scope_make(ast_params *p, char *prefix)
{
    ast_scope *s = ast_xcalloc(1, sizeof *s);
    s->owner = p;
    s->prefix = prefix;
    s->next_alloc = p->scopes;
    p->scopes = s;
    return s;
}

ast_scope *ast_scope_new(ast_params *p, const char *prefix)
{
    size_t n = strlen(prefix);
    char *full = ast_xmalloc(n + 2);
    memcpy(full, prefix, n);
    strcpy(full + n, n ? "." : "");
    return scope_make(p, full);
}

ast_scope *ast_scope_child(ast_scope *parent, const char *name)
{
    size_t a = strlen(parent->prefix), b = strlen(name);
    char *full = ast_xmalloc(a + b + 2);
    memcpy(full, parent->prefix, a);
    memcpy(full + a, name, b);
    strcpy(full + a + b, ".");
    return scope_make(parent->owner, full);
}

static void init_values(ast_rng *r, float *x, int64_t n, ast_init init, float a)
{
    for (int64_t i = 0; i < n; i++) {
        switch (init) {
        case AST_INIT_ZERO: x[i] = 0.0f; break;
        case AST_INIT_ONE: x[i] = 1.0f; break;
        case AST_INIT_UNIFORM: x[i] = a * (2.0f * ast_rng_uniform01(r) - 1.0f); break;
        case AST_INIT_NORMAL: x[i] = a * ast_rng_gauss(r); break;
        }
    }
}

static ast_tensor *persistent_tensor(ast_scope *s, const char *name, int ndim, const int64_t *shape)
{
    size_t a_len = strlen(s->prefix), b_len = strlen(name);
    char *full = ast_xmalloc(a_len + b_len + 1);
    memcpy(full, s->prefix, a_len);
    strcpy(full + a_len, name);
    AST_ASSERT(!ast_params_find(s->owner, full) && !ast_params_find_buffer(s->owner, full), "%s registered twice",
               full);
    AST_ASSERT(ndim >= 1 && ndim <= AST_MAX_DIMS, "%s has %d dims", full, ndim);
    ast_tensor *t = ast_xcalloc(1, sizeof *t);
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->size = ast_shape_size(ndim, shape);
    t->data = ast_xcalloc((size_t)t->size, sizeof(float));
    t->name = full;
    return t;
}

static void list_push(ast_tensor ***items, int *n, int *cap, ast_tensor *t)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        *items = ast_xrealloc(*items, (size_t)*cap * sizeof **items);
    }
    (*items)[(*n)++] = t;
}

ast_tensor *ast_param(ast_scope *s, const char *name, int ndim, const int64_t *shape, ast_init init, float a)
{
    ast_params *p = s->owner;
    ast_tensor *t = persistent_tensor(s, name, ndim, shape);
    t->grad = ast_xcalloc((size_t)t->size, sizeof(float));
    t->flags = AST_PARAM | AST_REQUIRES_GRAD;
    init_values(&p->init_rng, t->data, t->size, init, a);
    list_push(&p->items, &p->n, &p->cap, t);
    return t;
}

ast_tensor *ast_buffer(ast_scope *s, const char *name, int ndim, const int64_t *shape)
{
    ast_tensor *t = persistent_tensor(s, name, ndim, shape);
    t->flags = AST_BUFFER;
    list_push(&s->owner->buffers.items, &s->owner->buffers.n, &s->owner->buffers.cap, t);
    return t;
}

int ast_params_n_buffers(const ast_params *p) { return p->buffers.n; }
ast_tensor *ast_params_buffer_at(const ast_params *p, int i) { return p->buffers.items[i]; }

ast_tensor *ast_params_find_buffer(const ast_params *p, const char *name)
{
    for (int i = 0; i < p->buffers.n; i++)
        if (!strcmp(p->buffers.items[i]->name, name)) return p->buffers.items[i];
    return NULL;
}
