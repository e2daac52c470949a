/* base/hash.h: FNV-1a, the hash that names sweep runs and data caches. */
#ifndef ALPHAST_HASH_H
#define ALPHAST_HASH_H

#include <stddef.h>
#include <stdint.h>

/* FNV-1a 64-bit, continuing from h (start with AST_FNV_OFFSET). */
#define AST_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t ast_fnv1a(uint64_t h, const void *data, size_t n);

#endif
