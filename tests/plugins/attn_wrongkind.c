/* Loader test fixture: named attn_ but declares itself a feed-forward
 * plugin. */
#include <alphast/plugin.h>

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_FFN, "wrongkind", "0", "kind does not match the file name"),
};

AST_PLUGIN_DEFINE(desc)
