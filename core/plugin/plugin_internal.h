/* Shared by the loader's files (plugin_loader.c, plugin_search.c,
 * plugin_check.c, plugin_options.c); not part of the public API. */
#ifndef ALPHAST_PLUGIN_INTERNAL_H
#define ALPHAST_PLUGIN_INTERNAL_H

#include <ltdl.h>

#include "plugin/loader.h"
#include "base/strlist.h"

struct ast_plugin {
    ast_plugin_kind kind;
    char *name;
    char *path;
    lt_dlhandle handle;
    /* Full-size copy: fields beyond the plugin's struct_size stay zero. */
    ast_plugin_desc desc;
};

/* ---- plugin_loader.c --------------------------------------------------- */

/* The plugins loaded so far, in the order they were; n_out set. */
const ast_plugin *const *ast_plugins_loaded(int *n_out);

/* ---- plugin_search.c: where plugins live ------------------------------- */

/* Reads ALPHAST_PLUGIN_PATH and decides between the build tree and the
 * install directory. */
int ast_search_init(ast_error *e);
void ast_search_free(void);
/* Plugin names are short words: letters, digits, '_' and '-'. */
#define AST_PLUGIN_NAME_MAX 64
int ast_plugin_name_ok(const char *name);
/* The directories searched for `kind`, in order. */
const ast_strlist *ast_search_dirs(ast_plugin_kind kind);
/* "dir/attn_name" (malloc'd, for lt_dlopenext) of the first directory that
 * holds the plugin, or NULL. */
char *ast_search_find(ast_plugin_kind kind, const char *name);
/* Names of every plugin of `kind` on the search path, sorted, into out. */
void ast_search_list(ast_plugin_kind kind, ast_strlist *out);

/* ---- plugin_check.c: ABI and descriptor checks ------------------------- */

/* Checks the ABI fields of the plugin's descriptor and copies it into a
 * zeroed full-size one. 0 with a reason in why on failure. */
/* Opens the module at stem (lt_dlopenext: .la, else .so; libltdl must be
 * initialised), calls its entry with the host table and adopts its
 * descriptor once checked against p->kind and p->name. 1 on success, 0
 * with e set; on failure p->handle may be open and the caller closes it.
 * Shared with the installed test fixture (testkit/plugin_test.c). */
int ast_plugin_open(ast_plugin *p, const char *stem, ast_error *e);

int ast_desc_adopt(const ast_plugin_desc *raw, ast_plugin_desc *out, char *why, size_t n);
/* Kind, name, entry points and option table. */
int ast_desc_validate(const ast_plugin_desc *d, ast_plugin_kind kind, const char *name, char *why, size_t n);

/* ---- plugin_options.c: option values ---------------------------------- */

/* Parses YAML text as a value of option s into out; 0 with the reason
 * ("expected a boolean ...") on failure. ENUM and STRING values point
 * into text. */
int ast_option_parse(const ast_option_spec *s, const char *text, ast_optval *out, char *why, size_t n);

#endif
