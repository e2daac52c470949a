/* Where the running program finds the build tree and the files alphast
 * ships (configs/, data/): the source tree when it runs uninstalled, the
 * install directories otherwise. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

/* Is the running executable inside dir? (Linux; elsewhere: no.) */
static int running_from(const char *dir)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *real = realpath(dir, NULL);
    int inside = 0;
    if (n > 0 && real) {
        size_t len = strlen(real);
        exe[n] = '\0';
        inside = !strncmp(exe, real, len) && exe[len] == '/';
    }
    free(real);
    return inside;
}

const char *ast_build_dir(void)
{
    const char *env = getenv("ALPHAST_BUILD_DIR");
    if (env && *env) return env;
    return running_from(ALPHAST_BUILD_DIR) ? ALPHAST_BUILD_DIR : NULL;
}

const char *ast_shipped_file(const char *rel, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", ast_build_dir() ? ALPHAST_SOURCE_DIR : ALPHAST_DATA_DIR, rel);
    return buf;
}

int ast_make_dirs(const char *dir, ast_error *e)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(path, 0777);
            *p = '/';
        }
    if (mkdir(path, 0777) && errno != EEXIST) {
        ast_error_set(e, "%s: cannot create the directory: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

void ast_remove_flat_dir(const char *dir)
{
    DIR *d = opendir(dir);
    char path[4096 + 256 + 2];
    for (struct dirent *ent; d && (ent = readdir(d));) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}
