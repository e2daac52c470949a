/* alphast-run: global flags, then dispatch to a subcommand from the table
 * in commands.c. */
#include <stdlib.h>
#include <string.h>

#include "base/crash.h"
#include "config/config.h"
#include "engine/blas_coretype.h"
#include "cli.h"
#include "commands.h"

enum { OPT_VERSION, OPT_LIST_PLUGINS, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_VERSION] = {"version", 'V', NULL, "print the version and the plugin ABI, and exit"},
    [OPT_LIST_PLUGINS] = {"list-plugins", 0, NULL, "list the plugins found, with their options (= 'plugins')"},
};

static void list_commands(FILE *out)
{
    fprintf(out, "\nCommands:\n");
    for (int i = 0; i < cli_n_commands; i++) fprintf(out, "  %-12s %s\n", cli_commands[i].name, cli_commands[i].summary);
    fprintf(out, "\nRun '%s COMMAND --help' for a command's options.\n"
                 "\nEnvironment:\n"
                 "  ALPHAST_PLUGIN_PATH  colon-separated absolute plugin directories, searched first\n"
                 "  ALPHAST_BUILD_DIR    a build tree whose plugins/<kind>/ replace the installed plugins\n"
                 "                       (a directory or plugin file others can write is skipped, warned)\n"
                 "  ALPHAST_LOG          debug, info, warn or error (default info)\n",
            CLI_PROG);
}

static const cli_spec spec = {
    .usage = "[--version | --list-plugins | COMMAND [ARGS...]]",
    .about = "Trains and runs AlphaSTomics, a diffusion transformer for spatial transcriptomics,\n"
             "with attention, feed-forward and monitor plugins.",
    .options = options,
    .n_options = N_OPTS,
    .more_help = list_commands,
};

static int unknown_command(const char *name)
{
    const char **names = ast_xmalloc((size_t)cli_n_commands * sizeof *names);
    for (int i = 0; i < cli_n_commands; i++) names[i] = cli_commands[i].name;
    const char *near = ast_did_you_mean(name, names, cli_n_commands);
    free(names);
    if (near) return cli_usage_error(NULL, "unknown command '%s' (did you mean '%s'?)", name, near);
    return cli_usage_error(NULL, "unknown command '%s'", name);
}

int main(int argc, char **argv)
{
    const char *value[N_OPTS];
    ast_blas_coretype_fix(argv); /* before any work: it may run alphast-run again */
    ast_crash_install(); /* a plugin that crashes or exits is named */
    /* Global options are flags, so the command is the first non-option. */
    int cmd = 1;
    while (cmd < argc && argv[cmd][0] == '-') cmd++;
    int rc = cli_parse(&spec, cmd, argv, value, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    if (value[OPT_VERSION]) {
        printf("%s %s (plugin ABI %d.%d)\n", CLI_PROG, PACKAGE_VERSION, AST_ABI_MAJOR, AST_ABI_MINOR);
        return CLI_OK;
    }
    if (value[OPT_LIST_PLUGINS] && cmd < argc) return cli_usage_error(NULL, "--list-plugins takes no command");
    if (value[OPT_LIST_PLUGINS]) return cmd_plugins(1, (char *[]){"plugins", NULL});
    if (cmd == argc) return cli_usage_error(NULL, "no command given");
    const cli_command *c = cli_command_find(argv[cmd]);
    return c ? c->run(argc - cmd, argv + cmd) : unknown_command(argv[cmd]);
}
