# testkit: the plugin test fixture and the finite-difference gradient check
# (README.md). The in-tree tests link them with the core; libalphast-plugintest
# installs them, core included, for plugins built out of tree.

# The gradient check needs the engine alone, so the engine's tests link it
# with libalphast_engine.la (core/engine/engine.mk knows it by this name).
noinst_LTLIBRARIES += tests/libgradcheck.la
tests_libgradcheck_la_SOURCES = testkit/gradcheck.c testkit/gradcheck.h
tests_libgradcheck_la_CFLAGS = $(AM_CFLAGS)

# The fixture (include/alphast/plugin_test.h) over the core's plugin loader.
noinst_LTLIBRARIES += testkit/libplugintest.la
testkit_libplugintest_la_SOURCES = testkit/plugin_test.c
testkit_libplugintest_la_LIBADD = $(LTDL_LIBS)

# Both with the core merged in: libtool folds convenience libraries into a
# shared one. Only the ast_test_ API is exported; the core's own symbols
# (ast_matmul, ast_log, ...) stay inside, so they can neither clash with a
# test program's nor bind in place of a plugin's.
lib_LTLIBRARIES += libalphast-plugintest.la
libalphast_plugintest_la_SOURCES =
libalphast_plugintest_la_LIBADD = testkit/libplugintest.la tests/libgradcheck.la libalphast.la $(LTDL_LIBS)
libalphast_plugintest_la_LDFLAGS = -no-undefined -version-info 0:0:0 -export-symbols-regex '^ast_test_'
pkgconfig_DATA += alphast-plugin-test.pc

# The same for the build tree, like alphast-plugin-uninstalled.pc: with
# PKG_CONFIG_PATH at the build directory (and LD_LIBRARY_PATH at its .libs)
# an out-of-tree plugin's tests build and run before `make install`.
noinst_DATA += alphast-plugin-test-uninstalled.pc
CLEANFILES += alphast-plugin-test-uninstalled.pc
alphast-plugin-test-uninstalled.pc: Makefile
	$(AM_V_GEN)printf '%s\n' 'Name: alphast-plugin-test' \
	  'Description: Test fixture for alphast plugins, from the build tree (uninstalled)' \
	  'Version: $(PACKAGE_VERSION)' 'Requires: alphast-plugin' \
	  'Libs: -L$(abs_top_builddir)/.libs -lalphast-plugintest' >$@

EXTRA_DIST += testkit/README.md
