/* Loading plugins with libltdl: each (kind, name) is opened once, its ABI
 * and descriptor checked, and kept until ast_plugins_shutdown. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin_internal.h"

#define ENTRY_SYMBOL "alphast_plugin_entry"

typedef const ast_plugin_desc *(*entry_fn)(const ast_host *host);

static struct {
    int users;
    ast_plugin **loaded;
    int n_loaded;
    const ast_plugin **found; /* ast_plugins_discover's answer */
    int n_found;
} reg;

static const char *const kind_names[] = {NULL, "attention", "ffn", "monitor"};
static const char *const kind_prefixes[] = {NULL, "attn", "ffn", "monitor"};

static int kind_ok(ast_plugin_kind kind) { return kind >= AST_KIND_ATTENTION && kind <= AST_KIND_MONITOR; }

const char *ast_kind_name(ast_plugin_kind kind) { return kind_ok(kind) ? kind_names[kind] : "unknown"; }
const char *ast_kind_prefix(ast_plugin_kind kind) { return kind_ok(kind) ? kind_prefixes[kind] : "unknown"; }

int ast_plugins_init(ast_error *e)
{
    if (reg.users++) return 1;
    if (lt_dlinit()) {
        ast_error_set(e, "cannot initialise libltdl: %s", lt_dlerror());
        reg.users = 0;
        return 0;
    }
    if (!ast_search_init(e)) {
        ast_search_free();
        lt_dlexit();
        reg.users = 0;
        return 0;
    }
    return 1;
}

static void plugin_free(ast_plugin *p)
{
    if (p->handle) lt_dlclose(p->handle);
    free(p->name);
    free(p->path);
    free(p);
}

void ast_plugins_shutdown(void)
{
    if (!reg.users || --reg.users) return;
    for (int i = 0; i < reg.n_loaded; i++) plugin_free(reg.loaded[i]);
    free(reg.loaded);
    free(reg.found);
    reg.loaded = NULL;
    reg.found = NULL;
    reg.n_loaded = reg.n_found = 0;
    ast_search_free();
    lt_dlexit();
}

const ast_plugin *const *ast_plugins_loaded(int *n_out)
{
    *n_out = reg.n_loaded;
    return (const ast_plugin *const *)reg.loaded;
}

static ast_plugin *find_loaded(ast_plugin_kind kind, const char *name)
{
    for (int i = 0; i < reg.n_loaded; i++)
        if (reg.loaded[i]->kind == kind && !strcmp(reg.loaded[i]->name, name)) return reg.loaded[i];
    return NULL;
}

static void no_such_plugin(ast_plugin_kind kind, const char *name, ast_error *e)
{
    ast_strlist names = {0};
    char found[400], dirs[512];
    ast_search_list(kind, &names);
    ast_error_set(e, "no %s plugin named '%s' (found: %s; searched %s)", ast_kind_name(kind), name,
                  ast_strlist_join(&names, ", ", "none", found, sizeof found),
                  ast_plugins_search_path(kind, dirs, sizeof dirs));
    ast_strlist_free(&names);
}

/* Why the module at stem did not open. libltdl reports "file not found"
 * for any file its loaders cannot open, which hides the real reason when a
 * shared object is there but is not loadable: ask the dynamic loader itself
 * (dlopen, diagnosis only) for its message (bad ELF header, missing symbol,
 * wrong architecture). */
static void open_error(const ast_plugin *p, const char *stem, ast_error *e)
{
    const char *kind = ast_kind_name(p->kind), *why = lt_dlerror();
    char path[4096];
    snprintf(path, sizeof path, "%s.so", stem);
    if (!access(path, F_OK)) {
        void *h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
        const char *dl = h ? NULL : dlerror();
        if (h) dlclose(h);
        ast_error_set(e, "cannot load %s plugin '%s' from %s: %s; rebuild it as a shared object for this "
                      "machine, or remove it", kind, p->name, path, dl ? dl : why ? why : "unknown error");
        return;
    }
    ast_error_set(e, "cannot load %s plugin '%s' from %s: %s", kind, p->name, stem, why ? why : "unknown error");
}

/* Plugins stay loaded until the process ends (libltdl's resident advice:
 * lt_dlclose leaves them). A plugin with CUDA kernels registers them with
 * the CUDA runtime as it loads, and the runtime cannot launch them after
 * the plugin is unloaded and loaded again in the same process ("device
 * kernel image is invalid"), as a test that builds one model after another
 * does. */
static lt_dlhandle open_resident(const char *stem)
{
    lt_dladvise advise;
    lt_dlhandle h = NULL;
    if (lt_dladvise_init(&advise)) return NULL;
    if (!lt_dladvise_ext(&advise) && !lt_dladvise_resident(&advise)) h = lt_dlopenadvise(stem, advise);
    lt_dladvise_destroy(&advise);
    return h;
}

int ast_plugin_open(ast_plugin *p, const char *stem, ast_error *e)
{
    char why[768];
    const char *kind = ast_kind_name(p->kind);
    if (!(p->handle = open_resident(stem))) {
        open_error(p, stem, e);
        return 0;
    }
    const lt_dlinfo *info = lt_dlgetinfo(p->handle);
    p->path = ast_xstrdup(info && info->filename ? info->filename : stem);
    entry_fn entry = (entry_fn)(uintptr_t)lt_dlsym(p->handle, ENTRY_SYMBOL);
    if (!entry) {
        ast_error_set(e, "%s plugin '%s' (%s) does not export %s (%s); end its source with AST_PLUGIN_DEFINE(desc)",
                      kind, p->name, p->path, ENTRY_SYMBOL, lt_dlerror());
        return 0;
    }
    const ast_plugin_desc *raw = entry(ast_host_table());
    if (!raw) snprintf(why, sizeof why, "returned no descriptor from %s", ENTRY_SYMBOL);
    if (!raw || !ast_desc_adopt(raw, &p->desc, why, sizeof why) ||
        !ast_desc_validate(&p->desc, p->kind, p->name, why, sizeof why)) {
        ast_error_set(e, "%s plugin '%s' (%s) %s", kind, p->name, p->path, why);
        return 0;
    }
    return 1;
}

const ast_plugin *ast_plugin_load(ast_plugin_kind kind, const char *name, ast_error *e)
{
    AST_ASSERT(reg.users, "ast_plugin_load before ast_plugins_init");
    AST_ASSERT(kind_ok(kind), "plugin kind %d", (int)kind);
    if (!ast_plugin_name_ok(name)) {
        ast_error_set(e, "'%s' is not a valid %s plugin name (letters, digits, '_' and '-' only)", name, ast_kind_name(kind));
        return NULL;
    }
    ast_plugin *p = find_loaded(kind, name);
    if (p) return p;
    char *stem = ast_search_find(kind, name);
    if (!stem) {
        no_such_plugin(kind, name, e);
        return NULL;
    }
    p = ast_xcalloc(1, sizeof *p);
    p->kind = kind;
    p->name = ast_xstrdup(name);
    int ok = ast_plugin_open(p, stem, e);
    free(stem);
    if (!ok) {
        plugin_free(p);
        return NULL;
    }
    reg.loaded = ast_xrealloc(reg.loaded, (size_t)(reg.n_loaded + 1) * sizeof *reg.loaded);
    reg.loaded[reg.n_loaded++] = p;
    return p;
}

const char *ast_plugins_search_path(ast_plugin_kind kind, char *buf, size_t n)
{
    AST_ASSERT(reg.users && kind_ok(kind), "search path of kind %d before ast_plugins_init", (int)kind);
    return ast_strlist_join(ast_search_dirs(kind), ":", "", buf, n);
}

const ast_plugin_desc *ast_plugin_desc_of(const ast_plugin *p) { return &p->desc; }
const char *ast_plugin_path(const ast_plugin *p) { return p->path; }

/* Broken plugins are reported and skipped so one bad file does not hide
 * the others from --list-plugins. */
const ast_plugin *const *ast_plugins_discover(int *n_out)
{
    AST_ASSERT(reg.users, "ast_plugins_discover before ast_plugins_init");
    reg.n_found = 0;
    for (int k = AST_KIND_ATTENTION; k <= AST_KIND_MONITOR; k++) {
        ast_strlist names = {0};
        ast_search_list((ast_plugin_kind)k, &names);
        for (int i = 0; i < names.n; i++) {
            ast_error e;
            const ast_plugin *p = ast_plugin_load((ast_plugin_kind)k, names.v[i], &e);
            if (!p) {
                ast_log(AST_LOG_WARN, "%s", e.msg);
                continue;
            }
            reg.found = ast_xrealloc(reg.found, (size_t)(reg.n_found + 1) * sizeof *reg.found);
            reg.found[reg.n_found++] = p;
        }
        ast_strlist_free(&names);
    }
    *n_out = reg.n_found;
    return reg.found;
}
