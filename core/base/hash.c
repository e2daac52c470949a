/* FNV-1a 64: fast, stable across platforms, and good enough to name files
 * (a collision would need ~2^32 distinct runs or caches). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "base/hash.h"

uint64_t ast_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

int ast_fnv1a_file(const char *path, uint64_t *h, ast_error *e)
{
    int fd = ast_open_regular(path, e);
    if (fd < 0) return -1;
    unsigned char buf[1 << 16];
    ssize_t got;
    while ((got = read(fd, buf, sizeof buf)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) break;
        *h = ast_fnv1a(*h, buf, (size_t)got);
    }
    int err = got < 0 ? errno : 0;
    close(fd);
    if (err) ast_error_set(e, "%s: cannot read (%s); check the disk", path, strerror(err));
    return err ? -1 : 0;
}
