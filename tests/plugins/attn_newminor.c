/* Loader test fixture: claims a newer minor ABI than the host's, i.e. it
 * may use services this host does not have. */
#include <alphast/plugin.h>

static const ast_plugin_desc desc = {
    .abi_major = AST_ABI_MAJOR,
    .abi_minor = AST_ABI_MINOR + 1,
    .struct_size = sizeof(ast_plugin_desc),
    .kind = AST_KIND_ATTENTION,
    .name = "newminor",
};

AST_PLUGIN_DEFINE(desc)
