/* FNV-1a 64: fast, stable across platforms, and good enough to name files
 * (a collision would need ~2^32 distinct runs or caches). */
#include "base/hash.h"

uint64_t ast_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}
