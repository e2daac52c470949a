/* alphast/atomic_file.h: replacing a file so that readers and crashes see
 * either the old contents or the complete new ones, never a torn file. */
#ifndef ALPHAST_ATOMIC_FILE_H
#define ALPHAST_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "base/base.h"

/* Writes the new contents to `out`; returns 0, or -1 with errno set. */
typedef int (*ast_write_fn)(FILE *out, void *ud);

/* Writes through `fill` into a new PATH.tmp.<pid>.<random> (created
 * exclusively: a planted file or link of that name is never written
 * through), flushes and fsyncs it, renames
 * it over `path` and fsyncs the directory. On any failure the temporary file
 * is removed, an existing `path` is left as it was, and e names the path and
 * the system's reason. Returns 0 or -1.
 * The path "-" is standard output (the command line's `--out -`), written
 * and flushed in place: a stream has nothing to replace. */
int ast_atomic_write(const char *path, ast_write_fn fill, void *ud, ast_error *e);

/* The same for a buffer already in memory. */
int ast_atomic_write_bytes(const char *path, const void *bytes, size_t n, ast_error *e);

#endif
