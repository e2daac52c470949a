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
/* How many directories of each list come from ALPHAST_PLUGIN_PATH (the
 * rest are the built-in plugins'). */
static int n_path_dirs;

static int is_dir(const char *path)
{
    struct stat st;
    return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/* Anyone who can write a plugin directory or file can replace the code
 * alphast runs: one that its group or every user may write (a sticky
 * /tmp-like directory still lets them add files), or that belongs to
 * another user than root and us, is skipped with a warning naming it. */
static int untrusted(const char *path)
{
    struct stat st;
    if (stat(path, &st)) return 0; /* missing: nothing to load from it */
    const char *what = S_ISDIR(st.st_mode) ? "directory" : "file", *fix = "run chmod o-w";
    char who[64] = "";
    if (st.st_mode & S_IWOTH) snprintf(who, sizeof who, "is writable by every user");
    else if (st.st_mode & S_IWGRP) snprintf(who, sizeof who, "is writable by its group"), fix = "run chmod g-w";
    else if (st.st_uid && st.st_uid != geteuid())
        snprintf(who, sizeof who, "belongs to another user (uid %ld)", (long)st.st_uid), fix = "copy it to a place of yours";
    if (!who[0]) return 0;
    ast_log(AST_LOG_WARN, "ignoring plugin %s %s: it %s, who could replace the code alphast loads; %s '%s' or move "
            "the plugins", what, path, who, fix, path);
    return 1;
}

/* ALPHAST_PLUGIN_PATH's directories: one that is not a directory is an
 * error; a relative one (found from whatever the current directory is) or
 * an untrusted one is skipped with a warning. */
static int add_env_dirs(ast_strlist *dirs, ast_error *e)
{
    const char *env = getenv("ALPHAST_PLUGIN_PATH");
    char *copy = ast_xstrdup(env ? env : ""), *save = NULL;
    int ok = 1;
    for (char *d = strtok_r(copy, ":", &save); d && ok; d = strtok_r(NULL, ":", &save)) {
        if (!(ok = is_dir(d)))
            ast_error_set(e, "ALPHAST_PLUGIN_PATH: '%s' is not a directory; set it to a colon-separated list of plugin directories", d);
        else if (d[0] != '/')
            ast_log(AST_LOG_WARN, "ALPHAST_PLUGIN_PATH: ignoring the relative directory '%s', which would change with "
                    "the current directory; give it as an absolute path", d);
        else if (!untrusted(d))
            ast_strlist_push(dirs, d);
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
    n_path_dirs = env.n;
    /* ALPHAST_BUILD_DIR names the built-in plugins' place: checked as the path is */
    int build_ok = !build || !untrusted(build);
    for (int k = AST_KIND_ATTENTION; k <= AST_KIND_MONITOR; k++) {
        char dir[PATH_BUF];
        for (int i = 0; i < env.n; i++) ast_strlist_push(&dirs_of[k], env.v[i]);
        if (build) snprintf(dir, sizeof dir, "%s/plugins/%s", build, ast_kind_name((ast_plugin_kind)k));
        else snprintf(dir, sizeof dir, "%s", ALPHAST_PLUGIN_DIR);
        if (build_ok && !untrusted(dir)) ast_strlist_push(&dirs_of[k], dir);
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

/* The file lt_dlopenext would open for stem (the first extension there),
 * if any and trusted. */
static int has_module(const char *stem)
{
    for (int i = 0; i < N_EXT; i++) {
        char path[PATH_BUF + 8];
        struct stat st;
        snprintf(path, sizeof path, "%s%s", stem, module_ext[i]);
        if (!stat(path, &st) && S_ISREG(st.st_mode)) return !untrusted(path);
    }
    return 0;
}

/* A plugin on ALPHAST_PLUGIN_PATH replaces a built-in one of its name:
 * on purpose or not, say so (once: a loaded plugin is not looked up again). */
static void warn_if_shadowing(const ast_strlist *dirs, int found, const char *file, const char *stem)
{
    if (found >= n_path_dirs) return; /* it is the built-in one */
    for (int i = n_path_dirs; i < dirs->n; i++) {
        char builtin[PATH_BUF];
        snprintf(builtin, sizeof builtin, "%s/%s", dirs->v[i], file);
        if (has_module(builtin)) {
            ast_log(AST_LOG_WARN, "plugin %s (from ALPHAST_PLUGIN_PATH) is used instead of the built-in %s", stem,
                    builtin);
            return;
        }
    }
}

char *ast_search_find(ast_plugin_kind kind, const char *name)
{
    const ast_strlist *dirs = &dirs_of[kind];
    char file[AST_PLUGIN_NAME_MAX + 32]; /* prefix_name */
    snprintf(file, sizeof file, "%s_%s", ast_kind_prefix(kind), name);
    for (int i = 0; i < dirs->n; i++) {
        char stem[PATH_BUF];
        snprintf(stem, sizeof stem, "%s/%s", dirs->v[i], file);
        if (!has_module(stem)) continue;
        warn_if_shadowing(dirs, i, file, stem);
        return ast_xstrdup(stem);
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
        while (d && (ent = readdir(d))) {
            char stem[PATH_BUF];
            if (!plugin_name_of(ent->d_name, ast_kind_prefix(kind), name)) continue;
            snprintf(stem, sizeof stem, "%s/%s_%s", dirs->v[i], ast_kind_prefix(kind), name);
            if (has_module(stem)) ast_strlist_insert_sorted(out, name);
        }
        if (d) closedir(d);
    }
}
