/* The parameter store: persistent tensors named as PyTorch's state_dict
 * names them, in registration order, with their gradients. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"

struct ast_scope {
    ast_params *owner;
    char *prefix; /* "" or "a.b." */
    ast_scope *next_alloc;
};

struct ast_params {
    ast_tensor **items;
    int n, cap;
    ast_rng init_rng;
    ast_scope *scopes; /* freed with the store */
};

ast_params *ast_params_new(uint64_t init_seed)
{
    ast_params *p = ast_xcalloc(1, sizeof *p);
    ast_rng_seed(&p->init_rng, init_seed);
    return p;
}

void ast_params_free(ast_params *p)
{
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        free(p->items[i]->data);
        free(p->items[i]->grad);
        free((char *)p->items[i]->name);
        free(p->items[i]);
    }
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

static void zero_floats(void *arg, int64_t lo, int64_t hi)
{
    memset((float *)arg + lo, 0, (size_t)(hi - lo) * sizeof(float));
}

void ast_params_zero_grad(ast_params *p)
{
    for (int i = 0; i < p->n; i++) ast_parallel_for(p->items[i]->size, AST_PAR_GRAIN, zero_floats, p->items[i]->grad);
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

ast_tensor *ast_param(ast_scope *s, const char *name, int ndim, const int64_t *shape, ast_init init, float a)
{
    ast_params *p = s->owner;
    size_t a_len = strlen(s->prefix), b_len = strlen(name);
    char *full = ast_xmalloc(a_len + b_len + 1);
    memcpy(full, s->prefix, a_len);
    strcpy(full + a_len, name);
    AST_ASSERT(!ast_params_find(p, full), "parameter %s registered twice", full);
    AST_ASSERT(ndim >= 1 && ndim <= AST_MAX_DIMS, "parameter %s has %d dims", full, ndim);

    ast_tensor *t = ast_xcalloc(1, sizeof *t);
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->size = ast_shape_size(ndim, shape);
    t->data = ast_xcalloc((size_t)t->size, sizeof(float));
    t->grad = ast_xcalloc((size_t)t->size, sizeof(float));
    t->flags = AST_PARAM | AST_REQUIRES_GRAD;
    t->name = full;
    init_values(&p->init_rng, t->data, t->size, init, a);

    if (p->n == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->items = ast_xrealloc(p->items, (size_t)p->cap * sizeof *p->items);
    }
    p->items[p->n++] = t;
    return t;
}
