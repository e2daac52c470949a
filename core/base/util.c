/* Fatal errors, checked allocation, user-facing errors and logging. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"

void ast_abort(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "alphast: internal error at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}

static void *check_alloc(void *p, size_t bytes)
{
    if (!p && bytes) {
        fprintf(stderr, "alphast: out of memory allocating %zu bytes\n", bytes);
        exit(70);
    }
    return p;
}

void *ast_xmalloc(size_t bytes) { return check_alloc(malloc(bytes ? bytes : 1), bytes); }
void *ast_xcalloc(size_t n, size_t size) { return check_alloc(calloc(n ? n : 1, size ? size : 1), n * size); }
void *ast_xrealloc(void *p, size_t bytes) { return check_alloc(realloc(p, bytes ? bytes : 1), bytes); }

char *ast_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(ast_xmalloc(n), s, n);
}

void ast_error_set(ast_error *e, const char *fmt, ...)
{
    va_list ap;
    if (!e) return;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
}

static ast_log_level threshold(void)
{
    static int cached = -1;
    if (cached < 0) {
        const char *v = getenv("ALPHAST_LOG");
        cached = AST_LOG_INFO;
        if (v && !strcmp(v, "debug")) cached = AST_LOG_DEBUG;
        if (v && !strcmp(v, "warn")) cached = AST_LOG_WARN;
        if (v && !strcmp(v, "error")) cached = AST_LOG_ERROR;
    }
    return (ast_log_level)cached;
}

void ast_log(ast_log_level level, const char *fmt, ...)
{
    static const char *tag[] = {"debug", "info", "warning", "error"};
    va_list ap;
    if (level < threshold()) return;
    fprintf(stderr, "alphast: %s: ", tag[level]);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

double ast_wall_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ast_name_index(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}
