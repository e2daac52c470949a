/* The progress bar on narrow terminals: its line is never longer than the
 * terminal's width minus one (a full line wraps, and every "\r" redraw then
 * starts a new one), whatever the width; and the width comes from
 * $COLUMNS, else the terminal's window size, else 80. */
#define _XOPEN_SOURCE 700 /* posix_openpt */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/progress.h"

/* A bar as the trainer draws it, 12 of 30 steps done. */
static ast_progress epoch_bar(void)
{
    ast_progress p;
    ast_progress_start(&p, "epoch 10/10", 30, 1);
    p.done = 12;
    return p;
}

static const char *status = "loss 0.5321";

Test(progress, a_wide_terminal_gets_everything)
{
    ast_progress p = epoch_bar();
    char line[512];
    ast_progress_format(&p, status, 7.84, 200, line, sizeof line);
    cr_assert_str_eq(line, "epoch 10/10 [=========>              ] 12/30 loss 0.5321 7.8/s ETA 0:02");
}

Test(progress, never_longer_than_the_width_minus_one)
{
    ast_progress p = epoch_bar();
    char line[512];
    for (int width = 0; width <= 120; width++) {
        ast_progress_format(&p, status, 7.84, width, line, sizeof line);
        int limit = width > 0 ? width - 1 : 0;
        cr_assert_leq((int)strlen(line), limit, "%d columns: '%s'", width, line);
    }
}

Test(progress, at_50_columns_the_bar_shrinks_and_the_rate_goes)
{
    ast_progress p = epoch_bar();
    char line[512];
    ast_progress_format(&p, status, 7.84, 50, line, sizeof line);
    cr_assert_str_eq(line, "epoch 10/10 [===>    ] 12/30 loss 0.5321 ETA 0:02");
    cr_assert_eq(strlen(line), 49);
    /* too narrow for a useful bar: the count and status first, cut at the edge */
    ast_progress_format(&p, status, 7.84, 30, line, sizeof line);
    cr_assert_str_eq(line, "epoch 10/10 12/30 loss 0.5321");
}

Test(progress, a_cut_never_splits_a_character)
{
    ast_progress p = epoch_bar();
    char line[512];
    /* "é" is 2 bytes and one column: 24 columns are 25 bytes here */
    p.label = "époque 10/10";
    ast_progress_format(&p, status, 7.84, 25, line, sizeof line);
    cr_assert_str_eq(line, "époque 10/10 12/30 loss ");
    p.label = "epoch 10/10";
    ast_progress_format(&p, "loss ≈ 0.5", 7.84, 25, line, sizeof line); /* the cut falls inside "≈" by bytes */
    cr_assert_str_eq(line, "epoch 10/10 12/30 loss ≈");
}

Test(progress, the_width_from_columns_else_the_terminal_else_80)
{
    int pipe_fd[2];
    cr_assert(pipe(pipe_fd) == 0);
    setenv("COLUMNS", "57", 1);
    cr_assert_eq(ast_term_width(pipe_fd[0]), 57);
    setenv("COLUMNS", "wide", 1); /* not a number: ignored */
    cr_assert_eq(ast_term_width(pipe_fd[0]), 80);
    unsetenv("COLUMNS");
    cr_assert_eq(ast_term_width(pipe_fd[0]), 80, "a pipe has no window size");

    int master = posix_openpt(O_RDWR | O_NOCTTY);
    cr_assert(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0);
    int tty = open(ptsname(master), O_RDWR | O_NOCTTY);
    cr_assert(tty >= 0);
    struct winsize ws = {.ws_row = 24, .ws_col = 43};
    cr_assert(ioctl(tty, TIOCSWINSZ, &ws) == 0);
    cr_assert_eq(ast_term_width(tty), 43, "TIOCGWINSZ");
    setenv("COLUMNS", "61", 1);
    cr_assert_eq(ast_term_width(tty), 61, "$COLUMNS overrides the window size");
    close(tty), close(master), close(pipe_fd[0]), close(pipe_fd[1]);
}

/* What the terminal shows between redraws: each "\r\033[K" starts one. */
static void check_redraws(const char *out, int width)
{
    int draws = 0;
    for (const char *p = strstr(out, "\r\033[K"); p; p = strstr(p, "\r\033[K")) {
        p += 4;
        size_t len = strcspn(p, "\r\n");
        cr_assert_leq((int)len, width - 1, "a redraw of %zu columns at %d: '%.*s'", len, width, (int)len, p);
        draws++;
    }
    cr_assert_geq(draws, 2);
}

/* The bar drawn on a real terminal of 50 columns: stderr is a pty's end. */
Test(progress, no_wrapped_redraws_on_a_50_column_terminal)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    cr_assert(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0);
    int tty = open(ptsname(master), O_RDWR | O_NOCTTY);
    struct winsize ws = {.ws_row = 24, .ws_col = 50};
    cr_assert(tty >= 0 && ioctl(tty, TIOCSWINSZ, &ws) == 0);
    unsetenv("COLUMNS");
    cr_assert(dup2(tty, STDERR_FILENO) == STDERR_FILENO);
    ast_progress p;
    ast_progress_start(&p, "epoch 10/10", 30, 1);
    ast_progress_update(&p, 1, "loss 0.5321");
    ast_progress_update(&p, 30, "loss 0.4210"); /* the last step always draws */
    char out[4096];
    size_t used = 0;
    ssize_t got;
    fcntl(master, F_SETFL, O_NONBLOCK); /* everything is written: read until it runs dry */
    while (used < sizeof out - 1 && (got = read(master, out + used, sizeof out - 1 - used)) > 0) used += (size_t)got;
    out[used] = '\0';
    check_redraws(out, 50);
}
