# Normalisation, reductions, MoE routing and losses (block B of ops.def),
# with their tests and the tests of the core runtime (context, RNG).
libalphast_la_SOURCES += core/ops_norm.c core/ops_reduce.c core/ops_routing.c core/ops_loss.c
noinst_HEADERS += core/ops_axis.h

check_PROGRAMS += tests/test_ops_norm tests/test_ops_reduce tests/test_ops_routing tests/test_ops_loss \
	tests/test_ctx tests/test_rng
tests_test_ops_norm_SOURCES = tests/test_ops_norm.c
tests_test_ops_norm_CFLAGS = $(TEST_CC)
tests_test_ops_norm_LDADD = $(TEST_LIBS)
tests_test_ops_reduce_SOURCES = tests/test_ops_reduce.c
tests_test_ops_reduce_CFLAGS = $(TEST_CC)
tests_test_ops_reduce_LDADD = $(TEST_LIBS)
tests_test_ops_routing_SOURCES = tests/test_ops_routing.c
tests_test_ops_routing_CFLAGS = $(TEST_CC)
tests_test_ops_routing_LDADD = $(TEST_LIBS)
tests_test_ops_loss_SOURCES = tests/test_ops_loss.c
tests_test_ops_loss_CFLAGS = $(TEST_CC)
tests_test_ops_loss_LDADD = $(TEST_LIBS)
tests_test_ctx_SOURCES = tests/test_ctx.c
tests_test_ctx_CFLAGS = $(TEST_CC)
tests_test_ctx_LDADD = $(TEST_LIBS)
tests_test_rng_SOURCES = tests/test_rng.c
tests_test_rng_CFLAGS = $(TEST_CC)
tests_test_rng_LDADD = $(TEST_LIBS)
