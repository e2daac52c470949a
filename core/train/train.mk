# train: the training loop, validation, AdamW and its schedule, checkpoints
# and resume, and the monitors' side of the loop.
libalphast_la_SOURCES += core/train/train.h core/train/train_internal.h core/train/train.c \
	core/train/train_val.c core/train/train_ckpt.c core/train/train_stop.h core/train/train_stop.c core/train/train_config.c core/train/train_recipe.c core/train/split_protocol.c core/train/train_monitors.c \
	core/train/train_tboard.c \
	core/train/schedule_table.h core/train/schedule_table.c \
	core/train/optim.h core/train/optim.c core/train/train_graph.h core/train/train_graph.c \
	core/train/train_dist.h core/train/train_dist_launch.c core/train/train_dist_loop.h core/train/train_dist_loop.c \
	core/train/train_ckpt.h core/train/train_dist_ckpt.c core/train/metrics_jsonl.h core/train/metrics_jsonl.c
# The ranks of a run: over MPI (configure --with-mpi), else this process alone.
if HAVE_MPI
libalphast_la_SOURCES += core/train/train_dist_mpi.c
libalphast_la_CFLAGS += $(MPI_CFLAGS)
libalphast_la_LIBADD += $(MPI_LIBS)
else
libalphast_la_SOURCES += core/train/train_dist_solo.c
endif
# Ranks on GPUs: each binds its GPU (train_dist_device.c); NCCL, where
# configure found it, sums between distinct GPUs.
libalphast_la_SOURCES += core/train/train_dist_device.c core/train/train_dist_nccl.h
if HAVE_NCCL
libalphast_la_SOURCES += core/train/train_dist_nccl.c
libalphast_la_CFLAGS += $(CUDA_CPPFLAGS)
libalphast_la_LIBADD += $(NCCL_LIBS)
endif
EXTRA_DIST += core/train/README.md

check_PROGRAMS += tests/test_optim tests/test_train
tests_test_optim_SOURCES = tests/test_optim.c
tests_test_optim_CFLAGS = $(TEST_CC)
tests_test_optim_LDADD = $(TEST_LIBS)
tests_test_train_SOURCES = tests/test_train.c tests/test_files.c tests/test_files.h tests/train_fixture.c tests/train_fixture.h
tests_test_train_CFLAGS = $(TEST_CC)
tests_test_train_LDADD = $(TEST_LIBS)
