/* alphast/progress.h: a progress bar with rate and ETA on a terminal, plain
 * lines when stderr is not one (logs, CI). */
#ifndef ALPHAST_PROGRESS_H
#define ALPHAST_PROGRESS_H

#include <stddef.h>
#include <stdint.h>

typedef struct ast_progress {
    const char *label;
    int64_t total, done;
    double start, last_draw;
    int tty, enabled;
} ast_progress;

double ast_now(void); /* monotonic seconds */
/* "m:ss", or "h:mm:ss" from an hour on. */
void ast_fmt_duration(double seconds, char *buf, size_t n);

void ast_progress_start(ast_progress *p, const char *label, int64_t total, int enabled);
/* Advance to `done` units with a short status ("loss 0.53"); redraws at
 * most 10 times a second on a terminal. */
void ast_progress_update(ast_progress *p, int64_t done, const char *status);
/* Final line: the label, the count, elapsed time and rate, and `status`. */
void ast_progress_finish(ast_progress *p, const char *status);

#endif
