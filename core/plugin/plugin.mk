# plugin: finding, loading (libltdl) and checking plugins and their options.
libalphast_la_SOURCES += core/plugin/loader.h core/plugin/plugin_internal.h core/plugin/plugin_loader.c \
	core/plugin/plugin_search.c core/plugin/plugin_check.c core/plugin/plugin_options.c core/plugin/plugin_provenance.c
EXTRA_DIST += core/plugin/README.md

# Loader test fixtures: tiny plugins built only for `make check`, each
# exercising one thing the loader must accept or refuse.
LOADER_FIXTURE_LINK = $(PLUGIN_LINK) -rpath /nowhere
check_LTLIBRARIES += tests/plugins/attn_fixture.la tests/plugins/attn_badabi.la tests/plugins/attn_badsize.la \
	tests/plugins/attn_newminor.la tests/plugins/attn_noentry.la tests/plugins/attn_wrongkind.la \
	tests/plugins/attn_badopts.la tests/plugins/monitor_legacy.la tests/plugins/attn_abi20.la \
	tests/plugins/ffn_evil.la
tests_plugins_attn_fixture_la_SOURCES = tests/plugins/attn_fixture.c
tests_plugins_attn_fixture_la_CPPFLAGS = $(PLUGIN_CPP)
tests_plugins_attn_fixture_la_LDFLAGS = $(LOADER_FIXTURE_LINK)
tests_plugins_attn_badabi_la_SOURCES = tests/plugins/attn_badabi.c
tests_plugins_attn_badabi_la_CPPFLAGS = $(PLUGIN_CPP)
tests_plugins_attn_badabi_la_LDFLAGS = $(LOADER_FIXTURE_LINK)
tests_plugins_attn_badsize_la_SOURCES = tests/plugins/attn_badsize.c
tests_plugins_attn_badsize_la_CPPFLAGS = $(PLUGIN_CPP)
tests_plugins_attn_badsize_la_LDFLAGS = $(LOADER_FIXTURE_LINK)
tests_plugins_attn_newminor_la_SOURCES = tests/plugins/attn_newminor.c
tests_plugins_attn_newminor_la_CPPFLAGS = $(PLUGIN_CPP)
tests_plugins_attn_newminor_la_LDFLAGS = $(LOADER_FIXTURE_LINK)
tests_plugins_attn_noentry_la_SOURCES = tests/plugins/attn_noentry.c
tests_plugins_attn_noentry_la_CPPFLAGS = $(PLUGIN_CPP)
tests_plugins_attn_noentry_la_LDFLAGS = $(LOADER_FIXTURE_LINK)
tests_plugins_attn_wrongkind_la_SOURCES = tests/plugins/attn_wrongkind.c
tests_plugins_attn_wrongkind_la_CPPFLAGS = $(PLUGIN_CPP)
tests_plugins_attn_wrongkind_la_LDFLAGS = $(LOADER_FIXTURE_LINK)
tests_plugins_attn_badopts_la_SOURCES = tests/plugins/attn_badopts.c
tests_plugins_attn_badopts_la_CPPFLAGS = $(PLUGIN_CPP)
tests_plugins_attn_badopts_la_LDFLAGS = $(LOADER_FIXTURE_LINK)
tests_plugins_monitor_legacy_la_SOURCES = tests/plugins/monitor_legacy.c
tests_plugins_monitor_legacy_la_CPPFLAGS = $(PLUGIN_CPP)
tests_plugins_monitor_legacy_la_LDFLAGS = $(LOADER_FIXTURE_LINK)

# Built against the frozen ABI 2.0 headers, not include/: an older plugin.
tests_plugins_attn_abi20_la_SOURCES = tests/plugins/attn_abi20.c
tests_plugins_attn_abi20_la_CPPFLAGS = -I$(top_srcdir)/tests/plugins/abi-2.0
tests_plugins_attn_abi20_la_LDFLAGS = $(LOADER_FIXTURE_LINK)
EXTRA_DIST += tests/plugins/abi-2.0/alphast/plugin.h tests/plugins/abi-2.0/alphast/abi_layout.h \
	tests/plugins/abi-2.0/alphast/ops.def

tests_plugins_ffn_evil_la_SOURCES = tests/plugins/ffn_evil.c
tests_plugins_ffn_evil_la_CPPFLAGS = $(PLUGIN_CPP)
tests_plugins_ffn_evil_la_LDFLAGS = $(LOADER_FIXTURE_LINK)

check_PROGRAMS += tests/test_plugin_faults
tests_test_plugin_faults_SOURCES = tests/test_plugin_faults.c
tests_test_plugin_faults_CFLAGS = $(TEST_CC)
tests_test_plugin_faults_LDADD = $(TEST_LIBS)
EXTRA_DIST += tests/data/faults/tiny.yaml

check_PROGRAMS += tests/test_abi
tests_test_abi_SOURCES = tests/test_abi.c tests/test_files.c tests/test_files.h
tests_test_abi_CFLAGS = $(TEST_CC)
tests_test_abi_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/test_loader
tests_test_loader_SOURCES = tests/test_loader.c
tests_test_loader_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_loader_LDADD = $(TEST_LIBS) $(CJSON_LIBS)

# pkg-config prefers <name>-uninstalled.pc when PKG_CONFIG_PATH holds the
# build tree, so plugins build against the source tree's headers before
# `make install`; test_out_of_tree does exactly that.
noinst_DATA = alphast-plugin-uninstalled.pc
CLEANFILES += alphast-plugin-uninstalled.pc
alphast-plugin-uninstalled.pc: Makefile
	$(AM_V_GEN)printf '%s\n' 'Name: alphast-plugin' \
	  'Description: Header for alphast plugins, from the build tree (uninstalled)' \
	  'Version: $(PACKAGE_VERSION)' 'Cflags: -I$(abs_top_srcdir)/include' >$@

check_PROGRAMS += tests/test_out_of_tree
tests_test_out_of_tree_SOURCES = tests/test_out_of_tree.c
tests_test_out_of_tree_CPPFLAGS = $(AM_CPPFLAGS) -DAST_TEST_CC='"$(CC)"' -DAST_TEST_PKG_CONFIG='"$(PKG_CONFIG)"'
tests_test_out_of_tree_CFLAGS = $(TEST_CC)
tests_test_out_of_tree_LDADD = $(TEST_LIBS)
