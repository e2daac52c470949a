# The configuration layer: YAML (libyaml) into a validated, typed tree.
libalphast_la_SOURCES += \
	core/config_tree.c core/config_schema.c core/config_validate.c \
	core/config_access.c core/config_dump.c core/config_model.c \
	core/yaml_scalar.c core/did_you_mean.c core/config_impl.h
noinst_HEADERS += core/include/alphast/config.h

check_PROGRAMS += tests/test_config
tests_test_config_SOURCES = tests/test_config.c
tests_test_config_CFLAGS = $(TEST_CC)
tests_test_config_LDADD = $(TEST_LIBS)
EXTRA_DIST += tests/data/reference_config.yaml
