# Masked diffusion (spec §5): masks, learnable mask tokens, reconstruction loss.
libalphast_la_SOURCES += core/masking.c core/masking_module.c core/masking_config.c
noinst_HEADERS += core/include/alphast/masking.h

check_PROGRAMS += tests/test_masking
tests_test_masking_SOURCES = tests/test_masking.c tests/train_fixture.c tests/train_fixture.h
tests_test_masking_CFLAGS = $(TEST_CC)
tests_test_masking_LDADD = $(TEST_LIBS)
