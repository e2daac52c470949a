# Diffusion, data, optimisation and the training loop.
libalphast_la_SOURCES += core/diffusion.c
noinst_HEADERS += core/include/alphast/diffusion.h

check_PROGRAMS += tests/test_diffusion
tests_test_diffusion_SOURCES = tests/test_diffusion.c
tests_test_diffusion_CFLAGS = $(TEST_CC)
tests_test_diffusion_LDADD = $(TEST_LIBS)

libalphast_la_SOURCES += core/optim.c
noinst_HEADERS += core/include/alphast/optim.h
check_PROGRAMS += tests/test_optim
tests_test_optim_SOURCES = tests/test_optim.c
tests_test_optim_CFLAGS = $(TEST_CC)
tests_test_optim_LDADD = $(TEST_LIBS)
