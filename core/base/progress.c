#include <stdio.h>
#include <string.h>
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
    double rate = done / (now - p->start + 1e-9);
    char eta[16];
    ast_fmt_duration(rate > 0 ? (double)(p->total - done) / rate : 0, eta, sizeof eta);
    enum { WIDTH = 24 };
    char bar[WIDTH + 1];
    int fill = p->total > 0 ? (int)(WIDTH * done / p->total) : 0;
    for (int i = 0; i < WIDTH; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
    bar[WIDTH] = 0;
    fprintf(stderr, "\r\033[K%s [%s] %lld/%lld %s %.1f/s ETA %s", p->label, bar, (long long)done,
            (long long)p->total, status ? status : "", rate, eta);
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
