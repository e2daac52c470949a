/* The step's random keys in backend memory (keys.h). */
#include <stdlib.h>

#include "engine/keys.h"

ast_key_table *ast_keys_new(const ast_backend *b)
{
    ast_key_table *k = ast_xcalloc(1, sizeof *k);
    k->backend = b;
    size_t bytes = AST_KEYS_CAP * sizeof(uint64_t);
    k->host = b->host_alloc(b, bytes);
    k->dev = b->memory == AST_MEM_HOST ? k->host : b->buffer_alloc(b, bytes);
    AST_ASSERT(k->host && k->dev, "out of %s memory for the step's random keys", b->name);
    return k;
}

void ast_keys_free(ast_key_table *k)
{
    if (!k) return;
    if (k->dev != k->host) k->backend->buffer_free(k->backend, k->dev);
    k->backend->host_free(k->backend, k->host);
    free(k);
}

static int64_t slot_of(int64_t n) { return n % AST_KEYS_CAP; }

uint64_t ast_keys_draw(ast_key_table *k, ast_rng *r, const uint64_t **at)
{
    int64_t s = slot_of(k->n++);
    k->host[s] = ast_rng_next(r);
    if (k->dev != k->host) k->backend->to_backend(k->backend, k->dev + s, k->host + s, sizeof *k->host);
    *at = k->dev + s;
    return k->host[s];
}

void ast_keys_redraw(ast_key_table *k, ast_rng *r, int64_t first, int64_t n)
{
    for (int64_t i = first; i < first + n; i++) k->host[slot_of(i)] = ast_rng_next(r);
}
