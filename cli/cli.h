/* What every alphast-run command shares: a declarative option table that
 * drives both parsing and --help, and one style of error message. */
#ifndef ALPHAST_CLI_H
#define ALPHAST_CLI_H

#include <stdio.h>

#include "engine/engine.h"

#define CLI_PROG "alphast-run"

/* Exit statuses: 1 = the command failed, 2 = it was called wrongly. */
enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2, CLI_CONTINUE = -1 };

/* KEY=VALUE overrides a command takes at most, after its RUN_DIR or
 * CONFIG.yaml: more is a usage error that names this limit. */
#define CLI_MAX_OVERRIDES 64

typedef struct cli_option {
    const char *name;  /* long name without "--" */
    char letter;       /* short name, 0 for none */
    const char *arg;   /* name of its argument in --help ("FILE"); NULL for a flag */
    const char *help;
} cli_option;

typedef struct cli_spec {
    const char *name;  /* the command ("plugins"); NULL for the program itself */
    const char *usage; /* what follows the name in "Usage:" */
    const char *about; /* one or more lines for --help */
    const cli_option *options; /* --help/-h is implied */
    int n_options;
    int max_args;      /* positional arguments accepted: a few, or those before the overrides + CLI_MAX_OVERRIDES */
    void (*more_help)(FILE *out); /* extra --help section, may be NULL */
} cli_spec;

/* Parses argv[1..argc) (argv[0] is the command's name): value[i] becomes
 * the argument of options[i] ("" for a flag, NULL when absent; the last
 * occurrence wins), args[] the positional ones and *n_args their count.
 * Returns CLI_CONTINUE, or the exit status after printing --help (CLI_OK)
 * or a usage error (CLI_USAGE). */
int cli_parse(const cli_spec *s, int argc, char **argv, const char **value, const char **args, int *n_args);

void cli_print_help(const cli_spec *s, FILE *out);

/* "alphast-run CMD: <message>" and a pointer to --help, on stderr;
 * returns CLI_USAGE. cmd may be NULL for the program itself. */
int cli_usage_error(const char *cmd, const char *fmt, ...) AST_PRINTF(2, 3);

/* "alphast-run: <e->msg>" on stderr; returns CLI_FAILED. */
int cli_fail(const ast_error *e);

#endif
