# Diffusion, data, optimisation and the training loop.
libalphast_la_SOURCES += core/diffusion.c
noinst_HEADERS += core/include/alphast/diffusion.h

check_PROGRAMS += tests/test_diffusion
tests_test_diffusion_SOURCES = tests/test_diffusion.c
tests_test_diffusion_CFLAGS = $(TEST_CC)
tests_test_diffusion_LDADD = $(TEST_LIBS)

libalphast_la_SOURCES += core/optim.c
noinst_HEADERS += core/include/alphast/optim.h
check_PROGRAMS += tests/test_optim
tests_test_optim_SOURCES = tests/test_optim.c
tests_test_optim_CFLAGS = $(TEST_CC)
tests_test_optim_LDADD = $(TEST_LIBS)

libalphast_la_SOURCES += core/data_h5ad.c core/data_csv.c core/data_prep.c core/data_sets.c
noinst_HEADERS += core/include/alphast/data.h
check_PROGRAMS += tests/test_data
tests_test_data_SOURCES = tests/test_data.c
tests_test_data_CFLAGS = $(TEST_CC) $(HDF5_CFLAGS)
tests_test_data_LDADD = $(TEST_LIBS) $(HDF5_LIBS)

libalphast_la_SOURCES += core/progress.c core/train.c core/train_val.c core/train_ckpt.c core/train_config.c core/train_internal.h
noinst_HEADERS += core/include/alphast/progress.h core/include/alphast/train.h

# Shipped with the program: the bundled datasets (MIT, see their READMEs) and configs.
nobase_dist_pkgdata_DATA = configs/starmap.yaml configs/visium.yaml \
	data/starmap3d/starmap3d.h5ad data/starmap3d/expr.txt.gz data/starmap3d/loc.txt data/starmap3d/README.md \
	data/visium_prostate/visium_prostate.h5ad data/visium_prostate/README.md

check_PROGRAMS += tests/test_train
tests_test_train_SOURCES = tests/test_train.c tests/train_fixture.c tests/train_fixture.h
tests_test_train_CFLAGS = $(TEST_CC)
tests_test_train_LDADD = $(TEST_LIBS)

# The preprocessing cache (data.cache_dir).
libalphast_la_SOURCES += core/data_cache.c
