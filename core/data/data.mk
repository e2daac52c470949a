# data: reading tissue (AnnData .h5ad through libhdf5, CSV), preprocessing,
# splits, set sampling and the preprocessing cache.
libalphast_la_SOURCES += core/data/data.h core/data/data_h5ad.c core/data/data_csv.c core/data/data_prep.c \
	core/data/data_sets.c core/data/data_cache.c
EXTRA_DIST += core/data/README.md

check_PROGRAMS += tests/test_data
tests_test_data_SOURCES = tests/test_data.c
tests_test_data_CFLAGS = $(TEST_CC) $(HDF5_CFLAGS)
tests_test_data_LDADD = $(TEST_LIBS) $(HDF5_LIBS)

# Shipped with the program: the bundled datasets (MIT, see their READMEs) and configs.
nobase_dist_pkgdata_DATA = configs/starmap.yaml configs/visium.yaml \
	data/starmap3d/starmap3d.h5ad data/starmap3d/expr.txt.gz data/starmap3d/loc.txt data/starmap3d/README.md \
	data/visium_prostate/visium_prostate.h5ad data/visium_prostate/README.md
