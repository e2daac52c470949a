/* base/hash.h: FNV-1a, the hash that names sweep runs and data caches and
 * checks what a data cache holds; a word-wise 64-bit hash for in-memory
 * keys of large buffers; and CRC-32C, the checksum of TensorBoard's event
 * records. */
#ifndef ALPHAST_HASH_H
#define ALPHAST_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* FNV-1a 64-bit, continuing from h (start with AST_FNV_OFFSET). */
#define AST_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t ast_fnv1a(uint64_t h, const void *data, size_t n);
/* The same over the bytes of a regular file (ast_open_regular), continuing
 * from *h: 0, or -1 with e naming the file. */
int ast_fnv1a_file(const char *path, uint64_t *h, ast_error *e);

/* A 64-bit hash of n bytes at about memory speed, continuing from h, for
 * keys of large buffers that live as long as the process (the structural
 * prior's cache keys its sets by their expression, 640 kB each, per step);
 * byte-order dependent, so not for names written to disk. */
uint64_t ast_hash64(uint64_t h, const void *data, size_t n);

/* CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of n bytes:
 * "123456789" gives 0xe3069283. */
uint32_t ast_crc32c(const void *data, size_t n);


#endif
