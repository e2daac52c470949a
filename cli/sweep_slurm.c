/* The Slurm executor: the submission of a sweep's job array, and the
 * requeue of a task that Slurm warned (sweep_slurm.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sweep/ledger.h"
#include "base/atomic_file.h"
#include "base/strlist.h"
#include "cli.h"
#include "sweep_pool.h"
#include "sweep_slurm.h"

/* Runs a Slurm command found on PATH, its standard output into out (the
 * last newline dropped), its errors straight to ours. 0, or -1 with e
 * saying which command failed and how. */
static int run_tool(char *const argv[], char *out, size_t n, ast_error *e)
{
    int fds[2];
    if (pipe(fds) < 0) {
        ast_error_set(e, "cannot run %s: pipe: %s", argv[0], strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]), close(fds[1]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t got;
    char drain[256];
    while ((got = used < n - 1 ? read(fds[0], out + used, n - 1 - used) : read(fds[0], drain, sizeof drain)) != 0)
        if (got > 0 && used < n - 1) used += (size_t)got;
        else if (got < 0 && errno != EINTR) break;
    close(fds[0]);
    out[used] = 0;
    if (used && out[used - 1] == '\n') out[used - 1] = 0;
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (pid < 0) ast_error_set(e, "cannot run %s: fork: %s", argv[0], strerror(errno));
    else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        ast_error_set(e, "%s: not found; run this where Slurm's commands are (a login node of the cluster; Debian: "
                         "apt-get install slurm-client)", argv[0]);
    else if (!WIFEXITED(status) || WEXITSTATUS(status))
        ast_error_set(e, "%s %s failed (%s %d); its message is above", argv[0], argv[1],
                      WIFEXITED(status) ? "exit status" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    else return 0;
    return -1;
}

/* path made absolute against cwd (it need not exist: a dry run creates
 * nothing); to free. */
static char *absolute(const char *path, const char *cwd)
{
    char *real = realpath(path, NULL);
    if (real || path[0] == '/') return real ? real : ast_xstrdup(path);
    size_t n = strlen(cwd) + strlen(path) + 2;
    char *joined = ast_xmalloc(n);
    snprintf(joined, n, "%s/%s", cwd, path);
    return joined;
}

/* The task's command: this program by absolute path, `sweep --worker`,
 * the sweep directory by absolute path, then the submitter's choices. */
static void worker_command(const sweep_submission *sub, const char *dir, ast_strlist *cmd)
{
    char exe[PATH_MAX], num[32];
    ast_strlist_push(cmd, realpath("/proc/self/exe", exe) ? exe : CLI_PROG);
    ast_strlist_push(cmd, "sweep");
    ast_strlist_push(cmd, "--worker");
    ast_strlist_push(cmd, "--out");
    ast_strlist_push(cmd, dir);
    snprintf(num, sizeof num, "%d", sub->jobs);
    ast_strlist_push(cmd, "--jobs");
    ast_strlist_push(cmd, num);
    snprintf(num, sizeof num, "%d", sub->threads);
    ast_strlist_push(cmd, "--threads");
    ast_strlist_push(cmd, num);
    for (int i = 0; i < sub->n_worker; i++) ast_strlist_push(cmd, sub->worker[i]);
}

/* The job id sbatch --parsable printed ("1234" or "1234;cluster"), appended
 * to DIR/slurm/jobs for the record. */
static void note_job(const char *slurm_dir, const char *job, int tasks)
{
    char path[4300], line[256];
    snprintf(path, sizeof path, "%s/jobs", slurm_dir);
    int n = snprintf(line, sizeof line, "%s %d %.0f\n", job, tasks, ast_wall_clock());
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (fd < 0 || write(fd, line, (size_t)n) != n) fprintf(stderr, "%s sweep: cannot note the job in %s\n", CLI_PROG, path);
    if (fd >= 0) close(fd);
}

static int submit(const sweep_submission *sub, const char *dir, const char *script, int tasks, int not_done,
                  ast_error *e)
{
    char slurm_dir[4200], path[4300], job[256];
    snprintf(slurm_dir, sizeof slurm_dir, "%s/slurm", dir);
    snprintf(path, sizeof path, "%s/sweep.sbatch", slurm_dir);
    if (ast_make_dirs(slurm_dir, e) < 0 || ast_atomic_write_bytes(path, script, strlen(script), e) < 0) return -1;
    char *argv[] = {"sbatch", "--parsable", path, NULL};
    if (run_tool(argv, job, sizeof job, e) < 0) {
        ast_error why = *e;
        ast_error_set(e, "%s (the batch script is %s)", why.msg, path);
        return -1;
    }
    job[strcspn(job, ";")] = 0;
    note_job(slurm_dir, job, tasks);
    printf("%s: submitted Slurm job array %s: %d task%s for the %d run%s not done (of %d)\n"
           "  batch script %s, task logs %s/%s_<task>.out\n"
           "  follow it: alphast-run sweep --status %s\n",
           sub->sweep->name, job, tasks, tasks > 1 ? "s" : "", not_done, not_done > 1 ? "s" : "", sub->sweep->n_runs,
           path, slurm_dir, job, sub->dir);
    return 0;
}

int sweep_slurm_submit(const sweep_submission *sub)
{
    ast_error e = {""};
    const ast_sweep *s = sub->sweep;
    char runs[4200], cwd[PATH_MAX];
    snprintf(runs, sizeof runs, "%s/runs", sub->dir);
    int not_done = s->n_runs;
    if (!sub->dry_run && (ast_make_dirs(runs, &e) < 0 || sweep_pool_declare(s, sub->dir, &not_done, &e) < 0))
        return cli_fail(&e);
    if (sub->dry_run && (not_done = sweep_pool_left(s, sub->dir, 1, &e)) < 0) return cli_fail(&e);
    if (!not_done) {
        printf("%s: all %d runs are done; nothing to submit (ledger %s/ledger.jsonl)\n", s->name, s->n_runs, sub->dir);
        return CLI_OK;
    }
    if (!getcwd(cwd, sizeof cwd)) {
        ast_error_set(&e, "cannot name the working directory for the tasks: %s", strerror(errno));
        return cli_fail(&e);
    }
    char *dir = absolute(sub->dir, cwd);
    ast_strlist cmd = {0};
    worker_command(sub, dir, &cmd);
    int most = not_done < AST_SLURM_DEFAULT_MAX_TASKS ? not_done : AST_SLURM_DEFAULT_MAX_TASKS;
    ast_slurm_array a = {.name = s->name, .sweep_dir = dir, .workdir = cwd, .worker = (const char *const *)cmd.v,
                         .n_worker = cmd.n, .tasks = sub->opts->tasks ? sub->opts->tasks : most,
                         .cpus_per_task = sub->opts->cpus_per_task ? sub->opts->cpus_per_task : sub->jobs * sub->threads};
    char *script = ast_slurm_script(sub->opts, &a, &e);
    int rc = script ? 0 : -1;
    if (script && sub->dry_run) {
        fputs(script, stdout);
        fprintf(stderr, "%s: %d of %d runs not done; the batch script above would run them in %d task%s (dry run: "
                "nothing written or submitted)\n", s->name, not_done, s->n_runs, a.tasks, a.tasks > 1 ? "s" : "");
    } else if (script) {
        rc = submit(sub, dir, script, a.tasks, not_done, &e);
    }
    free(script), free(dir);
    ast_strlist_free(&cmd);
    return rc < 0 ? cli_fail(&e) : CLI_OK;
}

int sweep_slurm_requeue(const ast_sweep *s, const char *dir)
{
    const char *job = getenv("SLURM_JOB_ID");
    ast_error e = {""};
    /* Failed runs stay for a later submission: a run that always fails
     * must not keep a task coming back. */
    int left = job ? sweep_pool_left(s, dir, 0, &e) : 0;
    if (left <= 0) return left;
    /* Said before asking: once Slurm grants the requeue it ends this task,
     * which may be before scontrol has even returned. */
    fprintf(stderr, "%s sweep: requeueing Slurm job %s (%s): it comes back for the %d run%s not done\n", CLI_PROG, job,
            *ast_runner_job() ? ast_runner_job() : job, left, left > 1 ? "s" : "");
    char out[256], *argv[] = {"scontrol", "requeue", (char *)job, NULL};
    if (run_tool(argv, out, sizeof out, &e) < 0) {
        fprintf(stderr, "%s sweep: %s; the %d runs left stay pending for another task or submission\n", CLI_PROG, e.msg,
                left);
        return -1;
    }
    return 0;
}
