# FFN plugins: the reference dense FFN and the mixture of experts.
plugin_LTLIBRARIES += plugins/ffn/ffn_dense.la
plugins_ffn_ffn_dense_la_SOURCES = plugins/ffn/ffn_dense.c
plugins_ffn_ffn_dense_la_CPPFLAGS = $(PLUGIN_CPP)
plugins_ffn_ffn_dense_la_LDFLAGS = $(PLUGIN_LINK)
plugins_ffn_ffn_dense_la_LIBADD = -lm

plugin_LTLIBRARIES += plugins/ffn/ffn_moe.la
plugins_ffn_ffn_moe_la_SOURCES = plugins/ffn/ffn_moe.c plugins/ffn/moe.h plugins/ffn/moe_expert.c \
	plugins/ffn/moe_router.c plugins/ffn/moe_device.c plugins/ffn/moe_dispatch.c plugins/ffn/moe_combine.c plugins/ffn/moe_combine_ops.c \
	plugins/ffn/moe_combine.h
plugins_ffn_ffn_moe_la_CPPFLAGS = $(PLUGIN_CPP)
plugins_ffn_ffn_moe_la_LDFLAGS = $(PLUGIN_LINK)
plugins_ffn_ffn_moe_la_LIBADD = -lm

# Tests load the plugins above from the build tree through libltdl.
check_PROGRAMS += tests/test_ffn_dense tests/test_ffn_moe
tests_test_ffn_dense_SOURCES = tests/test_ffn_dense.c tests/ffn_fixture.c tests/ffn_fixture.h
tests_test_ffn_dense_CFLAGS = $(TEST_CC)
tests_test_ffn_dense_LDADD = $(TEST_LIBS) $(LTDL_LIBS) -lm
tests_test_ffn_moe_SOURCES = tests/test_ffn_moe.c tests/ffn_fixture.c tests/ffn_fixture.h
tests_test_ffn_moe_CFLAGS = $(TEST_CC)
tests_test_ffn_moe_LDADD = $(TEST_LIBS) $(LTDL_LIBS) -lm

# Both combine kernels are also driven directly (they need only the host
# table, which the test puts where the plugin kit looks for it).
check_PROGRAMS += tests/test_moe_combine
tests_test_moe_combine_SOURCES = tests/test_moe_combine.c plugins/ffn/moe_combine.c plugins/ffn/moe_combine_ops.c \
	plugins/ffn/moe_combine.h plugins/ffn/moe.h
tests_test_moe_combine_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/ffn
tests_test_moe_combine_CFLAGS = $(TEST_CC)
tests_test_moe_combine_LDADD = $(TEST_LIBS)
