/* FNV-1a 64: fast, stable across platforms, and good enough to name files
 * (a collision would need ~2^32 distinct runs or caches). CRC-32C: zlib
 * has only CRC-32 and Debian 12 packages no C library of CRC-32C, so it is
 * the usual byte-wise table here; the event files it checks are small. */
#include <errno.h>
#include <pthread.h>
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

static uint32_t crc_table[256];
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void make_crc_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t ast_crc32c(const void *data, size_t n)
{
    pthread_once(&crc_table_once, make_crc_table);
    const unsigned char *p = data;
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xff] ^ (c >> 8);
    return c ^ 0xffffffffu;
}
