/* Per-op step timing for ALPHAST_PROFILE=1 (core/profile.c). */
#ifndef ALPHAST_PROFILE_H
#define ALPHAST_PROFILE_H

#include <stdio.h>

#include "engine/engine.h"

typedef struct ast_profile ast_profile;

/* A profile when ALPHAST_PROFILE is set (and not 0), else NULL. */
ast_profile *ast_profile_from_env(void);
/* A step starts (the context was reset). */
void ast_profile_step(ast_profile *p);
/* Restart the forward clock, e.g. when the backward pass begins. */
void ast_profile_mark(ast_profile *p);
/* An op recorded itself: its forward took the time since the last mark. */
void ast_profile_forward(ast_profile *p, const char *op);
void ast_profile_backward(ast_profile *p, const char *op, double seconds);
double ast_profile_now(void);
void ast_profile_print(ast_profile *p, FILE *out);

#endif
