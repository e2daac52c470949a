# model: the AlphaSTomics network around its attention and FFN plugins, its
# config, the diffusion schedule and noising, masking, losses, Kabsch.
libalphast_la_SOURCES += core/model/model.h core/model/model_internal.h core/model/model.c \
	core/model/model_config.c core/model/model_groups.c core/model/model_blocks.c core/model/model_embed.c \
	core/model/model_layer.c core/model/model_heads.c \
	core/model/loss.h core/model/loss.c core/model/loss_structure.c \
	core/model/kabsch.h core/model/kabsch.c \
	core/model/diffusion.h core/model/diffusion.c \
	core/model/masking.h core/model/masking.c core/model/masking_module.c core/model/masking_config.c \
	core/model/expr_embed.h core/model/expr_embed.c core/model/top_eigen.h core/model/top_eigen.c core/model/prior.h core/model/prior.c core/model/model_prior.c
EXTRA_DIST += core/model/README.md

check_PROGRAMS += tests/test_model tests/test_loss tests/test_loss_structure tests/test_diffusion tests/test_masking tests/test_prior \
	tests/test_top_eigen
tests_test_prior_SOURCES = tests/test_prior.c
tests_test_prior_CFLAGS = $(TEST_CC)
tests_test_prior_LDADD = $(TEST_LIBS)
tests_test_top_eigen_SOURCES = tests/test_top_eigen.c
tests_test_top_eigen_CFLAGS = $(TEST_CC)
tests_test_top_eigen_LDADD = $(TEST_LIBS)
tests_test_model_SOURCES = tests/test_model.c tests/model_fixture.c tests/model_fixture.h
tests_test_model_CFLAGS = $(TEST_CC)
tests_test_model_LDADD = $(TEST_LIBS)
tests_test_loss_SOURCES = tests/test_loss.c
tests_test_loss_CFLAGS = $(TEST_CC)
tests_test_loss_LDADD = $(TEST_LIBS)
tests_test_loss_structure_SOURCES = tests/test_loss_structure.c
tests_test_loss_structure_CFLAGS = $(TEST_CC)
tests_test_loss_structure_LDADD = $(TEST_LIBS)
tests_test_diffusion_SOURCES = tests/test_diffusion.c
tests_test_diffusion_CFLAGS = $(TEST_CC)
tests_test_diffusion_LDADD = $(TEST_LIBS)
tests_test_masking_SOURCES = tests/test_masking.c tests/train_fixture.c tests/train_fixture.h
tests_test_masking_CFLAGS = $(TEST_CC)
tests_test_masking_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/test_model_golden
tests_test_model_golden_SOURCES = tests/test_model_golden.c tests/model_fixture.c tests/model_fixture.h
tests_test_model_golden_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_model_golden_LDADD = $(TEST_LIBS) $(CJSON_LIBS)
EXTRA_DIST += tests/data/model/base.yaml tests/data/model/gated_moe.yaml
