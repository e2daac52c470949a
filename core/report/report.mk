# report: the ablation report of a sweep directory (`alphast-run report`)
# and the statistics it rests on (Welch t-test, Student t CDF and quantile,
# MDD, bootstrap interval, Holm's correction).
libalphast_la_SOURCES += core/report/report.h core/report/report_internal.h core/report/stats.h \
	core/report/stats.c core/report/report.c core/report/report_load.c core/report/report_run.c \
	core/report/report_stats.c core/report/report_warn.c core/report/report_curves.c core/report/report_svg.c \
	core/report/report_doc.c core/report/report_figures.c core/report/report_verdict.c core/report/report_body.c \
	core/report/report_eval.c core/report/report_family.c core/report/report_tables.c \
	core/report/report_standing.c core/report/report_dots.c core/report/report_axis.c \
	core/report/report_routing.c core/report/report_heatmap.c core/report/report_configs.c \
	core/report/report_repeats.c core/report/report_csv.c \
	core/report/report_placement.c core/report/report_provenance.c
EXTRA_DIST += core/report/README.md

check_PROGRAMS += tests/test_stats tests/test_report
tests_test_stats_SOURCES = tests/test_stats.c
tests_test_stats_CFLAGS = $(TEST_CC)
tests_test_stats_LDADD = $(TEST_LIBS)
tests_test_report_SOURCES = tests/test_report.c tests/test_files.c tests/test_files.h
tests_test_report_CFLAGS = $(TEST_CC)
tests_test_report_LDADD = $(TEST_LIBS)

# The four-config ablation on the bundled data (run with alphast-run sweep).
dist_noinst_SCRIPTS += scripts/ablation.lua
EXTRA_DIST += docs/report.md
