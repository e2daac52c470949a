/* Helpers shared by the libFuzzer targets (tests/fuzz/README.md): a private
 * temporary directory for the readers that take a file name, NUL-terminated
 * copies of the input, and FUZZ_CHECK for the properties a target checks
 * beyond "no crash" (a failure aborts, which libFuzzer reports as a crash
 * and saves the input). */
#ifndef ALPHAST_FUZZ_H
#define ALPHAST_FUZZ_H

#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...)                                                                                  \
    do {                                                                                                       \
        if (!(cond)) {                                                                                         \
            fprintf(stderr, "alphast fuzz: property failed at %s:%d: %s\n    ", __FILE__, __LINE__, #cond);    \
            fprintf(stderr, __VA_ARGS__);                                                                      \
            fputc('\n', stderr);                                                                               \
            abort();                                                                                           \
        }                                                                                                      \
    } while (0)

/* A failing call must say why: one clear error, never an empty one. */
#define FUZZ_CHECK_ERROR(e, what) FUZZ_CHECK((e)->msg[0], "%s failed with an empty error message", what)

static char fuzz_tmp[4096];

static void fuzz_tmp_remove(void)
{
    DIR *d = fuzz_tmp[0] ? opendir(fuzz_tmp) : NULL;
    if (!d) return;
    struct dirent *ent;
    char path[8192];
    while ((ent = readdir(d)))
        if (strcmp(ent->d_name, ".") && strcmp(ent->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", fuzz_tmp, ent->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(fuzz_tmp);
}

/* The target's own directory under $TMPDIR (or /tmp), removed at exit. */
static inline const char *fuzz_dir(void)
{
    if (fuzz_tmp[0]) return fuzz_tmp;
    const char *base = getenv("TMPDIR");
    snprintf(fuzz_tmp, sizeof fuzz_tmp, "%s/alphast-fuzz-XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(fuzz_tmp)) {
        perror(fuzz_tmp);
        abort();
    }
    atexit(fuzz_tmp_remove);
    return fuzz_tmp;
}

/* fuzz_dir()/name into buf. */
static inline const char *fuzz_path(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", fuzz_dir(), name);
    return buf;
}

/* Writes the bytes to path (replacing it); aborts if the disk refuses. */
static inline void fuzz_write(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        abort();
    }
    const char *p = data;
    while (size) {
        ssize_t w = write(fd, p, size);
        if (w <= 0) {
            perror(path);
            abort();
        }
        p += w, size -= (size_t)w;
    }
    close(fd);
}

/* A malloc'd, NUL-terminated copy (a NUL inside the input ends the text). */
static inline char *fuzz_text(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

#endif
