# data: reading tissue (AnnData .h5ad through libhdf5, CSV), preprocessing,
# splits, set sampling and the preprocessing cache.
libalphast_la_SOURCES += core/data/data.h core/data/data_dataset.c core/data/data_csv.c core/data/data_prep.c \
	core/data/data_sets.c core/data/data_keyed.h core/data/data_split.c core/data/data_split.h \
	core/data/data_split_blocks.c core/data/data_split_key.c core/data/data_cache.c core/data/data_csr.c core/data/data_csr.h \
	core/data/data_labels.c core/data/data_labels.h core/data/data_sections.c core/data/data_pack.c core/data/data_pack.h core/data/data_lzf.c \
	core/data/data_h5ad.c core/data/data_h5ad.h core/data/data_h5ad_io.c core/data/data_h5ad_frame.c \
	core/data/data_h5ad_matrix.c core/data/data_h5ad_child.c
EXTRA_DIST += core/data/README.md
# Damaged AnnData files the reader must refuse cleanly (tests/data/h5ad_bad/README.md).
EXTRA_DIST += tests/data/h5ad_bad/README.md tests/data/h5ad_bad/mkmin.py \
	tests/data/h5ad_bad/var_index_2d.h5ad tests/data/h5ad_bad/shape_attr_5.h5ad \
	tests/data/h5ad_bad/enc_vlen_array.h5ad tests/data/h5ad_bad/enc_fixed_array.h5ad \
	tests/data/h5ad_bad/indptr_nonmono.h5ad tests/data/h5ad_bad/indptr_negative.h5ad \
	tests/data/h5ad_bad/negative_shape.h5ad tests/data/h5ad_bad/hdf5-hang-H5HG_read.h5ad \
	tests/data/h5ad_bad/lsan-hdf5-leak.h5ad tests/data/h5ad_bad/hdf5-vlen-huge-alloc.h5ad \
	tests/data/h5ad_bad/var_not_group_or_dataset.h5ad

check_PROGRAMS += tests/test_data tests/test_split
tests_test_split_SOURCES = tests/test_split.c
tests_test_split_CFLAGS = $(TEST_CC)
tests_test_split_LDADD = $(TEST_LIBS)
tests_test_data_SOURCES = tests/test_data.c
tests_test_data_CFLAGS = $(TEST_CC) $(HDF5_CFLAGS)
tests_test_data_LDADD = $(TEST_LIBS) $(HDF5_LIBS)

# Shipped with the program: the bundled datasets (MIT, see their READMEs) and configs.
nobase_dist_pkgdata_DATA = configs/starmap.yaml configs/visium.yaml configs/osmfish.yaml \
	data/starmap3d/starmap3d.h5ad data/starmap3d/expr.txt.gz data/starmap3d/loc.txt data/starmap3d/README.md \
	data/visium_prostate/visium_prostate.h5ad data/visium_prostate/README.md \
	data/osmfish_sscortex/osmfish_sscortex.h5ad data/osmfish_sscortex/README.md
# Malformed CSV inputs (tests/test_data.c, csv_bad): the reproducers of issue 11.
EXTRA_DIST += tests/data/csv_bad/c10_negative_counts_nan.csv tests/data/csv_bad/c15_dup_x_col.csv \
	tests/data/csv_bad/c19_gzip_trunc_at_line.csv.gz tests/data/csv_bad/ubsan-null-offset-grow.fuzz
