/* `alphast-run plugins` (and --list-plugins): every plugin on the search
 * path with its version, summary, file and option table. */
#include <string.h>

#include "plugin/loader.h"
#include "cli.h"
#include "commands.h"

enum { OPT_KIND, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_KIND] = {"kind", 'k', "KIND", "only this kind: attention, ffn or monitor"},
};

static const cli_spec spec = {
    .name = "plugins",
    .usage = "[--kind KIND]",
    .about = "Lists the attention, feed-forward and monitor plugins found on the search path\n"
             "($ALPHAST_PLUGIN_PATH, then the build tree or the install directory) with\n"
             "each one's options: type, default, allowed values and meaning.\n"
             "Plugins that fail to load are reported on stderr and left out.",
    .options = options,
    .n_options = N_OPTS,
};

static const char *const type_names[] = {
    [AST_OPT_BOOL] = "bool", [AST_OPT_INT] = "int", [AST_OPT_FLOAT] = "float",
    [AST_OPT_ENUM] = "enum", [AST_OPT_STRING] = "string",
};

/* Allowed values as the config would write them. */
static const char *allowed(const ast_option_spec *o, char *buf, size_t n)
{
    switch (o->type) {
    case AST_OPT_BOOL: return "true|false";
    case AST_OPT_ENUM: return o->choices;
    case AST_OPT_STRING: return "text";
    case AST_OPT_INT:
    case AST_OPT_FLOAT:
        if (o->min > o->max) return "any";
        snprintf(buf, n, "[%.10g, %.10g]", o->min, o->max);
        return buf;
    }
    return "";
}

static int width(int w, const char *s)
{
    int l = (int)strlen(s);
    return l > w ? l : w;
}

static void print_options(const ast_plugin_desc *d)
{
    static const char *const head[] = {"option", "type", "default", "allowed", "meaning"};
    int wn = width(0, head[0]), wt = width(0, head[1]), wd = width(0, head[2]), wa = width(0, head[3]);
    char buf[64];
    if (!d->n_options) {
        printf("    no options\n");
        return;
    }
    for (int i = 0; i < d->n_options; i++) {
        const ast_option_spec *o = &d->options[i];
        wn = width(wn, o->name);
        wt = width(wt, type_names[o->type]);
        wd = width(wd, o->def);
        wa = width(wa, allowed(o, buf, sizeof buf));
    }
    printf("    %-*s  %-*s  %-*s  %-*s  %s\n", wn, head[0], wt, head[1], wd, head[2], wa, head[3], head[4]);
    for (int i = 0; i < d->n_options; i++) {
        const ast_option_spec *o = &d->options[i];
        printf("    %-*s  %-*s  %-*s  %-*s  %s\n", wn, o->name, wt, type_names[o->type], wd, o->def, wa,
               allowed(o, buf, sizeof buf), o->help ? o->help : "");
    }
}

static void print_plugin(const ast_plugin *p)
{
    const ast_plugin_desc *d = ast_plugin_desc_of(p);
    printf("\n  %s %s: %s\n    file: %s\n", d->name, d->version, d->summary, ast_plugin_path(p));
    print_options(d);
}

static void print_kind(ast_plugin_kind kind, const ast_plugin *const *all, int n)
{
    char path[2048];
    int shown = 0;
    printf("%s plugins (search path %s)\n", ast_kind_name(kind), ast_plugins_search_path(kind, path, sizeof path));
    for (int i = 0; i < n; i++)
        if (ast_plugin_desc_of(all[i])->kind == kind) {
            print_plugin(all[i]);
            shown++;
        }
    if (!shown) printf("\n  none found\n");
}

/* 0 for all kinds, or -1 when the name is no kind. */
static int kind_named(const char *name)
{
    if (!name) return 0;
    for (int k = AST_KIND_ATTENTION; k <= AST_KIND_MONITOR; k++)
        if (!strcmp(name, ast_kind_name((ast_plugin_kind)k))) return k;
    return -1;
}

int cmd_plugins(int argc, char **argv)
{
    const char *value[N_OPTS];
    ast_error e;
    int rc = cli_parse(&spec, argc, argv, value, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    int only = kind_named(value[OPT_KIND]);
    if (only < 0) return cli_usage_error(spec.name, "--kind must be attention, ffn or monitor, not '%s'", value[OPT_KIND]);
    if (!ast_plugins_init(&e)) return cli_fail(&e);
    int n;
    const ast_plugin *const *all = ast_plugins_discover(&n);
    for (int k = AST_KIND_ATTENTION; k <= AST_KIND_MONITOR; k++)
        if (!only || only == k) {
            if (k > AST_KIND_ATTENTION && !only) printf("\n");
            print_kind((ast_plugin_kind)k, all, n);
        }
    ast_plugins_shutdown();
    return CLI_OK;
}
