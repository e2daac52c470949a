/* ast_data_read_h5ad: the .h5ad parse (data_h5ad.c) runs in a forked child
 * process that sends the dataset back through a pipe, under a time limit.
 * Why: libhdf5 1.10 itself can loop forever or crash on a damaged file
 * (issue 11); a child can be killed when the limit passes, and its crash
 * is reported as an error instead of taking alphast down. The bundled
 * datasets parse in milliseconds, so the fork costs next to nothing.
 *
 * ALPHAST_H5AD_TIMEOUT (seconds, default 60) sets the limit; 0 parses in
 * the calling process with no limit (for debuggers and fuzzers). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "data/data_pack.h"

/* ASan reserves terabytes of address space for its shadow memory, so a
 * cap on it would stop every sanitized reader; those builds go without. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#define DEFAULT_TIMEOUT_S 60.0
#define WIRE_MAGIC 0x64613569u /* "h5ad", 2: the dataset as parts (data_pack.h) */
/* More parts than any dataset has (a few per obs column): a garbled stream. */
#define MAX_PARTS (1 << 24)

/* What the child sends first: then, if ok, the parts (each a part_head
 * and its bytes) up to one with an empty name; else the error message. */
typedef struct wire_head {
    uint32_t magic;
    int32_t ok;
    uint32_t msg_len; /* the error message, when !ok */
} wire_head;

typedef struct part_head {
    char name[AST_PART_NAME];
    int32_t dtype;
    int64_t n;
} part_head;

enum { RECV_OK = 0, RECV_ERROR = -1, RECV_TIMEOUT = -2, RECV_EOF = -3 };

/* ---- the child ------------------------------------------------------------- */

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static void send_dataset(int fd, const ast_dataset *d)
{
    wire_head hd = {WIRE_MAGIC, 1, 0};
    ast_parts p = {0};
    ast_data_pack(d, &p);
    int ok = write_all(fd, &hd, sizeof hd) == 0;
    for (int i = 0; ok && i <= p.n; i++) {
        part_head ph = {{0}, 0, 0};
        if (i < p.n) {
            snprintf(ph.name, sizeof ph.name, "%s", p.v[i].name); /* the rest stays zero */
            ph.dtype = (int32_t)p.v[i].dtype, ph.n = p.v[i].n;
        }
        ok = write_all(fd, &ph, sizeof ph) == 0 &&
             (i == p.n || write_all(fd, p.v[i].data, (size_t)ph.n * ast_st_dtype_size(p.v[i].dtype)) == 0);
    }
    ast_parts_free(&p);
}

static void default_unless_ignored(int sig)
{
    struct sigaction old;
    if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN) signal(sig, SIG_DFL);
}

/* A damaged vlen length makes libhdf5 ask for gigabytes or terabytes and
 * then touch them; with the reader's address space capped at what it
 * uses now plus the machine's memory (ALPHAST_H5AD_MEMORY_MB to choose
 * another budget), that allocation fails at once and the read ends with
 * an error, instead of the machine swapping until the time limit. */
static void cap_address_space(void)
{
#ifndef UNDER_ASAN
    long page = sysconf(_SC_PAGESIZE), phys = sysconf(_SC_PHYS_PAGES);
    unsigned long long used_pages = 0, budget = (unsigned long long)phys * (unsigned long long)page;
    const char *v = getenv("ALPHAST_H5AD_MEMORY_MB");
    if (v && *v) budget = strtoull(v, NULL, 10) << 20;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return;
    int got = fscanf(f, "%llu", &used_pages);
    fclose(f);
    if (got != 1 || page <= 0 || budget == 0) return;
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) < 0) return;
    rlim_t cap = (rlim_t)(used_pages * (unsigned long long)page + budget);
    if (r.rlim_max != RLIM_INFINITY && cap > r.rlim_max) cap = r.rlim_max;
    r.rlim_cur = cap;
    setrlimit(RLIMIT_AS, &r);
#endif
}

/* Never returns. _exit, not exit: the parent's atexit handlers and its
 * buffered stdio output are the parent's, not to be run or printed twice. */
AST_NORETURN static void child_main(int fd, pid_t parent, const char *path, const ast_data_opts *o)
{
#ifdef __linux__
    /* An orphaned reader stuck in libhdf5 would spin on; let it die with alphast. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent) _exit(1);
    /* Ctrl-C and kill reach the whole process group: end the reader at
     * once rather than run a handler installed for the parent (a signal
     * the parent ignores stays ignored). */
    default_unless_ignored(SIGINT);
    default_unless_ignored(SIGTERM);
    cap_address_space();
    ast_dataset d;
    ast_error e = {""};
    if (ast_data_read_h5ad_direct(path, o, &d, &e) == 0) {
        send_dataset(fd, &d);
    } else {
        wire_head hd = {WIRE_MAGIC, 0, (uint32_t)strlen(e.msg)};
        if (write_all(fd, &hd, sizeof hd) == 0) write_all(fd, e.msg, hd.msg_len);
    }
    _exit(0);
}

/* ---- the parent ------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Reads exactly n bytes before the deadline. */
static int read_full(int fd, void *buf, size_t n, double deadline)
{
    char *p = buf;
    while (n) {
        double left = deadline - now_s();
        if (left <= 0) return RECV_TIMEOUT;
        struct pollfd pfd = {fd, POLLIN, 0};
        int r = poll(&pfd, 1, left > INT_MAX / 1000 ? INT_MAX : (int)(left * 1000) + 1);
        if (r < 0 && errno != EINTR) return RECV_ERROR;
        if (r <= 0) continue;
        ssize_t got = read(fd, p, n);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return got == 0 ? RECV_EOF : RECV_ERROR;
        p += got, n -= (size_t)got;
    }
    return RECV_OK;
}

/* One part as the child sent it; 0 at the end (a part with no name). */
static int receive_part(int fd, ast_parts *p, double deadline)
{
    part_head ph;
    int rc = read_full(fd, &ph, sizeof ph, deadline);
    if (rc != RECV_OK) return rc;
    if (!ph.name[0]) return 0;
    size_t size = ph.dtype >= AST_ST_BOOL && ph.dtype <= AST_ST_U64 ? ast_st_dtype_size((ast_st_dtype)ph.dtype) : 0;
    if (!size || ph.n < 0 || (uint64_t)ph.n > SIZE_MAX / 2 / size || ph.name[AST_PART_NAME - 1] || p->n >= MAX_PARTS)
        return RECV_ERROR;
    void *data = malloc(ph.n ? (size_t)ph.n * size : 1);
    if (!data) return RECV_ERROR;
    ast_parts_add(p, ph.name, (ast_st_dtype)ph.dtype, ph.n, data, 1);
    rc = read_full(fd, data, (size_t)ph.n * size, deadline);
    return rc == RECV_OK ? 1 : rc;
}

/* The parts up to the end marker, then the dataset they make. */
static int receive_dataset(int fd, ast_dataset *d, const char *path, double deadline)
{
    ast_parts p = {0};
    int rc;
    while ((rc = receive_part(fd, &p, deadline)) == 1) continue;
    ast_error why;
    if (rc == 0) rc = ast_data_unpack(&p, path, d, &why) == 0 ? RECV_OK : RECV_ERROR;
    ast_parts_free(&p);
    return rc;
}

/* The child's answer: a dataset, or its error message in e. */
static int receive(int fd, const char *path, ast_dataset *d, ast_error *e, double deadline)
{
    wire_head hd;
    int rc = read_full(fd, &hd, sizeof hd, deadline);
    if (rc != RECV_OK) return rc;
    if (hd.magic != WIRE_MAGIC) return RECV_ERROR;
    if (!hd.ok) {
        size_t n = hd.msg_len < sizeof e->msg ? hd.msg_len : sizeof e->msg - 1;
        rc = read_full(fd, e->msg, n, deadline);
        e->msg[rc == RECV_OK ? n : 0] = 0;
        return rc == RECV_OK ? RECV_ERROR : rc;
    }
    return receive_dataset(fd, d, path, deadline);
}

/* ALPHAST_H5AD_TIMEOUT as seconds (default 60, 0 = no limit). */
static int read_timeout(double *s, ast_error *e)
{
    const char *v = getenv("ALPHAST_H5AD_TIMEOUT");
    char *end = NULL;
    *s = DEFAULT_TIMEOUT_S;
    if (!v || !*v) return 0;
    *s = strtod(v, &end);
    if (*end || !(*s >= 0 && *s <= 1e9)) {
        ast_error_set(e, "ALPHAST_H5AD_TIMEOUT='%s': expected seconds (a number >= 0; 0 = no limit)", v);
        return -1;
    }
    return 0;
}

/* Reaps the child and says why it ended without an answer: a signal
 * (libhdf5 crashed) or an exit status (e.g. a sanitizer's report). */
static void explain_end(pid_t pid, const char *path, ast_error *e)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) continue;
    int sig = WIFSIGNALED(st) ? WTERMSIG(st) : 0;
    if (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGABRT || sig == SIGTRAP)
        ast_error_set(e, "%s: reading stopped: libhdf5 crashed on this file (signal %d, %s) (damaged?)", path, sig,
                      strsignal(sig));
    else if (sig == SIGKILL)
        ast_error_set(e, "%s: reading stopped: the reader process was killed (signal 9; out of memory?)", path);
    else if (sig)
        ast_error_set(e, "%s: reading stopped: the reader process was interrupted (signal %d, %s)", path, sig,
                      strsignal(sig));
    else
        ast_error_set(e, "%s: reading stopped: the reader process exited with status %d before finishing "
                         "(damaged? see the messages above)", path, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* After an answer, a protocol error or the deadline: the child has
 * nothing left to do, so it is killed rather than waited for. */
static void end_child(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) continue;
}

/* Forks the reader and collects its answer; fds[0] is the read end. */
static int read_in_child(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e, double limit)
{
    int fds[2];
    if (pipe(fds) < 0) {
        ast_error_set(e, "%s: cannot start the reader process: %s", path, strerror(errno));
        return -1;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC), fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    fflush(NULL); /* so the child's copy of stdio buffers holds nothing */
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) close(fds[0]), child_main(fds[1], parent, path, o);
    close(fds[1]);
    if (pid < 0) {
        close(fds[0]);
        ast_error_set(e, "%s: cannot start the reader process: %s", path, strerror(errno));
        return -1;
    }
    int rc = receive(fds[0], path, out, e, now_s() + limit);
    close(fds[0]);
    if (rc == RECV_EOF) explain_end(pid, path, e);
    else end_child(pid);
    if (rc == RECV_TIMEOUT)
        ast_error_set(e, "%s: could not be read within %g s (damaged?); for a very large file raise ALPHAST_H5AD_TIMEOUT "
                         "(seconds)", path, limit);
    else if (rc == RECV_ERROR && !e->msg[0])
        ast_error_set(e, "%s: the reader process sent a damaged answer (internal error)", path);
    return rc == RECV_OK ? 0 : -1;
}

int ast_data_read_h5ad(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e)
{
    double limit;
    memset(out, 0, sizeof *out);
    e->msg[0] = 0;
    if (read_timeout(&limit, e) < 0) return -1;
    if (limit == 0) return ast_data_read_h5ad_direct(path, o, out, e);
    if (read_in_child(path, o, out, e, limit) < 0) {
        ast_dataset_free(out);
        return -1;
    }
    out->source = ast_xstrdup(path);
    return 0;
}
