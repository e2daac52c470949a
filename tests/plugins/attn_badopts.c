/* Loader test fixture: an option table whose default lies outside its own
 * range, which the loader must catch when loading, not at first use. */
#include <alphast/plugin.h>

static const ast_option_spec options[] = {
    {"heads", AST_OPT_INT, "0", 1, 64, NULL, "default outside [1, 64]"},
};

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_ATTENTION, "badopts", "0", "invalid option default"),
    .options = options,
    .n_options = AST_N_OPTIONS(options),
};

AST_PLUGIN_DEFINE(desc)
