#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "base/progress.h"

double ast_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ast_fmt_duration(double s, char *buf, size_t n)
{
    int t = s < 0 ? 0 : (int)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%d:%02d:%02d", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, n, "%d:%02d", t / 60, t % 60);
}

int ast_term_width(int fd)
{
    const char *env = getenv("COLUMNS");
    char *end = NULL;
    long cols = env ? strtol(env, &end, 10) : 0;
    if (cols > 0 && cols < 100000 && *end == '\0') return (int)cols;
    struct winsize ws;
    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
    return 80;
}

/* Terminal columns of UTF-8 text: one per character (labels and statuses
 * hold no double-width ones). */
static int columns(const char *s)
{
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* Ends s after `cols` characters, never inside one. */
static void cut(char *s, int cols)
{
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80 && cols-- <= 0) {
            *s = '\0';
            return;
        }
}

static void fill_bar(char *bar, int width, int64_t done, int64_t total)
{
    int fill = total > 0 ? (int)(width * done / total) : 0;
    for (int i = 0; i < width; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
    bar[width] = '\0';
}

void ast_progress_format(const ast_progress *p, const char *status, double rate, int width, char *buf, size_t n)
{
    enum { BAR_MAX = 24, BAR_MIN = 6 }; /* a narrower bar tells too little to be worth its room */
    char eta[16], speed[32], tail[320], bar[BAR_MAX + 1];
    const char *st = status && status[0] ? status : NULL;
    int room = width - 1;
    ast_fmt_duration(rate > 0 ? (double)(p->total - p->done) / rate : 0, eta, sizeof eta);
    snprintf(speed, sizeof speed, " %.1f/s", rate);
    for (int with_rate = 1; with_rate >= 0; with_rate--) {
        snprintf(tail, sizeof tail, " %lld/%lld%s%s%s ETA %s", (long long)p->done, (long long)p->total,
                 st ? " " : "", st ? st : "", with_rate ? speed : "", eta);
        int bar_width = room - columns(p->label) - columns(tail) - 3; /* " [" and "]" */
        if (bar_width < BAR_MIN) continue;
        fill_bar(bar, bar_width < BAR_MAX ? bar_width : BAR_MAX, p->done, p->total);
        snprintf(buf, n, "%s [%s]%s", p->label, bar, tail);
        return;
    }
    snprintf(buf, n, "%s%s", p->label, tail);
    cut(buf, room);
}

void ast_progress_start(ast_progress *p, const char *label, int64_t total, int enabled)
{
    memset(p, 0, sizeof *p);
    p->label = label;
    p->total = total;
    p->enabled = enabled;
    p->tty = isatty(STDERR_FILENO);
    p->start = ast_now();
}

void ast_progress_update(ast_progress *p, int64_t done, const char *status)
{
    p->done = done;
    if (!p->enabled || !p->tty) return;
    double now = ast_now();
    if (now - p->last_draw < 0.1 && done < p->total) return;
    p->last_draw = now;
    char line[512];
    ast_progress_format(p, status, done / (now - p->start + 1e-9), ast_term_width(STDERR_FILENO), line, sizeof line);
    fprintf(stderr, "\r\033[K%s", line);
    fflush(stderr);
}

void ast_progress_finish(ast_progress *p, const char *status)
{
    if (!p->enabled) return;
    double el = ast_now() - p->start;
    char t[16];
    ast_fmt_duration(el, t, sizeof t);
    fprintf(stderr, "%s%s %lld/%lld in %s (%.1f/s) %s\n", p->tty ? "\r\033[K" : "", p->label, (long long)p->done,
            (long long)p->total, t, p->done / (el + 1e-9), status ? status : "");
}
