/* Loader test fixture: exports its descriptor under a misspelt entry
 * name, the mistake the "does not export alphast_plugin_entry" error is for. */
#include <alphast/plugin.h>

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_ATTENTION, "noentry", "0", "no entry symbol"),
};

AST_EXPORT const ast_plugin_desc *alphast_plugin_entry_(void);
const ast_plugin_desc *alphast_plugin_entry_(void) { return &desc; }
