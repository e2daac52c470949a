/* base/base.h: what every layer uses: fatal-error checks, checked
 * allocation, user-facing errors, logging and where alphast's files are.
 * It depends on nothing but the C library and the installed ABI header
 * (for ast_log_level). */
#ifndef ALPHAST_BASE_H
#define ALPHAST_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "alphast/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fatal programming errors (shape mismatches and the like) ---------- */

#if defined(__GNUC__)
#define AST_NORETURN __attribute__((noreturn))
#define AST_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define AST_NORETURN
#define AST_PRINTF(f, a)
#endif

AST_NORETURN void ast_abort(const char *file, int line, const char *fmt, ...) AST_PRINTF(3, 4);
#define AST_ASSERT(cond, ...)                                                          \
    do {                                                                               \
        if (!(cond)) ast_abort(__FILE__, __LINE__, __VA_ARGS__);                       \
    } while (0)

/* Checked allocation: out of memory is fatal with a clear message. */
void *ast_xmalloc(size_t bytes);
void *ast_xcalloc(size_t n, size_t size);
void *ast_xrealloc(void *p, size_t bytes);
char *ast_xstrdup(const char *s);

/* ---- user-facing errors ------------------------------------------------- */

/* One error message with its location, filled by loaders and parsers and
 * printed once by the command that called them. */
typedef struct ast_error {
    char msg[1024];
} ast_error;

void ast_error_set(ast_error *e, const char *fmt, ...) AST_PRINTF(2, 3);

/* Logging to stderr; level from ALPHAST_LOG (debug|info|warn|error). */
void ast_log(ast_log_level level, const char *fmt, ...) AST_PRINTF(2, 3);
/* Seconds since the Unix epoch (the wall clock, not ast_now's monotonic
 * one): the time a log line carries so that it joins with other records. */
double ast_wall_clock(void);

/* ---- where things are ---------------------------------------------------- */

/* The build tree when running uninstalled ($ALPHAST_BUILD_DIR, or the
 * executable lies in the compiled-in build directory), else NULL. */
const char *ast_build_dir(void);
/* A file alphast ships, e.g. "configs/starmap.yaml": from the source tree
 * when running uninstalled, else from the installed data directory. */
const char *ast_shipped_file(const char *rel, char *buf, size_t n);
/* mkdir -p: 0, or -1 with e set. */
int ast_make_dirs(const char *dir, ast_error *e);
/* Removes a directory of files (no subdirectories): its files, then it.
 * Best effort: what cannot be removed stays. */
void ast_remove_flat_dir(const char *dir);
/* The index of s among the n names, or -1: the parse side of a name table. */
int ast_name_index(const char *s, const char *const *names, int n);

/* ---- reading files the user named ----------------------------------------- */

/* Opens path for reading if it is a regular file: a FIFO, a device or a
 * directory is refused at once ("PATH: not a regular file (a FIFO); ..."),
 * never opened in a way that blocks, never read. The descriptor (close on
 * exec, blocking), or -1 with e naming the path and the fix. */
int ast_open_regular(const char *path, ast_error *e);
/* The same as a stdio stream ("rb"), or NULL with e set. */
FILE *ast_fopen_regular(const char *path, ast_error *e);
/* The check alone, for a library that opens the path itself (HDF5): 0 or -1. */
int ast_check_regular(const char *path, ast_error *e);

#ifdef __cplusplus
}
#endif
#endif
