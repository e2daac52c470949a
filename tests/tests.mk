# The core tests (their shared helpers are in testkit/testkit.mk).

EXTRA_DIST += tests/lsan.supp
# Header-only helpers some tests include (the GEMM references, a CPU
# backend that declines one op).
EXTRA_DIST += tests/gemm_reference.h tests/backend_without.h

# The layering rule (core/LAYERS): no include points up.
TESTS += tests/check_layers.sh
EXTRA_DIST += tests/check_layers.sh core/LAYERS

# The map stays true: every path docs/architecture.md's "To change X, edit
# Y" table names exists.
TESTS += tests/check_doc_paths.sh
EXTRA_DIST += tests/check_doc_paths.sh

# The grouped expert GEMM (issue 13 item 3): an engine op, so its test links
# the engine library alone, as the other op tests (core/engine/engine.mk).
check_PROGRAMS += tests/test_ops_grouped
tests_test_ops_grouped_SOURCES = tests/test_ops_grouped.c
tests_test_ops_grouped_CFLAGS = $(TEST_CC)
tests_test_ops_grouped_LDADD = $(ENGINE_TEST_LIBS)
check_PROGRAMS += tests/test_ops_moe
tests_test_ops_moe_SOURCES = tests/test_ops_moe.c
tests_test_ops_moe_CFLAGS = $(TEST_CC)
tests_test_ops_moe_LDADD = $(ENGINE_TEST_LIBS)

# The progress bar's width on narrow terminals (core/base/progress.c).
check_PROGRAMS += tests/test_progress
tests_test_progress_SOURCES = tests/test_progress.c
tests_test_progress_CFLAGS = $(TEST_CC)
tests_test_progress_LDADD = $(TEST_LIBS)

# Results that join back (issue 12 item 3): what weights and checkpoints say
# about themselves, training.init_from, and the lines of metrics.jsonl.
check_PROGRAMS += tests/test_join
tests_test_join_SOURCES = tests/test_join.c tests/train_fixture.c tests/train_fixture.h
tests_test_join_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_join_LDADD = $(TEST_LIBS) $(CJSON_LIBS)

# The round trip .h5ad -> train -> sample -> anndata keeps obs_names and obs
# (skips without /usr/bin/python3's anndata: Debian's python3-anndata).
TESTS += tests/test_anndata_roundtrip.sh
EXTRA_DIST += tests/test_anndata_roundtrip.sh tests/anndata_roundtrip.py

# logging.logger: tensorboard (issue 24 item 6): a resumed run's events files
# decoded by protoc's classes of TensorBoard's Event, CRCs included, against
# its metrics.jsonl (skips without Debian's protobuf-compiler and
# python3-protobuf).
TESTS += tests/test_tensorboard.sh
EXTRA_DIST += tests/test_tensorboard.sh tests/tensorboard_events.py tests/proto/event.proto tests/proto/summary.proto

# AnnData files as the anndata library writes them, 0.7 to 0.10 (issue 12
# item 1): tests/data/anndata, made by its make.py.
check_PROGRAMS += tests/test_anndata
tests_test_anndata_SOURCES = tests/test_anndata.c
tests_test_anndata_CFLAGS = $(TEST_CC) $(HDF5_CFLAGS)
tests_test_anndata_LDADD = $(TEST_LIBS) $(HDF5_LIBS)
EXTRA_DIST += tests/data/anndata/README.md tests/data/anndata/make.py tests/data/anndata/index_named.h5ad \
	tests/data/anndata/obsm_dataframe.h5ad tests/data/anndata/lzf.h5ad tests/data/anndata/nan_category.h5ad \
	tests/data/anndata/obs_columns.h5ad tests/data/anndata/scanpy_state.h5ad tests/data/anndata/x_without_indptr.h5ad \
	tests/data/anndata/var_index_missing.h5ad tests/data/anndata/anndata_0.7.h5ad tests/data/anndata/anndata_0.7.0.h5ad \
	tests/data/anndata/dup_categories.h5ad tests/data/anndata/not_utf8.h5ad tests/data/anndata/dup_var_names.h5ad \
	tests/data/anndata/layer_rows.h5ad tests/data/anndata/nullable_strings.h5ad

# The bf16 mode (training.precision: bf16-mixed): a training run's losses
# against float32's (skips without oneDNN or AVX512-BF16 / AMX; the GEMM
# and op tests are tests/test_bf16, with the engine's).
check_PROGRAMS += tests/test_train_bf16
tests_test_train_bf16_SOURCES = tests/test_train_bf16.c tests/train_fixture.c tests/train_fixture.h
tests_test_train_bf16_CFLAGS = $(TEST_CC)
tests_test_train_bf16_LDADD = $(TEST_LIBS)

# One run over MPI (docs/cluster.md): the real mpirun's two ranks against
# one process, ZeRO-1 against replicated state, kill and resume. Only with
# configure --with-mpi; test_mpi_parts, the pieces that need no MPI, always.
check_PROGRAMS += tests/test_mpi_parts
tests_test_mpi_parts_SOURCES = tests/test_mpi_parts.c
tests_test_mpi_parts_CFLAGS = $(TEST_CC)
tests_test_mpi_parts_LDADD = $(TEST_LIBS)
if HAVE_MPI
check_PROGRAMS += tests/test_mpi
tests_test_mpi_SOURCES = tests/test_mpi.c tests/test_files.c tests/test_files.h
tests_test_mpi_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS) -DALPHAST_MPIRUN='"$(MPIRUN)"'
tests_test_mpi_LDADD = $(TEST_LIBS) $(CJSON_LIBS)
# The same over ranks on GPUs (docs/gpu.md): skips (77) without CUDA or a
# GPU; runs outside make check too, given ALPHAST_RUN and MPIRUN.
TESTS += tests/test_mpi_cuda.sh
endif
EXTRA_DIST += tests/test_mpi_cuda.sh
# Runs of a sweep sharing a GPU under its CUDA MPS daemon (docs/gpu.md):
# skips (77) without a GPU; runs outside make check too, given ALPHAST_RUN.
TESTS += tests/test_sweep_mps.sh
EXTRA_DIST += tests/test_sweep_mps.sh

# Sweeps on Slurm (docs/cluster.md): the executor's options, batch script,
# --status and a warned worker without Slurm (test_slurm); then a one-node
# cluster of the real daemons (scripts/slurm-local.sh) runs the quick
# ablation to the local executor's report and a preempted sweep to the
# uninterrupted losses (test_slurm.sh; skips, 77, unless root with slurm-wlm
# and munge).
check_PROGRAMS += tests/test_slurm
tests_test_slurm_SOURCES = tests/test_slurm.c tests/test_files.c tests/test_files.h
tests_test_slurm_CFLAGS = $(TEST_CC)
tests_test_slurm_LDADD = $(TEST_LIBS)
TESTS += tests/test_slurm.sh
EXTRA_DIST += tests/test_slurm.sh scripts/slurm-local.sh tests/data/sweeps/slurm.lua tests/data/sweeps/slurm_preempt.lua

# The CUDA backend against the CPU backend (issue 15): every op of ops.def,
# forward and backward, on NaN-filled memory, twice (test_cuda_ops, engine
# only); training steps of the four configs, the gated attention's and the
# MoE's kernels (test_cuda_model); the trainer's step as a CUDA graph against
# op by op (test_cuda_train); the sampler's reverse step replayed against op by
# op and against the CPU (test_cuda_sample). Every test is skipped, saying why, in a
# build without CUDA or on a machine without a GPU.
check_PROGRAMS += tests/test_cuda_ops tests/test_cuda_model tests/test_cuda_train tests/test_cuda_sample
tests_test_cuda_ops_SOURCES = tests/test_cuda_ops.c tests/cuda_fixture.c tests/cuda_fixture.h
tests_test_cuda_ops_CFLAGS = $(TEST_CC)
tests_test_cuda_ops_LDADD = $(ENGINE_TEST_LIBS)
tests_test_cuda_model_SOURCES = tests/test_cuda_model.c tests/cuda_fixture.c tests/cuda_fixture.h \
	tests/model_fixture.c tests/model_fixture.h
tests_test_cuda_model_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/attention
tests_test_cuda_model_CFLAGS = $(TEST_CC)
tests_test_cuda_model_LDADD = $(TEST_LIBS) $(LTDL_LIBS)
tests_test_cuda_train_SOURCES = tests/test_cuda_train.c tests/cuda_fixture.c tests/cuda_fixture.h \
	tests/train_fixture.c tests/train_fixture.h
tests_test_cuda_train_CFLAGS = $(TEST_CC)
tests_test_cuda_train_LDADD = $(TEST_LIBS)
tests_test_cuda_sample_SOURCES = tests/test_cuda_sample.c tests/cuda_fixture.c tests/cuda_fixture.h \
	tests/model_fixture.c tests/model_fixture.h
tests_test_cuda_sample_CFLAGS = $(TEST_CC)
tests_test_cuda_sample_LDADD = $(TEST_LIBS) $(LTDL_LIBS)
