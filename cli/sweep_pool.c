/* The sweep's process pool: claim a run, fork + exec this program's
 * `train` on it (its output in RUN_DIR/train.log), record every state
 * change in the ledger, and keep a progress line. One run failing never
 * stops the others unless --fail-fast asks. A run on a GPU gets one of
 * the GPUs (CUDA_VISIBLE_DEVICES), round robin, at most runs_per_gpu on each. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sweep/ledger.h"
#include "base/progress.h"
#include "train/train_stop.h"
#include "cli.h"
#include "sweep_gpus.h"
#include "sweep_pool.h"

#define RETRY_SECONDS 1.0 /* how often to look again at runs another runner holds */
#define POLL_NS 50000000L
#define LOG_TAIL_LINES 6
/* What asks a training process to stop at its next step (train_stop.h).
 * Not SIGTERM: Slurm sends that to every process of a job it preempts, and
 * a training process takes a second SIGTERM as "now", which ours, arriving
 * just after Slurm's, would be. */
#define STOP_SIGNAL SIGUSR1

extern char **environ;

typedef enum slot_state { SLOT_TODO, SLOT_ELSEWHERE, SLOT_RUNNING, SLOT_DONE, SLOT_FAILED } slot_state;

typedef struct slot {
    const ast_sweep_run *run;
    slot_state state;
    pid_t pid;
    ast_claim claim;
    double start, retry_at; /* wall seconds */
    int signalled;          /* we stopped it: it goes back to pending */
    int gpu;                /* while running: its index in o->gpus, or -1 on the CPU */
} slot;

typedef struct pool {
    ast_sweep *sweep; /* not const: tabulating a schedule runs its Lua */
    const sweep_opts *o;
    slot *slots;
    int n, running;
    double started;
    double run_seconds; /* of the runs finished here, for the ETA */
    int finished_here;
    int stopping, interrupted, failed_fast;
    const char *stop_why; /* the reason of the runs stop_all stopped: "interrupted" or "preempted" */
    char **envp; /* the environment of every child */
    char thread_vars[2][48];
    int gpu_slot;            /* envp's last entry: the child's CUDA_VISIBLE_DEVICES (or NULL) */
    char *inherited_gpus;    /* this process's CUDA_VISIBLE_DEVICES, what runs on the CPU keep; NULL if unset */
    char gpu_var[48];        /* CUDA_VISIBLE_DEVICES=<the GPU of the run being started> */
    int *gpu_load;           /* runs running on each GPU of o->gpus */
    int next_gpu;            /* where the round robin goes on */
    int tty;
    double drawn_at; /* of the progress line, monotonic */
    ast_error *e;
} pool;

static volatile sig_atomic_t signals_received, first_signal, last_signal;

static void on_signal(int sig)
{
    if (!signals_received) first_signal = sig;
    last_signal = sig;
    signals_received++;
}

/* ---- ledger lines --------------------------------------------------------- */

static void run_dir(const pool *p, const slot *s, char *buf, size_t n)
{
    snprintf(buf, n, "%s/runs/%s", p->o->dir, s->run->id);
}

/* A line for run r; `extra` (NULL for a run only declared) says how it
 * runs or ended, and where. */
static int record_run(const char *sweep_dir, const ast_sweep_run *r, ast_run_state state, const ast_ledger_entry *extra,
                      ast_error *e)
{
    char hash[17], dir[512];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->hash);
    snprintf(dir, sizeof dir, "runs/%s", r->id);
    ast_ledger_entry en = extra ? *extra : (ast_ledger_entry){.exit_code = -1};
    en.run = r->id, en.config_name = r->config_name, en.hash = hash, en.dir = dir;
    if (extra) en.host = ast_runner_host(), en.job = *ast_runner_job() ? ast_runner_job() : NULL;
    en.seed = r->seed, en.state = state;
    return ast_ledger_append(sweep_dir, &en, e);
}

static int record(pool *p, const slot *s, ast_run_state state, const ast_ledger_entry *extra)
{
    return record_run(p->o->dir, s->run, state, extra, p->e);
}

int sweep_pool_left(const ast_sweep *s, const char *dir, int count_failed, ast_error *e)
{
    ast_ledger *l = ast_ledger_read(dir, e);
    if (!l) return -1;
    int n = 0;
    for (int i = 0; i < s->n_runs; i++) {
        ast_run_state st;
        int known = ast_ledger_last(l, s->runs[i].id, &st, NULL);
        n += !known || (st != AST_RUN_DONE && (count_failed || st != AST_RUN_FAILED));
    }
    ast_ledger_free(l);
    return n;
}

int sweep_pool_declare(const ast_sweep *s, const char *dir, int *not_done, ast_error *e)
{
    ast_ledger *l = ast_ledger_read(dir, e);
    if (!l) return -1;
    int rc = 0;
    *not_done = 0;
    for (int i = 0; i < s->n_runs && !rc; i++) {
        ast_run_state last;
        int known = ast_ledger_last(l, s->runs[i].id, &last, NULL);
        *not_done += !known || last != AST_RUN_DONE;
        if (!known) rc = record_run(dir, &s->runs[i], AST_RUN_PENDING, NULL, e);
    }
    ast_ledger_free(l);
    return rc;
}

/* ---- output --------------------------------------------------------------- */

static int count(const pool *p, slot_state st)
{
    int n = 0;
    for (int i = 0; i < p->n; i++) n += p->slots[i].state == st;
    return n;
}

static void format_eta(const pool *p, char *buf, size_t n)
{
    if (!p->finished_here) {
        snprintf(buf, n, "?");
        return;
    }
    double mean = p->run_seconds / p->finished_here, left = 0, now = ast_wall_clock();
    for (int i = 0; i < p->n; i++) {
        const slot *s = &p->slots[i];
        if (s->state == SLOT_RUNNING) left += mean > now - s->start ? mean - (now - s->start) : 0;
        if (s->state == SLOT_TODO || s->state == SLOT_ELSEWHERE) left += mean;
    }
    ast_fmt_duration(left / p->o->jobs, buf, n);
}

static void progress_line(pool *p)
{
    p->drawn_at = ast_now();
    char eta[16], line[512];
    format_eta(p, eta, sizeof eta);
    snprintf(line, sizeof line, "%s: %d/%d done, %d running, %d failed, %d pending%s, ETA %s", p->sweep->name,
             count(p, SLOT_DONE), p->n, count(p, SLOT_RUNNING), count(p, SLOT_FAILED),
             count(p, SLOT_TODO) + count(p, SLOT_ELSEWHERE),
             count(p, SLOT_ELSEWHERE) ? " (some held by another runner)" : "", eta);
    /* A line that reaches the last column wraps, and each "\r" redraw
     * then starts a new line: on a terminal it stops one short (sweep
     * names are ASCII, so a byte is a column). */
    int width = p->tty ? ast_term_width(STDERR_FILENO) - 1 : (int)sizeof line;
    if (width >= 0 && width < (int)sizeof line) line[width] = 0;
    fprintf(stderr, "%s%s%s", p->tty ? "\r\033[K" : "", line, p->tty ? "" : "\n");
    fflush(stderr);
}

/* An event line; the progress line follows it on a terminal, and after
 * each finished run in a log. */
static void event(pool *p, const char *what, const slot *s, const char *detail)
{
    fprintf(stderr, "%s  %-8s %s%s%s\n", p->tty ? "\r\033[K" : "", what, s->run->id, detail ? " " : "", detail ? detail : "");
    if (p->tty || detail) progress_line(p);
}

/* The last lines of a failed run's log, so the reason shows at once. */
static void print_log_tail(const pool *p, const slot *s)
{
    char path[4096], buf[4096];
    snprintf(path, sizeof path, "%s/runs/%s/train.log", p->o->dir, s->run->id);
    FILE *f = fopen(path, "r");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *start = buf + n;
    for (int lines = 0; start > buf && lines < LOG_TAIL_LINES; start--)
        if (start[-1] == '\n' && start != buf + n) lines++;
    fprintf(stderr, "%s    last lines of %s:\n", p->tty ? "\r\033[K" : "", path);
    for (char *line = strtok(start, "\n"); line; line = strtok(NULL, "\n")) fprintf(stderr, "    | %s\n", line);
}

/* ---- children -------------------------------------------------------------- */

/* This environment with the BLAS thread count of a run, and a last entry
 * for its GPU (set_child_gpu). */
static void child_env(pool *p)
{
    int n = 0, k = 0;
    while (environ[n]) n++;
    p->envp = ast_xcalloc((size_t)n + 4, sizeof *p->envp);
    for (int i = 0; i < n; i++) {
        if (!strncmp(environ[i], "CUDA_VISIBLE_DEVICES=", 21)) p->inherited_gpus = environ[i];
        else if (strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) && strncmp(environ[i], "OMP_NUM_THREADS=", 16))
            p->envp[k++] = environ[i];
    }
    snprintf(p->thread_vars[0], sizeof p->thread_vars[0], "OPENBLAS_NUM_THREADS=%d", p->o->threads);
    snprintf(p->thread_vars[1], sizeof p->thread_vars[1], "OMP_NUM_THREADS=%d", p->o->threads);
    p->envp[k++] = p->thread_vars[0];
    p->envp[k++] = p->thread_vars[1];
    p->gpu_slot = k;
}

/* The GPU the next child sees: s's, or what this process was given. */
static void set_child_gpu(pool *p, const slot *s)
{
    if (s->gpu >= 0) snprintf(p->gpu_var, sizeof p->gpu_var, "CUDA_VISIBLE_DEVICES=%d", p->o->gpus[s->gpu]);
    p->envp[p->gpu_slot] = s->gpu >= 0 ? p->gpu_var : p->inherited_gpus;
}

/* A GPU for run s, round robin over those with room: 1 and s->gpu set, or
 * 0 when every GPU has runs_per_gpu runs (s waits). A run on the CPU gets
 * none (s->gpu -1) and may start. */
static int take_gpu(pool *p, slot *s)
{
    s->gpu = -1;
    if (!sweep_gpus_wanted(s->run, p->o->device)) return 1;
    for (int k = 0; k < p->o->n_gpus; k++) {
        int g = (p->next_gpu + k) % p->o->n_gpus;
        if (p->gpu_load[g] >= p->o->runs_per_gpu) continue;
        p->gpu_load[g]++;
        p->next_gpu = (g + 1) % p->o->n_gpus;
        s->gpu = g;
        return 1;
    }
    return 0;
}

static void release_gpu(pool *p, slot *s)
{
    if (s->gpu >= 0) p->gpu_load[s->gpu]--;
    s->gpu = -1;
}

/* alphast-run train --config BASE --out DIR [--schedule TABLE] [--device NAME] OVERRIDES... */
static char **train_argv(const slot *s, const char *dir, const char *table, const char *device)
{
    const ast_sweep_run *r = s->run;
    char **argv = ast_xcalloc((size_t)r->n_overrides + 12, sizeof *argv);
    int k = 0;
    argv[k++] = ast_xstrdup(CLI_PROG);
    argv[k++] = ast_xstrdup("train");
    argv[k++] = ast_xstrdup("--config");
    argv[k++] = ast_xstrdup(r->base);
    argv[k++] = ast_xstrdup("--out");
    argv[k++] = ast_xstrdup(dir);
    if (table) {
        argv[k++] = ast_xstrdup("--schedule");
        argv[k++] = ast_xstrdup(table);
    }
    if (device) {
        argv[k++] = ast_xstrdup("--device");
        argv[k++] = ast_xstrdup(device);
    }
    for (int i = 0; i < r->n_overrides; i++) argv[k++] = ast_xstrdup(r->overrides[i]);
    return argv;
}

static void free_argv(char **argv)
{
    for (int i = 0; argv[i]; i++) free(argv[i]);
    free(argv);
}

/* Only async-signal-safe calls between fork and exec: the OpenBLAS threads
 * of this process may hold locks the child would never see released. */
static void exec_child(const slot *s, int log, char **argv, char **envp, pid_t parent)
{
    setpgid(0, 0); /* signals reach it from us, not from the terminal */
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    dup2(log, STDOUT_FILENO);
    dup2(log, STDERR_FILENO);
    fcntl(s->claim.fd, F_SETFD, 0); /* the claim lives as long as the run */
    execve("/proc/self/exe", argv, envp);
    static const char msg[] = "alphast-run sweep: cannot execute /proc/self/exe\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(127);
}

/* A scheduled run's schedule, tabulated here, where the script's state
 * lives, into DIR/schedule.safetensors (once: the run's id hashes its
 * config and schedule code, so a table there is this run's). Its
 * functions' errors go to the run's log. */
static int tabulate(pool *p, const slot *s, const char *dir, int log, char *table, size_t n)
{
    snprintf(table, n, "%s/schedule.safetensors", dir);
    if (access(table, F_OK) == 0) return 0;
    ast_error e = {""};
    if (ast_sweep_tabulate_schedule(p->sweep, s->run->id, table, &e) == 0) return 0;
    dprintf(log, "alphast-run: %s\n", e.msg);
    return -1;
}

static int finish(pool *p, slot *s, int status);

/* A run whose schedule failed ends as if its process had exited with 1. */
static int fail_unstarted(pool *p, slot *s)
{
    s->pid = 0;
    s->start = ast_wall_clock();
    s->state = SLOT_RUNNING;
    p->running++;
    return finish(p, s, W_EXITCODE(1, 0));
}

/* 1: started; 0: the run failed before its process started; -1: p->e set. */
static int spawn(pool *p, slot *s)
{
    char dir[4096], log_path[4200];
    run_dir(p, s, dir, sizeof dir);
    snprintf(log_path, sizeof log_path, "%s/train.log", dir);
    if ((mkdir(dir, 0777) && errno != EEXIST)) {
        ast_error_set(p->e, "%s: cannot create the run directory: %s", dir, strerror(errno));
        return -1;
    }
    int log = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (log < 0) {
        ast_error_set(p->e, "%s: cannot open: %s", log_path, strerror(errno));
        return -1;
    }
    char table[4300];
    if (s->run->scheduled && tabulate(p, s, dir, log, table, sizeof table) < 0) {
        close(log);
        return fail_unstarted(p, s) < 0 ? -1 : 0;
    }
    char **argv = train_argv(s, dir, s->run->scheduled ? table : NULL, p->o->device);
    set_child_gpu(p, s);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) exec_child(s, log, argv, p->envp, parent);
    int err = errno;
    close(log);
    free_argv(argv);
    if (pid < 0) {
        ast_error_set(p->e, "cannot start a run: fork: %s", strerror(err));
        return -1;
    }
    s->pid = pid;
    s->start = ast_wall_clock();
    s->state = SLOT_RUNNING;
    p->running++;
    char gpu[16];
    if (s->gpu >= 0) snprintf(gpu, sizeof gpu, "%d", p->o->gpus[s->gpu]);
    ast_ledger_entry en = {.pid = pid, .start = s->start, .exit_code = -1, .gpu = s->gpu >= 0 ? gpu : NULL};
    return record(p, s, AST_RUN_RUNNING, &en) < 0 ? -1 : 1;
}

/* Claims and starts the run, or learns that it needs nothing or belongs to
 * another runner. -1 with p->e set on an I/O error. */
static int try_start(pool *p, slot *s)
{
    if (!take_gpu(p, s)) return 0; /* every GPU is full: it waits for a run to end */
    int got = ast_claim_take(p->o->dir, s->run->id, &s->claim, p->e);
    if (got <= 0) {
        release_gpu(p, s);
        s->state = SLOT_ELSEWHERE;
        s->retry_at = ast_wall_clock() + RETRY_SECONDS;
        return got;
    }
    /* Claimed: now the ledger cannot change under us for this run. */
    ast_ledger *l = ast_ledger_read(p->o->dir, p->e);
    ast_run_state last;
    double when;
    int known = l && ast_ledger_last(l, s->run->id, &last, &when);
    ast_ledger_free(l);
    if (!l) return -1;
    if (known && (last == AST_RUN_DONE || (last == AST_RUN_FAILED && when >= p->started))) {
        release_gpu(p, s);
        ast_claim_release(&s->claim);
        s->state = last == AST_RUN_DONE ? SLOT_DONE : SLOT_FAILED;
        return 0;
    }
    int started = spawn(p, s);
    if (started < 0) {
        release_gpu(p, s);
        ast_claim_release(&s->claim);
        return -1;
    }
    char where[32];
    if (started && s->gpu >= 0) snprintf(where, sizeof where, "on GPU %d", p->o->gpus[s->gpu]);
    if (started) event(p, "started", s, started && s->gpu >= 0 ? where : NULL);
    return 0;
}

static int launch(pool *p)
{
    double now = ast_wall_clock();
    for (int i = 0; i < p->n && p->running < p->o->jobs && !p->stopping; i++) {
        slot *s = &p->slots[i];
        if ((s->state == SLOT_TODO || (s->state == SLOT_ELSEWHERE && now >= s->retry_at)) && try_start(p, s) < 0)
            return -1;
    }
    return 0;
}

/* Stops every running run with `sig`; those that end go back to pending
 * with reason `why`. */
static void stop_all(pool *p, int sig, const char *why)
{
    p->stopping = 1;
    p->stop_why = why;
    for (int i = 0; i < p->n; i++)
        if (p->slots[i].state == SLOT_RUNNING) {
            kill(p->slots[i].pid, sig);
            p->slots[i].signalled = 1;
        }
}

static void describe_status(int status, char *buf, size_t n)
{
    if (WIFSIGNALED(status))
        snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, n, "exit status %d", WEXITSTATUS(status));
}

static int finish(pool *p, slot *s, int status)
{
    double end = ast_wall_clock();
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    char why[128], took[16];
    describe_status(status, why, sizeof why);
    ast_fmt_duration(end - s->start, took, sizeof took);
    ast_ledger_entry en = {.pid = s->pid, .start = s->start, .end = end, .exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                           .signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0};
    p->running--;
    release_gpu(p, s);
    /* Stopped with its work saved: by us, or by a signal of its own (Slurm
     * signals every process of a job it preempts). Never a failure. */
    int saved = WIFEXITED(status) && WEXITSTATUS(status) == AST_EXIT_PREEMPTED, back = s->signalled || saved;
    const char *back_why = s->signalled ? p->stop_why : "preempted";
    ast_run_state state = ok ? AST_RUN_DONE : back ? AST_RUN_PENDING : AST_RUN_FAILED;
    s->state = ok ? SLOT_DONE : back ? SLOT_TODO : SLOT_FAILED;
    if (!ok) en.reason = back ? back_why : why;
    int rc = record(p, s, state, &en);
    ast_claim_release(&s->claim); /* after the ledger says what happened */
    if (ok) p->run_seconds += end - s->start, p->finished_here++;
    char detail[200];
    snprintf(detail, sizeof detail, "(%s%s%s)", ok ? "" : back ? back_why : why, ok ? "" : ", ", took);
    event(p, ok ? "done" : back ? "stopped" : "FAILED", s, detail);
    if (state == AST_RUN_FAILED) print_log_tail(p, s);
    if (state == AST_RUN_FAILED && p->o->fail_fast && !p->stopping) {
        p->failed_fast = 1;
        stop_all(p, STOP_SIGNAL, "interrupted");
    }
    return rc;
}

static int reap(pool *p)
{
    int status, rc = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (int i = 0; i < p->n; i++)
            if (p->slots[i].state == SLOT_RUNNING && p->slots[i].pid == pid && finish(p, &p->slots[i], status) < 0) rc = -1;
    return rc;
}

/* ---- the loop -------------------------------------------------------------- */

/* Slots from the ledger (where sweep_pool_declare put every run). */
static void init_slots(pool *p, const ast_ledger *l)
{
    p->slots = ast_xcalloc((size_t)p->n, sizeof *p->slots);
    for (int i = 0; i < p->n; i++) {
        slot *s = &p->slots[i];
        ast_run_state last;
        s->run = &p->sweep->runs[i];
        s->claim.fd = -1;
        s->gpu = -1;
        int known = ast_ledger_last(l, s->run->id, &last, NULL);
        s->state = known && last == AST_RUN_DONE ? SLOT_DONE : SLOT_TODO;
    }
}

/* A worker leaves the runs other runners hold to them once it has nothing
 * of its own left: a Slurm task that waited would hold its allocation idle. */
static int finished(const pool *p)
{
    if (p->running) return 0;
    return p->stopping || count(p, SLOT_TODO) + (p->o->worker ? 0 : count(p, SLOT_ELSEWHERE)) == 0;
}

/* The first signal stops the runs at their next step (they write a
 * checkpoint); another SIGINT kills them, while a later SIGTERM or SIGUSR1
 * (Slurm's) only repeats the request. */
static void on_signals(pool *p, int *handled)
{
    int first = *handled == 0;
    *handled = signals_received;
    p->interrupted = 1;
    if (!first) {
        stop_all(p, last_signal == SIGINT ? SIGKILL : STOP_SIGNAL, p->stop_why);
        return;
    }
    stop_all(p, STOP_SIGNAL, first_signal == SIGINT ? "interrupted" : "preempted");
    fprintf(stderr, "%s%s: the running runs stop after their step, with a checkpoint%s\n", p->tty ? "\r\033[K" : "",
            strsignal(first_signal), first_signal == SIGINT ? " (again to kill them)" : "");
}

static sweep_outcome loop(pool *p)
{
    int error = 0;
    int handled = 0;
    while (!finished(p)) {
        if (signals_received > handled) on_signals(p, &handled);
        if (reap(p) < 0 || launch(p) < 0) {
            error = 1;
            stop_all(p, STOP_SIGNAL, "interrupted");
        }
        if (p->tty && ast_now() - p->drawn_at > 0.5) progress_line(p);
        nanosleep(&(struct timespec){0, POLL_NS}, NULL);
    }
    if (p->tty) fputc('\n', stderr);
    if (error) return SWEEP_ERROR;
    if (p->interrupted) return SWEEP_INTERRUPTED;
    return count(p, SLOT_FAILED) ? SWEEP_SOME_FAILED : SWEEP_ALL_DONE;
}

/* "GPUs 0,1, 2 runs each" when some run is on a GPU. */
static void print_gpus(const pool *p)
{
    int wanted = 0;
    for (int i = 0; i < p->n; i++) wanted += sweep_gpus_wanted(p->slots[i].run, p->o->device);
    if (!wanted) return;
    fprintf(stderr, "%s: %d run%s on GPU%s", p->sweep->name, wanted, wanted > 1 ? "s" : "", p->o->n_gpus > 1 ? "s" : "");
    for (int g = 0; g < p->o->n_gpus; g++) fprintf(stderr, "%s%d", g ? "," : " ", p->o->gpus[g]);
    fprintf(stderr, ", at most %d at a time on each\n", p->o->runs_per_gpu);
}

sweep_outcome sweep_pool_run(ast_sweep *s, const sweep_opts *o, sweep_tally *tally, ast_error *e)
{
    int not_done;
    *tally = (sweep_tally){0};
    ast_ledger *l = sweep_pool_declare(s, o->dir, &not_done, e) < 0 ? NULL : ast_ledger_read(o->dir, e);
    if (!l) return SWEEP_ERROR;
    pool p = {.sweep = s, .o = o, .n = s->n_runs, .started = ast_wall_clock(), .tty = isatty(STDERR_FILENO), .e = e};
    child_env(&p);
    p.gpu_load = ast_xcalloc((size_t)o->n_gpus + 1, sizeof *p.gpu_load);
    init_slots(&p, l);
    ast_ledger_free(l);
    int before = count(&p, SLOT_DONE);
    fprintf(stderr, "%s: %d runs (%d done before), %d at a time x %d thread%s, in %s\n", s->name, p.n, before, o->jobs,
            o->threads, o->threads > 1 ? "s" : "", o->dir);
    print_gpus(&p);
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term, old_usr1;
    sigemptyset(&sa.sa_mask);
    signals_received = first_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGUSR1, &sa, &old_usr1); /* Slurm's warning before a time limit (sbatch --signal=B:USR1@N) */
    sweep_outcome out = loop(&p);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGUSR1, &old_usr1, NULL);
    *tally = (sweep_tally){.stop_signal = first_signal, .ended = p.finished_here + count(&p, SLOT_FAILED)};
    fprintf(stderr, "%s: %d/%d done (%d here, %d before), %d failed%s; ledger %s/ledger.jsonl\n", s->name,
            count(&p, SLOT_DONE), p.n, p.finished_here, before, count(&p, SLOT_FAILED),
            out == SWEEP_INTERRUPTED ? ", interrupted (run again to continue)" : p.failed_fast ? ", stopped by --fail-fast" : "",
            o->dir);
    free(p.envp);
    free(p.slots);
    free(p.gpu_load);
    return out;
}
