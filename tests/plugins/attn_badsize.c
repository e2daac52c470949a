/* Loader test fixture: a descriptor that claims 1 GiB (reproducer
 * plugin/ffn_badsize). A plugin of this ABI or an older minor has a
 * descriptor no larger than the host's, so the host must refuse it. */
#include <alphast/plugin.h>

static const ast_plugin_desc desc = {
    .abi_major = AST_ABI_MAJOR,
    .abi_minor = AST_ABI_MINOR,
    .struct_size = 1u << 30,
    .kind = AST_KIND_ATTENTION,
    .name = "badsize",
};

AST_PLUGIN_DEFINE(desc)
