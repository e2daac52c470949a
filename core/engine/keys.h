/* engine/keys.h: the step's random keys in backend memory (engine-internal).
 * A kernel that draws random numbers (dropout's mask, the attention's)
 * reads its key from here rather than from its arguments, so a captured
 * step replays with new keys: the replay draws them again from the same
 * RNG, in the same order, into the same slots, and the graph's first
 * copies bring them to the device. */
#ifndef ALPHAST_KEYS_H
#define ALPHAST_KEYS_H

#include "engine/backend.h"

/* A ring of slots: pinned host memory and its twin on the backend (the
 * same memory on the CPU). A slot is used again only after KEYS_CAP later
 * draws, long after the copy that read it has run. */
#define AST_KEYS_CAP 4096

typedef struct ast_key_table {
    const ast_backend *backend;
    uint64_t *host, *dev;
    int64_t n; /* draws so far; the next goes to slot n % AST_KEYS_CAP */
} ast_key_table;

ast_key_table *ast_keys_new(const ast_backend *b);
void ast_keys_free(ast_key_table *k);
/* Draws the next key from r into the next slot and queues its copy to the
 * backend; returns the key, *at its backend-memory slot. */
uint64_t ast_keys_draw(ast_key_table *k, ast_rng *r, const uint64_t **at);
/* Draws again into slots [first, first + n) in order: what the replay of a
 * step that drew them reads. */
void ast_keys_redraw(ast_key_table *k, ast_rng *r, int64_t first, int64_t n);

#endif
