# What `make install` puts under $(includedir)/alphast: the plugin ABI and
# the kit plugin authors build against (docs/plugin-guide.md).
pkginclude_HEADERS += include/alphast/plugin.h include/alphast/plugin_api.h include/alphast/abi_layout.h \
	include/alphast/ops.def include/alphast/fastmath.h
# The test fixture's header (libalphast-plugintest, testkit/).
pkginclude_HEADERS += include/alphast/plugin_test.h
