# The AlphaSTomics network around its attention and FFN plugins, and the diffusion loss.
libalphast_la_SOURCES += core/model.c core/model_groups.c core/model_blocks.c core/model_embed.c core/model_layer.c \
	core/model_heads.c core/loss.c core/loss_aligned.c
noinst_HEADERS += core/model_internal.h core/include/alphast/loss.h

check_PROGRAMS += tests/test_model tests/test_loss
tests_test_model_SOURCES = tests/test_model.c tests/model_fixture.c tests/model_fixture.h
tests_test_model_CFLAGS = $(TEST_CC)
tests_test_model_LDADD = $(TEST_LIBS)
tests_test_loss_SOURCES = tests/test_loss.c
tests_test_loss_CFLAGS = $(TEST_CC)
tests_test_loss_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/test_model_golden
tests_test_model_golden_SOURCES = tests/test_model_golden.c tests/model_fixture.c tests/model_fixture.h
tests_test_model_golden_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_model_golden_LDADD = $(TEST_LIBS) $(CJSON_LIBS)

check_PROGRAMS += tests/test_cli_model
tests_test_cli_model_SOURCES = tests/test_cli_model.c
tests_test_cli_model_CFLAGS = $(TEST_CC)
tests_test_cli_model_LDADD = $(TEST_LIBS)
EXTRA_DIST += tests/data/model/base.yaml tests/data/model/gated_moe.yaml
