# train: the training loop, validation, AdamW and its schedule, checkpoints
# and resume, and the monitors' side of the loop.
libalphast_la_SOURCES += core/train/train.h core/train/train_internal.h core/train/train.c \
	core/train/train_val.c core/train/train_ckpt.c core/train/train_config.c core/train/train_monitors.c \
	core/train/schedule_table.h core/train/schedule_table.c \
	core/train/optim.h core/train/optim.c
EXTRA_DIST += core/train/README.md

check_PROGRAMS += tests/test_optim tests/test_train
tests_test_optim_SOURCES = tests/test_optim.c
tests_test_optim_CFLAGS = $(TEST_CC)
tests_test_optim_LDADD = $(TEST_LIBS)
tests_test_train_SOURCES = tests/test_train.c tests/train_fixture.c tests/train_fixture.h
tests_test_train_CFLAGS = $(TEST_CC)
tests_test_train_LDADD = $(TEST_LIBS)
