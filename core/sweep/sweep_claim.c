/* Run claims: a claim file is locked before it becomes visible (written
 * under a private name, then link()ed into place, which fails if the claim
 * exists), so whoever can open a claim finds it locked for as long as its
 * holder, or a child that inherited the lock, lives. A claim whose lock is
 * free belongs to a dead process and is removed, after checking that the
 * name still refers to the same file. The file says who claimed (pid,
 * host, Slurm job) for `alphast-run sweep --status`, which can test a lock
 * only on its own host: flock over a network file system is not reliable
 * to test from another machine, and a pid means nothing there. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sweep/ledger.h"

#define MAX_ATTEMPTS 8

/* 1 if a live process holds the claim at path, else 0 (a stale claim is
 * removed on the way). */
static int held(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        close(fd);
        return 1;
    }
    struct stat mine, now;
    if (!fstat(fd, &mine) && !stat(path, &now) && mine.st_ino == now.st_ino && mine.st_dev == now.st_dev) unlink(path);
    close(fd);
    return 0;
}

/* A locked file at tmp holding our pid, or -1 with e set. */
static int locked_file(const char *tmp, ast_error *e)
{
    unlink(tmp); /* left by an earlier process with our pid */
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
        ast_error_set(e, "%s: cannot create a claim file: %s", tmp, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "pid", (double)getpid());
    cJSON_AddStringToObject(o, "host", ast_runner_host());
    if (*ast_runner_job()) cJSON_AddStringToObject(o, "job", ast_runner_job());
    char *json = cJSON_PrintUnformatted(o);
    dprintf(fd, "%s\n", json);
    cJSON_free(json);
    cJSON_Delete(o);
    return fd;
}

int ast_claim_take(const char *sweep_dir, const char *run, ast_claim *c, ast_error *e)
{
    char dir[4096], path[4352], tmp[4400];
    snprintf(dir, sizeof dir, "%s/claims", sweep_dir);
    snprintf(path, sizeof path, "%s/%s.claim", dir, run);
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    c->fd = -1, c->path = NULL;
    if (mkdir(dir, 0777) && errno != EEXIST) {
        ast_error_set(e, "%s: cannot create: %s", dir, strerror(errno));
        return -1;
    }
    for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
        int fd = locked_file(tmp, e);
        if (fd < 0) return -1;
        int linked = link(tmp, path), err = errno;
        unlink(tmp);
        if (!linked) {
            c->fd = fd;
            c->path = ast_xstrdup(path);
            return 1;
        }
        close(fd);
        if (err != EEXIST) {
            ast_error_set(e, "%s: cannot claim: %s", path, strerror(err));
            return -1;
        }
        if (held(path)) return 0;
    }
    return 0; /* others keep winning the race: theirs */
}

void ast_claim_release(ast_claim *c)
{
    if (c->fd < 0) return;
    unlink(c->path);
    close(c->fd);
    free(c->path);
    c->fd = -1, c->path = NULL;
}

const char *ast_runner_host(void)
{
    static char host[256];
    if (!host[0] && gethostname(host, sizeof host - 1)) snprintf(host, sizeof host, "unknown");
    return host;
}

const char *ast_runner_job(void)
{
    static char job[64];
    const char *array = getenv("SLURM_ARRAY_JOB_ID"), *task = getenv("SLURM_ARRAY_TASK_ID"), *id = getenv("SLURM_JOB_ID");
    if (array && task) snprintf(job, sizeof job, "%s_%s", array, task);
    else snprintf(job, sizeof job, "%s", id ? id : "");
    return job;
}

/* What the claim file says about its holder; 0 if unreadable. */
static int read_holder(int fd, ast_claim_info *info)
{
    char text[1024];
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    if (n <= 0) return 0;
    text[n] = 0;
    cJSON *o = cJSON_Parse(text);
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(o, "pid"), *host = cJSON_GetObjectItemCaseSensitive(o, "host"),
                *job = cJSON_GetObjectItemCaseSensitive(o, "job");
    if (cJSON_IsNumber(pid)) info->pid = pid->valueint;
    else if (cJSON_IsNumber(o)) info->pid = o->valueint; /* an older alphast's claim: the pid alone */
    if (cJSON_IsString(host)) snprintf(info->host, sizeof info->host, "%s", host->valuestring);
    if (cJSON_IsString(job)) snprintf(info->job, sizeof info->job, "%s", job->valuestring);
    cJSON_Delete(o);
    return 1;
}

ast_claim_liveness ast_claim_inspect(const char *sweep_dir, const char *run, ast_claim_info *info)
{
    char path[4352];
    struct stat st;
    snprintf(path, sizeof path, "%s/claims/%s.claim", sweep_dir, run);
    *info = (ast_claim_info){.liveness = AST_CLAIM_NONE};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return AST_CLAIM_NONE;
    read_holder(fd, info);
    if (!fstat(fd, &st)) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        info->age = (double)(now.tv_sec - st.st_mtim.tv_sec) + 1e-9 * (double)(now.tv_nsec - st.st_mtim.tv_nsec);
        if (info->age < 0) info->age = 0; /* another host's clock, ahead of ours */
    }
    if (info->host[0] && strcmp(info->host, ast_runner_host())) {
        info->liveness = AST_CLAIM_REMOTE;
    } else if (flock(fd, LOCK_SH | LOCK_NB) < 0) {
        info->liveness = AST_CLAIM_LIVE;
    } else { /* free: its holder died; only looked at, left for the next runner to take over */
        info->liveness = AST_CLAIM_STALE;
        flock(fd, LOCK_UN);
    }
    close(fd);
    return info->liveness;
}
