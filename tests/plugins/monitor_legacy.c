/* Loader test fixture: a monitor whose descriptor ends at `observe`, as
 * one built before active_params was appended would. The field it sets
 * beyond its struct_size must read as NULL in the host's copy. */
#include <stddef.h>

#include <alphast/plugin.h>

static int instance;

static void *create(const ast_create_args *a, char *err, size_t errlen) { return &instance; }
static void destroy(void *self) {}
static void observe(void *self, const ast_observation *o) {}
static int64_t active_params(void *self) { return 1; }

static const ast_plugin_desc desc = {
    .abi_major = AST_ABI_MAJOR,
    .abi_minor = 0,
    .struct_size = offsetof(ast_plugin_desc, active_params),
    .kind = AST_KIND_MONITOR,
    .name = "legacy",
    .version = "0.1",
    .summary = "descriptor of the smallest size",
    .create = create,
    .destroy = destroy,
    .observe = observe,
    .active_params = active_params,
};

AST_PLUGIN_DEFINE(desc)
