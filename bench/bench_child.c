/* Each measurement runs in its own forked child, so its peak RSS (wait4's
 * ru_maxrss) is not mixed with an earlier, bigger one, and a crash in one
 * configuration is reported instead of ending the whole run. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double bench_cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    if (n < 1) return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bench_threads(void)
{
    const char *s = getenv("OPENBLAS_NUM_THREADS");
    int n = s ? atoi(s) : 0;
    return n > 0 ? n : 2;
}

static int read_all(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

static void write_all(int fd, const void *buf, size_t n)
{
    size_t put = 0;
    while (put < n) {
        ssize_t w = write(fd, (const char *)buf + put, n - put);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        put += (size_t)w;
    }
}

void bench_in_child(bench_child_fn fn, const void *arg, bench_timing *out)
{
    memset(out, 0, sizeof *out);
    fflush(NULL); /* or the child would print the parent's buffered output again */
    int fd[2];
    if (pipe(fd)) {
        snprintf(out->error, sizeof out->error, "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(out->error, sizeof out->error, "fork: %s", strerror(errno));
        close(fd[0]), close(fd[1]);
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        bench_timing t;
        memset(&t, 0, sizeof t);
        fn(arg, &t);
        write_all(fd[1], &t, sizeof t);
        _exit(0);
    }
    close(fd[1]);
    int got = read_all(fd[0], out, sizeof *out);
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) continue;
    if (got < 0) {
        memset(out, 0, sizeof *out);
        snprintf(out->error, sizeof out->error, "the child died (%s %d)",
                 WIFSIGNALED(status) ? "signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    out->peak_rss_kb = ru.ru_maxrss;
}
