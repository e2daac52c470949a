/* engine/ctx_internal.h: what graph capture (graph.c) and the host table
 * (host.c) take from the step context beyond engine.h. */
#ifndef ALPHAST_CTX_INTERNAL_H
#define ALPHAST_CTX_INTERNAL_H

#include "engine/arena.h"
#include "engine/keys.h"

/* The context's RNG for host->rng_*, each call counted as a loose draw. */
ast_rng *ast_ctx_rng_loose(ast_ctx *c);
int64_t ast_ctx_loose_draws(const ast_ctx *c);
/* Kernel keys drawn so far (ast_ctx_key). */
int64_t ast_ctx_keys_drawn(const ast_ctx *c);
/* The key table (NULL before the first key), which the context gives up:
 * its next key starts a new one. */
ast_key_table *ast_ctx_take_keys(ast_ctx *c);
/* Moves the step arena's buffers into *to; the context goes on with fresh ones. */
void ast_ctx_take_arena(ast_ctx *c, ast_arena *to);

#endif
