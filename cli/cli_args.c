/* Option parsing and --help from a command's declarative option table:
 * --name, --name=VALUE, --name VALUE, -x, -x VALUE and "--". */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "cli.h"

static const cli_option help_option = {"help", 'h', NULL, "show this help and exit"};

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s%s%s: ", CLI_PROG, cmd ? " " : "", cmd ? cmd : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry '%s%s%s --help' for more information.\n", CLI_PROG, cmd ? " " : "", cmd ? cmd : "");
    return CLI_USAGE;
}

int cli_fail(const ast_error *e)
{
    fprintf(stderr, "%s: %s\n", CLI_PROG, e->msg);
    return CLI_FAILED;
}

static int unknown_option(const cli_spec *s, const char *arg, size_t len)
{
    const char **names = ast_xmalloc((size_t)(s->n_options + 1) * sizeof *names);
    char word[128];
    snprintf(word, sizeof word, "%.*s", (int)len, arg);
    for (int i = 0; i < s->n_options; i++) names[i] = s->options[i].name;
    names[s->n_options] = help_option.name;
    const char *near = ast_did_you_mean(word + strspn(word, "-"), names, s->n_options + 1);
    free(names);
    if (near) return cli_usage_error(s->name, "unknown option '%s' (did you mean '--%s'?)", word, near);
    return cli_usage_error(s->name, "unknown option '%s'", word);
}

/* Index of the option arg names (-1: --help), or -2 after printing why not. */
static int match_option(const cli_spec *s, const char *arg, size_t len)
{
    int is_long = arg[1] == '-';
    if (is_long ? (len == 6 && !strncmp(arg, "--help", 6)) : (len == 2 && arg[1] == help_option.letter)) return -1;
    for (int i = 0; i < s->n_options; i++) {
        const cli_option *o = &s->options[i];
        if (is_long ? (strlen(o->name) == len - 2 && !strncmp(arg + 2, o->name, len - 2))
                    : (len == 2 && o->letter && arg[1] == o->letter))
            return i;
    }
    unknown_option(s, arg, len);
    return -2;
}

/* Handles argv[*i], an option; advances *i past its argument. */
static int take_option(const cli_spec *s, int argc, char **argv, int *i, const char **value)
{
    const char *arg = argv[*i], *eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
    size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    int k = match_option(s, arg, len);
    if (k == -2) return CLI_USAGE;
    if (k == -1) {
        cli_print_help(s, stdout);
        return CLI_OK;
    }
    const cli_option *o = &s->options[k];
    if (!o->arg && eq) return cli_usage_error(s->name, "option '--%s' takes no value", o->name);
    if (o->arg && !eq && *i + 1 >= argc) return cli_usage_error(s->name, "option '%s' needs a value (%s)", arg, o->arg);
    value[k] = !o->arg ? "" : eq ? eq + 1 : argv[++*i];
    return CLI_CONTINUE;
}

int cli_parse(const cli_spec *s, int argc, char **argv, const char **value, const char **args, int *n_args)
{
    int n = 0, options_done = 0;
    for (int k = 0; k < s->n_options; k++) value[k] = NULL;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (!options_done && !strcmp(arg, "--")) {
            options_done = 1;
        } else if (!options_done && arg[0] == '-' && arg[1]) {
            int rc = take_option(s, argc, argv, &i, value);
            if (rc != CLI_CONTINUE) return rc;
        } else if (n < s->max_args) {
            args[n++] = arg;
        } else if (s->max_args >= CLI_MAX_OVERRIDES) {
            return cli_usage_error(s->name, "more than %d overrides: '%s' is one too many; put the settings in a "
                                            "config file instead", CLI_MAX_OVERRIDES, arg);
        } else {
            return cli_usage_error(s->name, "unexpected argument '%s'", arg);
        }
    }
    if (n_args) *n_args = n;
    return CLI_CONTINUE;
}

static void print_option(const cli_option *o, FILE *out)
{
    char left[64];
    snprintf(left, sizeof left, "%c%c%s --%s%s%s", o->letter ? '-' : ' ', o->letter ? o->letter : ' ',
             o->letter ? "," : " ", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    /* Two blanks at least before a description: completion/mkcompletion.sh
     * splits an option from its description there. */
    fprintf(out, "  %-26s %s%s\n", left, strlen(left) >= 26 ? " " : "", o->help);
}

void cli_print_help(const cli_spec *s, FILE *out)
{
    fprintf(out, "Usage: %s%s%s %s\n\n%s\n\nOptions:\n", CLI_PROG, s->name ? " " : "", s->name ? s->name : "",
            s->usage, s->about);
    for (int i = 0; i < s->n_options; i++) print_option(&s->options[i], out);
    print_option(&help_option, out);
    if (s->more_help) s->more_help(out);
}
