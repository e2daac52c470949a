/* Where plugins live: $ALPHAST_PLUGIN_PATH first, then the build tree's
 * plugins/<kind>/ when this program runs uninstalled, else the install
 * directory. A plugin is a file <prefix>_<name> with a libtool (.la) or
 * shared-object extension. */
#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin_internal.h"

/* What lt_dlopenext tries, in its order: the libtool archive (which also
 * finds an uninstalled module in .libs/), then the module itself (libtool
 * modules are .so on ELF systems and on macOS alike). */
static const char *const module_ext[] = {".la", ".so"};
#define N_EXT ((int)(sizeof module_ext / sizeof module_ext[0]))

/* Paths longer than this are not plugin paths anyone uses; they simply
 * fail to match. */
#define PATH_BUF 4096

static ast_strlist dirs_of[AST_KIND_MONITOR + 1];

static int is_dir(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* Anyone who can write a plugin directory can replace the code alphast
 * runs, so say so once per directory (a sticky /tmp-like directory still
 * lets every user add new files). */
static void warn_if_world_writable(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) || !(st.st_mode & S_IWOTH)) return;
    ast_log(AST_LOG_WARN, "plugin directory %s is writable by every user, so anyone can replace the code alphast "
            "loads from it; run chmod o-w '%s' or move the plugins", dir, dir);
}

static int add_env_dirs(ast_strlist *dirs, ast_error *e)
{
    const char *env = getenv("ALPHAST_PLUGIN_PATH");
    char *copy = ast_xstrdup(env ? env : ""), *save = NULL;
    int ok = 1;
    for (char *d = strtok_r(copy, ":", &save); d && ok; d = strtok_r(NULL, ":", &save)) {
        ok = is_dir(d);
        if (ok) warn_if_world_writable(d), ast_strlist_push(dirs, d);
        else ast_error_set(e, "ALPHAST_PLUGIN_PATH: '%s' is not a directory; set it to a colon-separated list of plugin directories", d);
    }
    free(copy);
    return ok;
}

int ast_search_init(ast_error *e)
{
    ast_strlist env = {0};
    const char *build = ast_build_dir();
    if (!add_env_dirs(&env, e)) {
        ast_strlist_free(&env);
        return 0;
    }
    for (int k = AST_KIND_ATTENTION; k <= AST_KIND_MONITOR; k++) {
        char dir[PATH_BUF];
        for (int i = 0; i < env.n; i++) ast_strlist_push(&dirs_of[k], env.v[i]);
        if (build) snprintf(dir, sizeof dir, "%s/plugins/%s", build, ast_kind_name((ast_plugin_kind)k));
        else snprintf(dir, sizeof dir, "%s", ALPHAST_PLUGIN_DIR);
        ast_strlist_push(&dirs_of[k], dir);
    }
    ast_strlist_free(&env);
    return 1;
}

void ast_search_free(void)
{
    for (int k = 0; k <= AST_KIND_MONITOR; k++) ast_strlist_free(&dirs_of[k]);
}

const ast_strlist *ast_search_dirs(ast_plugin_kind kind) { return &dirs_of[kind]; }

int ast_plugin_name_ok(const char *name)
{
    if (!*name || strlen(name) > AST_PLUGIN_NAME_MAX) return 0;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-') return 0;
    return 1;
}

/* "attn_gated.la" -> "gated" into name; 0 if the file is not a plugin of
 * this prefix. */
static int plugin_name_of(const char *file, const char *prefix, char name[AST_PLUGIN_NAME_MAX + 1])
{
    size_t lp = strlen(prefix), lf = strlen(file);
    if (strncmp(file, prefix, lp) || file[lp] != '_') return 0;
    for (int i = 0; i < N_EXT; i++) {
        size_t le = strlen(module_ext[i]), ln = lf - lp - 1 - le;
        if (lf <= lp + 1 + le || strcmp(file + lf - le, module_ext[i]) || ln > AST_PLUGIN_NAME_MAX) continue;
        memcpy(name, file + lp + 1, ln);
        name[ln] = '\0';
        return ast_plugin_name_ok(name);
    }
    return 0;
}

static int has_module(const char *stem)
{
    for (int i = 0; i < N_EXT; i++) {
        char path[PATH_BUF + 8];
        struct stat st;
        snprintf(path, sizeof path, "%s%s", stem, module_ext[i]);
        if (!stat(path, &st) && S_ISREG(st.st_mode)) return 1;
    }
    return 0;
}

char *ast_search_find(ast_plugin_kind kind, const char *name)
{
    const ast_strlist *dirs = &dirs_of[kind];
    for (int i = 0; i < dirs->n; i++) {
        char stem[PATH_BUF];
        snprintf(stem, sizeof stem, "%s/%s_%s", dirs->v[i], ast_kind_prefix(kind), name);
        if (has_module(stem)) return ast_xstrdup(stem);
    }
    return NULL;
}

void ast_search_list(ast_plugin_kind kind, ast_strlist *out)
{
    const ast_strlist *dirs = &dirs_of[kind];
    for (int i = 0; i < dirs->n; i++) {
        DIR *d = opendir(dirs->v[i]);
        struct dirent *ent;
        char name[AST_PLUGIN_NAME_MAX + 1];
        while (d && (ent = readdir(d)))
            if (plugin_name_of(ent->d_name, ast_kind_prefix(kind), name))
                ast_strlist_insert_sorted(out, name);
        if (d) closedir(d);
    }
}
