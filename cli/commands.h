/* The subcommands of alphast-run. To add one: write cmd_<name>.c with
 * `int cmd_<name>(int argc, char **argv)` (argv[0] is "<name>"; parse the
 * rest with cli_parse from cli.h), declare it below, and add one line to
 * the table in commands.c. */
#ifndef ALPHAST_CLI_COMMANDS_H
#define ALPHAST_CLI_COMMANDS_H

typedef struct cli_command {
    const char *name;
    const char *summary; /* one line for `alphast-run --help` */
    int (*run)(int argc, char **argv); /* returns the exit status */
} cli_command;

extern const cli_command cli_commands[];
extern const int cli_n_commands;

const cli_command *cli_command_find(const char *name);

int cmd_plugins(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_params(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_report(int argc, char **argv);

#endif
