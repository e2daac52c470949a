# config: YAML (libyaml) into a validated, typed tree; overrides; dumping.
noinst_LTLIBRARIES += libalphast.la
libalphast_la_SOURCES = \
	core/config/config.h core/config/config_impl.h core/config/config_tree.c core/config/config_schema.c \
	core/config/config_validate.c core/config/config_access.c core/config/config_dump.c \
	core/config/config_hydra.c core/config/config_sweep.c core/config/config_edit.c \
	core/config/config_compare.c core/config/config_support.c
libalphast_la_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS) $(YAML_CFLAGS) $(HDF5_CFLAGS) $(LUA_CFLAGS) $(CJSON_CFLAGS) $(ZLIB_CFLAGS)
libalphast_la_LIBADD = libalphast_engine.la $(BLAS_LIBS) $(YAML_LIBS) $(HDF5_LIBS) $(LUA_LIBS) $(CJSON_LIBS) \
	$(ZLIB_LIBS) $(NETTLE_LIBS) $(LTDL_LIBS) -lm
EXTRA_DIST += core/config/README.md

check_PROGRAMS += tests/test_config
tests_test_config_SOURCES = tests/test_config.c
tests_test_config_CFLAGS = $(TEST_CC)
tests_test_config_LDADD = $(TEST_LIBS)
EXTRA_DIST += tests/data/reference_config.yaml tests/data/config_bad/deep_nesting_30000.yaml \
	tests/data/config_bad/nonutf8_key.yaml tests/data/config_bad/override_nonutf8_key.txt
