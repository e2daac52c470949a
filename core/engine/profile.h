/* Per-op step time and arena bytes for ALPHAST_PROFILE=1 (profile.c).
 * `requested` is the arena's running count of the bytes asked of it this
 * step (ast_arena.requested, engine/arena.h). */
#ifndef ALPHAST_PROFILE_H
#define ALPHAST_PROFILE_H

#include <stdio.h>

#include "engine/engine.h"

typedef struct ast_profile ast_profile;

/* A profile when ALPHAST_PROFILE is set (and not 0), else NULL. */
ast_profile *ast_profile_from_env(void);
/* A step starts (the context was reset). */
void ast_profile_step(ast_profile *p, size_t requested);
/* A backward pass ended: restart the forward clock and byte count. */
void ast_profile_mark(ast_profile *p, size_t requested);
/* An op recorded itself: its forward took the time and bytes since the last mark. */
void ast_profile_forward(ast_profile *p, const char *op, size_t requested);
/* An op ran outside the tape (grad off): its time and bytes since the last mark. */
void ast_profile_inference(ast_profile *p, const char *op, size_t requested);
void ast_profile_backward(ast_profile *p, const char *op, double seconds, size_t bytes);
double ast_profile_now(void);
void ast_profile_print(ast_profile *p, FILE *out, size_t arena_peak);

#endif
