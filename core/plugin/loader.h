/* alphast/loader.h: finding, loading and validating plugins (libltdl). */
#ifndef ALPHAST_LOADER_H
#define ALPHAST_LOADER_H

#include "config/config.h"
#include "engine/engine.h"

typedef struct ast_plugin ast_plugin;

/* Search order: $ALPHAST_PLUGIN_PATH (colon-separated), then the build
 * tree's plugins/<kind>/ when running uninstalled, else the install
 * directory. Files are named attn_<name>, ffn_<name>, monitor_<name>. */
int ast_plugins_init(ast_error *e);
void ast_plugins_shutdown(void);

/* Loads (once; later calls return the same handle) and checks the ABI.
 * Errors: no such plugin (listing those found), ABI mismatch (both
 * versions), missing entry symbol, wrong kind. */
const ast_plugin *ast_plugin_load(ast_plugin_kind kind, const char *name, ast_error *e);
const ast_plugin_desc *ast_plugin_desc_of(const ast_plugin *p);
const char *ast_plugin_path(const ast_plugin *p);

/* Validates options against the plugin's table and fills out[n_options]
 * (defaults for the ones not given). Errors: unknown option (with a
 * did-you-mean), wrong type, out of range, not one of the choices. String
 * values point into `src` or the descriptor, so keep them alive. */
int ast_plugin_options(const ast_plugin *p, const ast_optsrc *src, int n_src, ast_optval *out, ast_error *e);

/* The sizes every layer plugin may count on, checked by the host before
 * create() so no plugin repeats them: d_model > 0, and for attention
 * heads > 0 dividing d_model. 1, or 0 with the reason in why. */
int ast_plugin_dims_ok(const ast_plugin_desc *d, const ast_layer_dims *dims, char *why, size_t n);

/* Checks that the plugin has a kernel for `backend` for every fused op it
 * declares (its descriptor's kernels table). 0, or -1 with e naming the op,
 * the backend and the backends it has kernels for. */
int ast_plugin_check_backend(const ast_plugin *p, const char *backend, ast_error *e);

/* The plugins loaded so far, those a run uses, as a JSON array (a run's
 * plugins.json) of {"kind", "name", "version", "path", "sha256"}: the
 * descriptor's name and version, the file's real path and its SHA-256 as
 * sha256sum prints it. Malloc'd; NULL with e set if a file cannot be read. */
char *ast_plugins_provenance(ast_error *e);

/* Every plugin found on the search path, for --list-plugins; n_out set. */
const ast_plugin *const *ast_plugins_discover(int *n_out);

const char *ast_kind_name(ast_plugin_kind kind);   /* "attention" */
const char *ast_kind_prefix(ast_plugin_kind kind); /* "attn" */

/* The directories searched for `kind`, in order, ':'-joined into buf. */
const char *ast_plugins_search_path(ast_plugin_kind kind, char *buf, size_t n);

#endif
