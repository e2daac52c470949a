/* FNV-1a 64: stable across platforms, and good enough to name files
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

/* FNV-1a takes a multiply per byte, one after another: 0.8 ms for one
 * prior set's expression. Here four lanes take 8-byte words, each folded
 * by splitmix64's finaliser (ast_mix64, a bijection), so four multiply
 * chains run side by side; the lanes, the length and the tail are folded
 * last. */
uint64_t ast_hash64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t lane[4] = {h, h ^ 0x9e3779b97f4a7c15ull, h + 0x632be59bd9b4e019ull, ~h};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * (size_t)k, sizeof w);
            lane[k] = ast_mix64(lane[k] ^ w);
        }
    uint64_t out = ast_mix64(h ^ (uint64_t)n);
    for (int k = 0; k < 4; k++) out = ast_mix64(out ^ lane[k]);
    for (; i < n; i++) out = ast_mix64(out ^ p[i]);
    return out;
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
