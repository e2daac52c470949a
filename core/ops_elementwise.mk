# Shape and elementwise ops (block A of ops.def) and their tests.
libalphast_la_SOURCES += core/ops_shape.c core/ops_elementwise.c

check_PROGRAMS += tests/test_ops_shape tests/test_ops_elementwise
tests_test_ops_shape_SOURCES = tests/test_ops_shape.c
tests_test_ops_shape_CFLAGS = $(TEST_CC)
tests_test_ops_shape_LDADD = $(TEST_LIBS)
tests_test_ops_elementwise_SOURCES = tests/test_ops_elementwise.c
tests_test_ops_elementwise_CFLAGS = $(TEST_CC)
tests_test_ops_elementwise_LDADD = $(TEST_LIBS)
