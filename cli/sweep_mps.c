/* The sweep's own CUDA MPS control daemon (sweep_mps.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "sweep_mps.h"

#define CONTROL "nvidia-cuda-mps-control"
#define SYSTEM_PIPE "/tmp/nvidia-mps/control" /* where clients look when no directory is given */

int sweep_mps_mode_parse(const char *text, sweep_mps_mode *mode)
{
    static const char *const names[] = {"auto", "on", "off"}; /* sweep_mps_mode's order */
    int i = ast_name_index(text, names, 3);
    if (i >= 0) *mode = (sweep_mps_mode)i;
    return i >= 0 ? 0 : -1;
}

/* The first PATH entry holding an executable `name`, into out. */
static int find_on_path(const char *name, char *out, size_t n)
{
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        size_t len = strcspn(p, ":");
        snprintf(out, n, "%.*s/%s", (int)len, p, name);
        if (len && access(out, X_OK) == 0) return 0;
        p += len + (p[len] == ':');
    }
    return -1;
}

/* Runs the control program with `input` on its standard input (NULL: none);
 * its exit status, or -1. */
static int control(const char *program, const char *arg, const char *input)
{
    int fd[2];
    if (pipe(fd) < 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[0], STDIN_FILENO);
        close(fd[0]), close(fd[1]);
        execl(program, program, arg, (char *)NULL);
        _exit(127);
    }
    close(fd[0]);
    if (pid > 0 && input) {
        void (*was)(int) = signal(SIGPIPE, SIG_IGN); /* it may end before reading: its status says why */
        if (write(fd[1], input, strlen(input)) < 0) { /* reported by the status below */ }
        signal(SIGPIPE, was);
    }
    close(fd[1]);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void set_dirs(const char *dir)
{
    char path[128];
    snprintf(path, sizeof path, "%s/pipe", dir);
    setenv("CUDA_MPS_PIPE_DIRECTORY", path, 1);
    snprintf(path, sizeof path, "%s/log", dir);
    setenv("CUDA_MPS_LOG_DIRECTORY", path, 1);
}

/* Removes dir's two subdirectories with their files, then dir. */
static void remove_dirs(const char *dir)
{
    char sub[128];
    snprintf(sub, sizeof sub, "%s/pipe", dir);
    ast_remove_flat_dir(sub);
    snprintf(sub, sizeof sub, "%s/log", dir);
    ast_remove_flat_dir(sub);
    rmdir(dir);
}

static int start(sweep_mps *m, ast_error *e)
{
    snprintf(m->dir, sizeof m->dir, "/tmp/alphast-mps-XXXXXX");
    if (!mkdtemp(m->dir)) {
        ast_error_set(e, "CUDA MPS: cannot create a directory for its daemon in /tmp: %s", strerror(errno));
        m->dir[0] = '\0';
        return -1;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/pipe", m->dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/log", m->dir);
    mkdir(path, 0700);
    set_dirs(m->dir);
    int rc = control(m->control, "-d", NULL);
    if (rc == 0) return 0;
    ast_error_set(e, "CUDA MPS: '%s -d' failed (exit status %d; its log is in %s/log)", m->control, rc, m->dir);
    unsetenv("CUDA_MPS_PIPE_DIRECTORY"), unsetenv("CUDA_MPS_LOG_DIRECTORY");
    m->dir[0] = '\0';
    return -1;
}

int sweep_mps_start(sweep_mps *m, sweep_mps_mode mode, int gpus_used, int runs_per_gpu, ast_error *e)
{
    m->dir[0] = '\0';
    if (mode == SWEEP_MPS_OFF || !gpus_used || runs_per_gpu < 2) return 0;
    if (getenv("CUDA_MPS_PIPE_DIRECTORY") || access(SYSTEM_PIPE, F_OK) == 0) return 0; /* one is there: the runs use it */
    if (find_on_path(CONTROL, m->control, sizeof m->control) < 0) {
        if (mode == SWEEP_MPS_AUTO) return 0;
        ast_error_set(e, "--mps on: %s is not on PATH (it comes with the NVIDIA driver's utilities); install it or "
                         "run with --mps off", CONTROL);
        return -1;
    }
    if (start(m, e) == 0) {
        ast_log(AST_LOG_INFO, "sweep: CUDA MPS daemon of this sweep in %s: the runs on a GPU share it at once", m->dir);
        return 0;
    }
    if (mode == SWEEP_MPS_ON) return -1;
    ast_log(AST_LOG_WARN, "sweep: %s; the runs sharing a GPU take it in turns (--mps off says not to try)", e->msg);
    return 0;
}

/* The daemon's control log into the sweep directory: what a failed run's
 * "MPS" error is explained by. */
static void keep_log(const sweep_mps *m, const char *sweep_dir)
{
    char src[128], dst[4200];
    snprintf(src, sizeof src, "%s/log/control.log", m->dir);
    FILE *f = fopen(src, "rb");
    if (!f) return;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    snprintf(dst, sizeof dst, "%s/mps-control.log", sweep_dir);
    ast_error e;
    if (ast_atomic_write_bytes(dst, buf, n, &e) < 0) ast_log(AST_LOG_WARN, "sweep: %s", e.msg);
}

void sweep_mps_stop(sweep_mps *m, const char *sweep_dir)
{
    if (!m->dir[0]) return;
    if (control(m->control, NULL, "quit\n") != 0)
        ast_log(AST_LOG_WARN, "sweep: the CUDA MPS daemon in %s did not take 'quit'; stop it with: "
                              "CUDA_MPS_PIPE_DIRECTORY=%s/pipe %s <<< quit", m->dir, m->dir, CONTROL);
    keep_log(m, sweep_dir);
    remove_dirs(m->dir);
    unsetenv("CUDA_MPS_PIPE_DIRECTORY"), unsetenv("CUDA_MPS_LOG_DIRECTORY");
    m->dir[0] = '\0';
}
