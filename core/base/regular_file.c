/* Opening a file the user named: only a regular file is read. A FIFO
 * would block open() and read() for ever, a device (/dev/zero) would be
 * read without end, and neither is data, a config or weights. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

static const char *kind_of(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "a special file";
}

static int refuse(const char *path, mode_t mode, ast_error *e)
{
    ast_error_set(e, "%s: not a regular file (%s); give the path of a file", path, kind_of(mode));
    return -1;
}

int ast_open_regular(const char *path, ast_error *e)
{
    struct stat st;
    /* The stat refuses a FIFO or a device without opening it (opening one
     * can block or have effects); O_NONBLOCK covers a path swapped for a
     * FIFO after the stat, and fstat then judges what was opened. */
    if (!stat(path, &st) && !S_ISREG(st.st_mode)) return refuse(path, st.st_mode, e);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        ast_error_set(e, "%s: cannot open (%s); check the path", path, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st)) st.st_mode = 0; /* judged a special file */
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return refuse(path, st.st_mode, e);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

FILE *ast_fopen_regular(const char *path, ast_error *e)
{
    int fd = ast_open_regular(path, e);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (fd >= 0 && !f) {
        ast_error_set(e, "%s: cannot open (%s); check the path", path, strerror(errno));
        close(fd);
    }
    return f;
}

int ast_check_regular(const char *path, ast_error *e)
{
    int fd = ast_open_regular(path, e);
    if (fd >= 0) close(fd);
    return fd < 0 ? -1 : 0;
}
