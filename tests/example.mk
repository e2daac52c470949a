# The example out-of-tree plugin and the plugin author's guide. The example
# is not built here: its test builds it with its own Makefile and
# pkg-config, as an author outside this tree would.
EXTRA_DIST += examples/attn_distbias/attn_distbias.c examples/attn_distbias/monitor_distbias.c \
	examples/attn_distbias/Makefile examples/attn_distbias/README.md docs/plugin-guide.md

check_PROGRAMS += tests/test_example_plugin
tests_test_example_plugin_SOURCES = tests/test_example_plugin.c tests/test_files.c tests/test_files.h tests/distbias_reference.c \
	tests/attn_reference.c tests/attn_reference.h \
	tests/distbias_reference.h tests/plugin_fixture.c tests/plugin_fixture.h
tests_test_example_plugin_CPPFLAGS = $(AM_CPPFLAGS) -DAST_TEST_CC='"$(CC)"' -DAST_TEST_PKG_CONFIG='"$(PKG_CONFIG)"'
# The example's own test (test_distbias.c, `make check` in its folder) links
# libalphast-plugintest: built with the sanitizers when that library is.
tests_test_example_plugin_CPPFLAGS += -DAST_TEST_SANITIZER_FLAGS='"$(SANITIZER_FLAGS)"'
EXTRA_DIST += examples/attn_distbias/test_distbias.c
tests_test_example_plugin_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_example_plugin_LDADD = $(TEST_LIBS) $(LTDL_LIBS)
