/* engine/arena.h: the step arena behind ast_alloc (engine-internal). A
 * bump allocator over a backend's buffers that forgets everything at
 * reset, plus a list of spans given back during the step (the gradients
 * the backward pass is done with), which later requests reuse first. Reuse
 * is first-come in tape order, so a step's addresses still repeat. */
#ifndef ALPHAST_ARENA_H
#define ALPHAST_ARENA_H

#include "engine/backend.h"

typedef struct arena_chunk arena_chunk;

/* Free bytes inside the chunks: [p, p + bytes). */
typedef struct arena_span {
    unsigned char *p;
    size_t bytes;
} arena_span;

typedef struct ast_arena {
    const ast_backend *backend; /* owns the chunks' buffers */
    arena_chunk *top;
    size_t used, peak;          /* bytes carved from the chunks now (spans included), and at most */
    size_t requested;           /* bytes asked for since the last reset (the profile's count) */
    arena_span *spare;          /* given-back spans, by address, neighbours merged */
    size_t n_spare, spare_cap;
} ast_arena;

void ast_arena_init(ast_arena *a, const ast_backend *b);
void ast_arena_free(ast_arena *a);
/* Forget the step; an outgrown arena becomes one chunk big enough for it. */
void ast_arena_reset(ast_arena *a);
/* `bytes`, 64-byte aligned, not zeroed (sanitizer builds fill it with NaN). */
void *ast_arena_take(ast_arena *a, size_t bytes);
/* Hands back [p, p + bytes) from ast_arena_take for the rest of the step.
 * Sanitizer builds poison it, so a read through a stale pointer is caught. */
void ast_arena_give_back(ast_arena *a, void *p, size_t bytes);

/* Moves a's buffers into *to (a captured graph replays into them) and
 * starts a again on a fresh chunk; free *to with ast_arena_free. */
void ast_arena_hand_over(ast_arena *a, ast_arena *to);
#endif
