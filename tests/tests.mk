# Shared test helpers and the core tests.
check_LTLIBRARIES += tests/libgradcheck.la
tests_libgradcheck_la_SOURCES = tests/gradcheck.c tests/gradcheck.h
tests_libgradcheck_la_CFLAGS = $(AM_CFLAGS)

EXTRA_DIST += tests/lsan.supp

# The layering rule (core/LAYERS): no include points up.
TESTS += tests/check_layers.sh
EXTRA_DIST += tests/check_layers.sh core/LAYERS
