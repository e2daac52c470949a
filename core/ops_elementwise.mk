# Shape and elementwise ops (block A of ops.def) and their tests.
libalphast_la_SOURCES += core/ops_shape.c core/ops_elementwise.c

check_PROGRAMS += tests/test_ops_shape tests/test_ops_elementwise
tests_test_ops_shape_SOURCES = tests/test_ops_shape.c
tests_test_ops_shape_CFLAGS = $(TEST_CC)
tests_test_ops_shape_LDADD = $(TEST_LIBS)
tests_test_ops_elementwise_SOURCES = tests/test_ops_elementwise.c
tests_test_ops_elementwise_CFLAGS = $(TEST_CC)
tests_test_ops_elementwise_LDADD = $(TEST_LIBS)

# The vectorisable expf/erff and the kernel thread pool (core/parallel.c).
check_PROGRAMS += tests/test_fastmath tests/test_parallel
tests_test_fastmath_SOURCES = tests/test_fastmath.c
tests_test_fastmath_CFLAGS = $(TEST_CC)
tests_test_fastmath_LDADD = $(TEST_LIBS)
tests_test_parallel_SOURCES = tests/test_parallel.c
tests_test_parallel_CFLAGS = $(TEST_CC)
tests_test_parallel_LDADD = $(TEST_LIBS)
