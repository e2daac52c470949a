# Attention plugins: attn_linear (lucidrains linear attention), attn_gated
# (gated softmax attention with a fused tiled core) and attn_geodesic
# (softmax attention biased by expression-graph distances), and their tests.
plugin_LTLIBRARIES += plugins/attention/attn_linear.la plugins/attention/attn_gated.la plugins/attention/attn_geodesic.la
plugins_attention_attn_linear_la_SOURCES = plugins/attention/attn_linear.c
plugins_attention_attn_linear_la_CPPFLAGS = $(PLUGIN_CPP)
plugins_attention_attn_linear_la_LDFLAGS = $(PLUGIN_LINK)
plugins_attention_attn_linear_la_LIBADD = -lm

plugins_attention_attn_geodesic_la_SOURCES = plugins/attention/attn_geodesic.c
plugins_attention_attn_geodesic_la_CPPFLAGS = $(PLUGIN_CPP)
plugins_attention_attn_geodesic_la_LDFLAGS = $(PLUGIN_LINK)
plugins_attention_attn_geodesic_la_LIBADD = -lm

plugins_attention_attn_gated_la_SOURCES = plugins/attention/attn_gated.c \
	plugins/attention/attn_gated_kernel.c plugins/attention/attn_gated_kernel.h plugins/attention/attn_dropout.h
plugins_attention_attn_gated_la_CPPFLAGS = $(PLUGIN_CPP)
plugins_attention_attn_gated_la_CFLAGS = $(AM_CFLAGS) $(FASTMATH_CFLAGS)
plugins_attention_attn_gated_la_LDFLAGS = $(PLUGIN_LINK)
plugins_attention_attn_gated_la_LIBADD = -lm
# Its CUDA kernel (configure --with-cuda): an nvcc object (Makefile.am's .cu.lo rule).
EXTRA_DIST += plugins/attention/attn_gated_cuda.cu
if HAVE_CUDA
ATTN_CUDA_OBJECTS = plugins/attention/attn_gated_cuda.lo
CUDA_OBJECTS += $(ATTN_CUDA_OBJECTS)
plugins_attention_attn_gated_la_LIBADD += $(ATTN_CUDA_OBJECTS) $(CUDA_LIBS)
EXTRA_plugins_attention_attn_gated_la_DEPENDENCIES = $(ATTN_CUDA_OBJECTS)
$(ATTN_CUDA_OBJECTS): plugins/attention/attn_gated_kernel.h plugins/attention/attn_dropout.h \
	include/alphast/plugin.h include/alphast/plugin_api.h include/alphast/abi_layout.h include/alphast/ops.def
endif

# Shared by the plugin tests: loads a plugin from the build tree.
ATTN_TEST_SOURCES = tests/plugin_fixture.c tests/plugin_fixture.h tests/attn_reference.c tests/attn_reference.h

check_PROGRAMS += tests/test_attn_linear tests/test_attn_gated tests/test_attn_geodesic
tests_test_attn_geodesic_SOURCES = tests/test_attn_geodesic.c $(ATTN_TEST_SOURCES)
tests_test_attn_geodesic_CFLAGS = $(TEST_CC)
tests_test_attn_geodesic_LDADD = $(TEST_LIBS) $(LTDL_LIBS)
tests_test_attn_linear_SOURCES = tests/test_attn_linear.c $(ATTN_TEST_SOURCES)
tests_test_attn_linear_CFLAGS = $(TEST_CC)
tests_test_attn_linear_LDADD = $(TEST_LIBS) $(LTDL_LIBS)
# The test also drives the fused kernel directly, found in the plugin's kernels table.
tests_test_attn_gated_SOURCES = tests/test_attn_gated.c $(ATTN_TEST_SOURCES) plugins/attention/attn_gated_kernel.h
tests_test_attn_gated_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/plugins/attention
tests_test_attn_gated_CFLAGS = $(TEST_CC)
tests_test_attn_gated_LDADD = $(TEST_LIBS) $(LTDL_LIBS)

check_PROGRAMS += tests/test_attn_golden
tests_test_attn_golden_SOURCES = tests/test_attn_golden.c tests/plugin_fixture.c tests/plugin_fixture.h
tests_test_attn_golden_CFLAGS = $(TEST_CC)
tests_test_attn_golden_LDADD = $(TEST_LIBS) $(LTDL_LIBS)
