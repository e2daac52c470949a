# The ablation report of a sweep directory (`alphast-run report`) and the
# statistics it rests on (Welch t-test, Student t CDF and quantile, MDD,
# bootstrap interval, Holm's correction).
libalphast_la_SOURCES += core/stats.c core/report.c core/report_load.c core/report_run.c core/report_stats.c \
	core/report_warn.c core/report_curves.c core/report_svg.c core/report_doc.c core/report_figures.c \
	core/report_verdict.c core/report_body.c core/report_internal.h \
	core/report_eval.c core/report_family.c core/report_tables.c core/report_standing.c core/report_dots.c
noinst_HEADERS += core/include/alphast/report.h core/include/alphast/stats.h

check_PROGRAMS += tests/test_stats
tests_test_stats_SOURCES = tests/test_stats.c
tests_test_stats_CFLAGS = $(TEST_CC)
tests_test_stats_LDADD = $(TEST_LIBS)

check_PROGRAMS += tests/test_report
tests_test_report_SOURCES = tests/test_report.c
tests_test_report_CFLAGS = $(TEST_CC)
tests_test_report_LDADD = $(TEST_LIBS)

# The four-config ablation on the bundled data (run with alphast-run sweep).
dist_noinst_SCRIPTS += scripts/ablation.lua
EXTRA_DIST += docs/report.md
