/* A step captured once and replayed (graph.h). */
#include <stdio.h>
#include <stdlib.h>

#include "engine/ctx_internal.h"
#include "engine/graph.h"

struct ast_graph {
    ast_ctx *ctx;
    const ast_backend *backend;
    void *exec;             /* the backend's graph */
    ast_arena arena;        /* the buffers the step was captured into */
    ast_key_table *keys;    /* and its keys' slots */
    int64_t first_key, n_keys;
};

/* What the capture under way started from, per thread (one capture at a
 * time per thread: the backend's stream is the thread's). */
static _Thread_local struct {
    int64_t keys, loose;
    ast_rng rng;
} started;

int64_t ast_graph_traffic(const ast_ctx *c)
{
    const ast_backend *b = ast_ctx_backend(c);
    return b->host_traffic(b) + ast_ctx_loose_draws(c);
}

int ast_graph_begin(ast_ctx *c, char *why, size_t n)
{
    const ast_backend *b = ast_ctx_backend(c);
    if (b->capture_begin(b, why, n) < 0) return -1;
    started.keys = ast_ctx_keys_drawn(c), started.loose = ast_ctx_loose_draws(c), started.rng = *ast_ctx_rng(c);
    return 0;
}

ast_graph *ast_graph_end(ast_ctx *c, char *why, size_t n)
{
    const ast_backend *b = ast_ctx_backend(c);
    void *exec = b->capture_end(b, why, n);
    *ast_ctx_rng(c) = started.rng; /* nothing ran: the first replay draws the capture's keys */
    if (exec && ast_ctx_loose_draws(c) != started.loose) {
        snprintf(why, n, "the step draws random numbers on the host (host->rng_*), which a replay would repeat; "
                         "a kernel's randomness needs its key from host->rng_key");
        b->graph_free(b, exec);
        exec = NULL;
    }
    if (!exec) return NULL;
    ast_graph *g = ast_xcalloc(1, sizeof *g);
    *g = (ast_graph){.ctx = c, .backend = b, .exec = exec, .first_key = started.keys,
                     .n_keys = ast_ctx_keys_drawn(c) - started.keys};
    g->keys = ast_ctx_take_keys(c);
    ast_ctx_take_arena(c, &g->arena);
    return g;
}

void ast_graph_replay(ast_graph *g)
{
    if (g->n_keys) ast_keys_redraw(g->keys, ast_ctx_rng(g->ctx), g->first_key, g->n_keys);
    g->backend->graph_launch(g->backend, g->exec);
}

void ast_graph_free(ast_graph *g)
{
    if (!g) return;
    g->backend->synchronize(g->backend);
    g->backend->graph_free(g->backend, g->exec);
    ast_keys_free(g->keys);
    ast_arena_free(&g->arena);
    free(g);
}
