/* Loader test fixture: built for the next major plugin ABI, so the host
 * must refuse it before touching anything else. */
#include <alphast/plugin.h>

static const ast_plugin_desc desc = {
    .abi_major = AST_ABI_MAJOR + 1,
    .abi_minor = 0,
    .struct_size = sizeof(ast_plugin_desc),
    .kind = AST_KIND_ATTENTION,
    .name = "badabi",
};

AST_PLUGIN_DEFINE(desc)
