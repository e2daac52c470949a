# alphast-run: main.c dispatches to the subcommands listed in commands.c,
# one file cmd_<name>.c each; cli_args.c parses options and prints --help.
bin_PROGRAMS += alphast-run
alphast_run_SOURCES = cli/main.c cli/commands.c cli/commands.h \
	cli/cli.h cli/cli_args.c cli/cmd_plugins.c cli/cmd_train.c \
	cli/cmd_params.c cli/cmd_forward.c cli/cmd_report.c \
	cli/cmd_sweep.c cli/sweep_pool.c cli/sweep_pool.h cli/sweep_slurm.c cli/sweep_slurm.h \
	cli/sweep_status.c cli/sweep_status.h cli/sweep_gpus.c cli/sweep_gpus.h \
	cli/sweep_mps.c cli/sweep_mps.h
alphast_run_LDADD = libalphast.la
# Commands on trained runs (evaluation, sampling) and what they share with train.
alphast_run_SOURCES += cli/run_setup.c cli/run_setup.h cli/cmd_eval.c cli/cmd_sample.c cli/cmd_predict.c \
	cli/sample_write.c cli/sample_write.h

check_PROGRAMS += tests/test_cli
tests_test_cli_SOURCES = tests/test_cli.c
tests_test_cli_CFLAGS = $(TEST_CC)
tests_test_cli_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/test_cli_model
tests_test_cli_model_SOURCES = tests/test_cli_model.c
tests_test_cli_model_CFLAGS = $(TEST_CC)
tests_test_cli_model_LDADD = $(TEST_LIBS)
EXTRA_DIST += cli/README.md

# alphast-run predict on new cells (tests/predict_check.py writes and reads
# the .h5ad files; skips without /usr/bin/python3's anndata).
TESTS += tests/test_predict.sh
EXTRA_DIST += tests/test_predict.sh tests/predict_check.py
