# Sampling (the reverse process), metrics and held-out evaluation.
libalphast_la_SOURCES += core/sample.c core/metrics.c core/metrics_spatial.c core/metrics_graph.c core/metrics_internal.h \
	core/evaluate.c core/evaluate_report.c core/kabsch.c core/eval_sets.c \
	core/evaluate_baselines.c core/evaluate_internal.h
noinst_HEADERS += core/include/alphast/sample.h core/include/alphast/metrics.h core/include/alphast/evaluate.h \
	core/include/alphast/kabsch.h core/include/alphast/eval_sets.h

check_PROGRAMS += tests/test_metrics
tests_test_metrics_SOURCES = tests/test_metrics.c
tests_test_metrics_CFLAGS = $(TEST_CC)
tests_test_metrics_LDADD = $(TEST_LIBS)

libalphast_la_SOURCES += core/h5ad_write.c
noinst_HEADERS += core/include/alphast/h5ad_write.h

check_PROGRAMS += tests/test_sample
tests_test_sample_SOURCES = tests/test_sample.c
tests_test_sample_CFLAGS = $(TEST_CC)
tests_test_sample_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/test_evaluate
tests_test_evaluate_SOURCES = tests/test_evaluate.c
tests_test_evaluate_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_evaluate_LDADD = $(TEST_LIBS) $(CJSON_LIBS)

# Baselines the held-out evaluation scores next to the model.
libalphast_la_SOURCES += core/baselines_embed.c core/baselines_reference.c
noinst_HEADERS += core/include/alphast/baselines.h

check_PROGRAMS += tests/test_baselines
tests_test_baselines_SOURCES = tests/test_baselines.c
tests_test_baselines_CFLAGS = $(TEST_CC)
tests_test_baselines_LDADD = $(TEST_LIBS)
