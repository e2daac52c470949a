# The core tests (their shared helpers are in testkit/testkit.mk).

EXTRA_DIST += tests/lsan.supp

# The layering rule (core/LAYERS): no include points up.
TESTS += tests/check_layers.sh
EXTRA_DIST += tests/check_layers.sh core/LAYERS

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

# AnnData files as the anndata library writes them, 0.7 to 0.10 (issue 12
# item 1): tests/data/anndata, made by its make.py.
check_PROGRAMS += tests/test_anndata
tests_test_anndata_SOURCES = tests/test_anndata.c
tests_test_anndata_CFLAGS = $(TEST_CC) $(HDF5_CFLAGS)
tests_test_anndata_LDADD = $(TEST_LIBS) $(HDF5_LIBS)
EXTRA_DIST += tests/data/anndata/README.md tests/data/anndata/make.py tests/data/anndata/index_named.h5ad \
	tests/data/anndata/obsm_dataframe.h5ad tests/data/anndata/lzf.h5ad tests/data/anndata/nan_category.h5ad \
	tests/data/anndata/obs_columns.h5ad tests/data/anndata/scanpy_state.h5ad tests/data/anndata/x_without_indptr.h5ad \
	tests/data/anndata/var_index_missing.h5ad tests/data/anndata/anndata_0.7.h5ad tests/data/anndata/anndata_0.7.0.h5ad
