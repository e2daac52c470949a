# Shared test helpers and the core tests.
check_LTLIBRARIES += tests/libgradcheck.la
tests_libgradcheck_la_SOURCES = tests/gradcheck.c tests/gradcheck.h
tests_libgradcheck_la_CFLAGS = $(AM_CFLAGS)

check_PROGRAMS += tests/test_ops_linalg
tests_test_ops_linalg_SOURCES = tests/test_ops_linalg.c
tests_test_ops_linalg_CFLAGS = $(TEST_CC)
tests_test_ops_linalg_LDADD = $(TEST_LIBS)
EXTRA_DIST += tests/lsan.supp
