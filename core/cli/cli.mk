# alphast-run: main.c dispatches to the subcommands listed in commands.c,
# one file cmd_<name>.c each; cli_args.c parses options and prints --help.
bin_PROGRAMS += alphast-run
alphast_run_SOURCES = core/cli/main.c core/cli/commands.c core/cli/commands.h \
	core/cli/cli.h core/cli/cli_args.c core/cli/cmd_plugins.c core/cli/cmd_train.c \
	core/cli/cmd_params.c core/cli/cmd_forward.c core/cli/cmd_report.c \
	core/cli/cmd_sweep.c core/cli/sweep_pool.c core/cli/sweep_pool.h
alphast_run_LDADD = libalphast.la
# Commands on trained runs (evaluation, sampling) and what they share with train.
alphast_run_SOURCES += core/cli/run_setup.c core/cli/run_setup.h core/cli/cmd_eval.c core/cli/cmd_sample.c

check_PROGRAMS += tests/test_cli
tests_test_cli_SOURCES = tests/test_cli.c
tests_test_cli_CFLAGS = $(TEST_CC)
tests_test_cli_LDADD = $(TEST_LIBS)
