/* Atomic file replacement: temporary file, fsync, rename, fsync directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/hash.h"

static const char *hint_for(int err)
{
    switch (err) {
    case ENOENT: return "create the directory first";
    case ENOSPC:
    case EDQUOT: return "free some disk space and retry";
    case EFBIG: return "the file exceeds the allowed file size; raise the limit (ulimit -f)";
    case EACCES:
    case EPERM:
    case EROFS: return "check that the directory is writable";
    case EISDIR: return "the path names a directory; give a file name";
    case EEXIST: return "files of others take every temporary name tried; check who writes in this directory";
    default: return "check the path and the disk";
    }
}

static int fail(ast_error *e, const char *path, const char *what, int err)
{
    ast_error_set(e, "%s: %s (%s); %s", path, what, strerror(err), hint_for(err));
    return -1;
}

/* The directory entry of a rename is only durable once the directory
 * itself is synced. */
static int sync_parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (!dir) return -1;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    free(dir);
    if (fd < 0) return -1;
    /* Some filesystems cannot sync directories (EINVAL): nothing to do there. */
    int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -1;
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* Creates PATH.tmp.<pid>.<random> for writing, as only a new file: with
 * O_EXCL and O_NOFOLLOW a name someone planted (a symbolic link to a file
 * of theirs or ours, in a directory others can write) is never written
 * through; it only costs another name. The stream, or NULL with errno. */
static FILE *create_temporary(const char *path, char *tmp, size_t n)
{
    static unsigned long calls;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned long seed[4] = {(unsigned long)getpid(), ++calls, (unsigned long)ts.tv_nsec, (unsigned long)attempt};
        unsigned long suffix = (unsigned long)(ast_fnv1a(AST_FNV_OFFSET, seed, sizeof seed) & 0xffffffu);
        if (snprintf(tmp, n, "%s.tmp.%ld.%06lx", path, (long)getpid(), suffix) >= (int)n) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0) {
            FILE *out = fdopen(fd, "wb");
            if (!out) unlink(tmp), close(fd);
            return out;
        }
        if (errno != EEXIST) return NULL;
    }
    return NULL; /* errno: EEXIST */
}

/* Fills, flushes, syncs and closes `out`; on failure returns the errno. */
static int write_and_close(FILE *out, ast_write_fn fill, void *ud)
{
    errno = 0;
    int err = 0;
    if (fill(out, ud) != 0 || ferror(out)) err = errno ? errno : EIO;
    if (!err && fflush(out) != 0) err = errno;
    if (!err && fsync(fileno(out)) != 0) err = errno;
    if (fclose(out) != 0 && !err) err = errno;
    return err;
}

/* fsync and close do not apply to a stream that may be a pipe or a terminal. */
static int write_stdout(ast_write_fn fill, void *ud, ast_error *e)
{
    errno = 0;
    int err = 0;
    if (fill(stdout, ud) != 0 || ferror(stdout)) err = errno ? errno : EIO;
    if (!err && fflush(stdout) != 0) err = errno;
    return err ? fail(e, "standard output", "cannot write", err) : 0;
}

int ast_atomic_write(const char *path, ast_write_fn fill, void *ud, ast_error *e)
{
    if (!strcmp(path, "-")) return write_stdout(fill, ud, e);
    char tmp[4096];
    FILE *out = create_temporary(path, tmp, sizeof tmp);
    if (!out) return fail(e, path, "cannot create the temporary file", errno);

    int err = write_and_close(out, fill, ud);
    if (err) {
        unlink(tmp);
        return fail(e, path, "cannot write", err);
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        unlink(tmp);
        return fail(e, path, "cannot replace the file", err);
    }
    if (sync_parent_dir(path) != 0) return fail(e, path, "written, but its directory could not be synced", errno);
    return 0;
}

typedef struct bytes_src {
    const void *p;
    size_t n;
} bytes_src;

static int write_bytes(FILE *out, void *ud)
{
    const bytes_src *b = ud;
    return fwrite(b->p, 1, b->n, out) == b->n ? 0 : -1;
}

int ast_atomic_write_bytes(const char *path, const void *bytes, size_t n, ast_error *e)
{
    bytes_src b = {bytes, n};
    return ast_atomic_write(path, write_bytes, &b, e);
}
