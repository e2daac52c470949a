/* Naming the plugin that crashed or called exit(). The handler only uses
 * async-signal-safe calls (write, sigaction): it formats nothing with
 * stdio. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crash.h"

static volatile sig_atomic_t installed;
static ast_crash_scope now = {NULL, NULL, NULL, -1};
static const int signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define N_SIGNALS ((int)(sizeof signals / sizeof signals[0]))
static struct sigaction before[N_SIGNALS];

static void put(const char *s)
{
    if (s && write(STDERR_FILENO, s, strlen(s)) < 0) return;
}

static void put_int(int v)
{
    char buf[16], *p = buf + sizeof buf;
    *--p = '\0';
    do *--p = (char)('0' + v % 10), v /= 10;
    while (v && p > buf);
    put(p);
}

static void put_scope(void)
{
    put(now.action), put(" '"), put(now.subject), put("'");
    if (now.path) put(" ("), put(now.path), put(")");
    if (now.layer >= 0) put(", layer "), put_int(now.layer);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV: return "a segmentation fault (SIGSEGV)";
    case SIGBUS: return "a bus error (SIGBUS)";
    case SIGFPE: return "an arithmetic fault (SIGFPE)";
    case SIGILL: return "an illegal instruction (SIGILL)";
    default: return "an abort (SIGABRT)";
    }
}

/* Prints, restores the handler that was there before and returns: a fault
 * happens again on the same instruction and abort() raises again, now
 * reaching that handler. */
static void on_signal(int sig)
{
    int i = 0;
    while (i < N_SIGNALS - 1 && signals[i] != sig) i++;
    if (now.subject) {
        put("alphast: "), put(signal_name(sig)), put(" in "), put_scope();
        put(": the crash is inside that code; run without it, or report it to its author\n");
    }
    sigaction(sig, &before[i], NULL);
    if (sig == SIGABRT) raise(sig);
}

static void at_exit(void)
{
    if (!now.subject) return;
    put("alphast: exit() was called in "), put_scope();
    put(": that code ended the process; what was written last (checkpoints, metrics) is intact\n");
}

void ast_crash_install(void)
{
    if (installed) return;
    installed = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < N_SIGNALS; i++) sigaction(signals[i], &sa, &before[i]);
    atexit(at_exit);
}

void ast_crash_enter(ast_crash_scope *saved, const char *action, const char *subject, const char *path, int layer)
{
    *saved = now;
    now = (ast_crash_scope){action, subject, path, layer};
}

void ast_crash_leave(const ast_crash_scope *saved) { now = *saved; }
