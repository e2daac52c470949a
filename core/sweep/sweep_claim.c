/* Run claims: a claim file is locked before it becomes visible (written
 * under a private name, then link()ed into place, which fails if the claim
 * exists), so whoever can open a claim finds it locked for as long as its
 * holder, or a child that inherited the lock, lives. A claim whose lock is
 * free belongs to a dead process and is removed, after checking that the
 * name still refers to the same file. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
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
    dprintf(fd, "%d\n", (int)getpid());
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
