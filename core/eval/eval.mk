# eval: the reverse diffusion sampler, evaluation sets, metrics, baselines
# and held-out evaluation (eval.json).
libalphast_la_SOURCES += core/eval/sample.h core/eval/sample.c core/eval/sample_device.h core/eval/sample_device.c core/eval/sample_axes.c \
	core/eval/metrics.h core/eval/metrics_internal.h core/eval/metrics.c core/eval/metrics_spatial.c \
	core/eval/metrics_graph.c core/eval/metric_table.c core/eval/eval_sets.h core/eval/eval_sets.c core/eval/eval_val.h core/eval/eval_val.c \
	core/eval/stitch.h core/eval/stitch.c \
	core/eval/evaluate.h core/eval/evaluate_internal.h core/eval/evaluate.c core/eval/evaluate_report.c core/eval/eval_placement.c \
	core/eval/evaluate_baselines.c core/eval/uncertainty.h core/eval/uncertainty.c core/eval/baselines.h \
	core/eval/baselines_reference.c core/eval/baselines_mlp.c
EXTRA_DIST += core/eval/README.md

check_PROGRAMS += tests/test_metrics tests/test_sample tests/test_evaluate tests/test_baselines tests/test_uncertainty
tests_test_metrics_SOURCES = tests/test_metrics.c
tests_test_metrics_CFLAGS = $(TEST_CC)
tests_test_metrics_LDADD = $(TEST_LIBS)
tests_test_sample_SOURCES = tests/test_sample.c
tests_test_sample_CFLAGS = $(TEST_CC)
tests_test_sample_LDADD = $(TEST_LIBS)
tests_test_evaluate_SOURCES = tests/test_evaluate.c
tests_test_evaluate_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_evaluate_LDADD = $(TEST_LIBS) $(CJSON_LIBS)
tests_test_baselines_SOURCES = tests/test_baselines.c
tests_test_baselines_CFLAGS = $(TEST_CC)
tests_test_baselines_LDADD = $(TEST_LIBS)
tests_test_uncertainty_SOURCES = tests/test_uncertainty.c
tests_test_uncertainty_CFLAGS = $(TEST_CC)
tests_test_uncertainty_LDADD = $(TEST_LIBS)
