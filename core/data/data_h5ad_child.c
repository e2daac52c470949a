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

#include "data/data.h"

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
#define WIRE_MAGIC 0x64613568u /* "h5ad" */

/* What the child sends first; arrays and NUL-separated names follow. */
typedef struct wire_head {
    uint32_t magic;
    int32_t ok;
    int64_t n_cells;
    int32_t n_genes, n_slices, n_types, coord_dims, has_cell_type;
    uint32_t msg_len; /* the error message, when !ok */
    uint64_t gene_bytes, type_bytes;
} wire_head;

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

/* n strings as one block, each with its NUL. */
static char *join_names(char **s, int n, uint64_t *bytes)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) total += strlen(s[i]) + 1;
    char *out = ast_xmalloc(total), *p = out;
    for (int i = 0; i < n; i++) p = stpcpy(p, s[i]) + 1;
    *bytes = total;
    return out;
}

static void send_dataset(int fd, const ast_dataset *d)
{
    wire_head hd = {WIRE_MAGIC, 1, d->n_cells, d->n_genes, d->n_slices, d->n_types, d->coord_dims, d->cell_type != NULL,
                    0, 0, 0};
    char *genes = join_names(d->genes, d->n_genes, &hd.gene_bytes);
    char *types = d->type_names ? join_names(d->type_names, d->n_types, &hd.type_bytes) : NULL;
    size_t cells = (size_t)d->n_cells;
    if (write_all(fd, &hd, sizeof hd) == 0 && write_all(fd, d->expr, cells * (size_t)d->n_genes * sizeof(float)) == 0 &&
        write_all(fd, d->pos, cells * 3 * sizeof(float)) == 0 && write_all(fd, d->slice, cells * sizeof(int)) == 0 &&
        (!d->cell_type || write_all(fd, d->cell_type, cells * sizeof(int)) == 0) &&
        write_all(fd, genes, hd.gene_bytes) == 0)
        write_all(fd, types, hd.type_bytes);
    free(genes), free(types);
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
        wire_head hd = {WIRE_MAGIC, 0, 0, 0, 0, 0, 0, 0, (uint32_t)strlen(e.msg), 0, 0};
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

/* Splits a block of n NUL-terminated names; NULL unless it holds exactly n. */
static char **split_names(char *block, uint64_t bytes, int n)
{
    int count = 0;
    for (uint64_t i = 0; i < bytes; i++) count += block[i] == 0;
    if (count != n || (bytes && block[bytes - 1])) return NULL;
    char **out = ast_xcalloc(n ? (size_t)n : 1, sizeof *out);
    for (int i = 0; i < n; i++, block += strlen(block) + 1) out[i] = ast_xstrdup(block);
    return out;
}

static int receive_names(int fd, uint64_t bytes, int n, char ***out, double deadline)
{
    char *block = ast_xmalloc(bytes ? bytes : 1);
    int rc = read_full(fd, block, bytes, deadline);
    if (rc == RECV_OK && !(*out = split_names(block, bytes, n))) rc = RECV_ERROR;
    free(block);
    return rc;
}

/* Reads the arrays the header announced into d; sizes were checked by
 * the child's parse, and again here against the header (our own child,
 * but a truncated stream must not become a wrong dataset). */
static int receive_arrays(int fd, const wire_head *hd, ast_dataset *d, double deadline)
{
    if (hd->n_cells < 1 || hd->n_genes < 1 || hd->n_types < 0 || hd->n_slices < 1 ||
        (uint64_t)hd->n_cells > SIZE_MAX / sizeof(float) / (uint64_t)(hd->n_genes > 3 ? hd->n_genes : 3))
        return RECV_ERROR;
    size_t cells = (size_t)hd->n_cells;
    d->n_cells = hd->n_cells, d->n_slices = hd->n_slices, d->coord_dims = hd->coord_dims;
    d->expr = ast_xmalloc(cells * (size_t)hd->n_genes * sizeof(float));
    d->pos = ast_xmalloc(cells * 3 * sizeof(float));
    d->slice = ast_xmalloc(cells * sizeof(int));
    d->cell_type = hd->has_cell_type ? ast_xmalloc(cells * sizeof(int)) : NULL;
    int rc = read_full(fd, d->expr, cells * (size_t)hd->n_genes * sizeof(float), deadline);
    if (rc == RECV_OK) rc = read_full(fd, d->pos, cells * 3 * sizeof(float), deadline);
    if (rc == RECV_OK) rc = read_full(fd, d->slice, cells * sizeof(int), deadline);
    if (rc == RECV_OK && d->cell_type) rc = read_full(fd, d->cell_type, cells * sizeof(int), deadline);
    if (rc == RECV_OK && (rc = receive_names(fd, hd->gene_bytes, hd->n_genes, &d->genes, deadline)) == RECV_OK)
        d->n_genes = hd->n_genes;
    if (rc == RECV_OK && hd->type_bytes &&
        (rc = receive_names(fd, hd->type_bytes, hd->n_types, &d->type_names, deadline)) == RECV_OK)
        d->n_types = hd->n_types;
    return rc;
}

/* The child's answer: a dataset, or its error message in e. */
static int receive(int fd, ast_dataset *d, ast_error *e, double deadline)
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
    return receive_arrays(fd, &hd, d, deadline);
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
    int rc = receive(fds[0], out, e, now_s() + limit);
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
