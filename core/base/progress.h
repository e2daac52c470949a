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

/* The columns of the terminal: $COLUMNS when it is a positive number (the
 * user's override, as for ls), else the window size of fd (TIOCGWINSZ),
 * else 80. */
int ast_term_width(int fd);

/* The bar's line for a terminal `width` columns wide ("epoch 2/10 [===>  ]
 * 12/30 loss 0.53 7.8/s ETA 0:02"), never longer than width - 1 columns:
 * a line that reaches the last column wraps on many terminals, and then
 * every "\r" redraw starts a new line. The bar shrinks first, then the rate
 * goes, then the bar, and what still does not fit is cut. */
void ast_progress_format(const ast_progress *p, const char *status, double rate, int width, char *buf, size_t n);

void ast_progress_start(ast_progress *p, const char *label, int64_t total, int enabled);
/* Advance to `done` units with a short status ("loss 0.53"); redraws at
 * most 10 times a second on a terminal, fitted to its width at each draw
 * (a resized window takes effect at once). */
void ast_progress_update(ast_progress *p, int64_t done, const char *status);
/* Final line: the label, the count, elapsed time and rate, and `status`. */
void ast_progress_finish(ast_progress *p, const char *status);

#endif
