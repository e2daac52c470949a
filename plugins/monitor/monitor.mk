# Monitor plugins (docs/monitors.md): expert_load, gate_activation, grad_norm
# and time_conditioning, each built with the shared helpers, and their test.
MONITOR_UTIL = plugins/monitor/monitor_util.c plugins/monitor/monitor_util.h

plugin_LTLIBRARIES += plugins/monitor/monitor_expert_load.la plugins/monitor/monitor_gate_activation.la \
	plugins/monitor/monitor_grad_norm.la plugins/monitor/monitor_time_conditioning.la

plugins_monitor_monitor_expert_load_la_SOURCES = plugins/monitor/monitor_expert_load.c $(MONITOR_UTIL)
plugins_monitor_monitor_expert_load_la_CPPFLAGS = $(PLUGIN_CPP)
plugins_monitor_monitor_expert_load_la_LDFLAGS = $(PLUGIN_LINK)
plugins_monitor_monitor_expert_load_la_LIBADD = -lm

plugins_monitor_monitor_gate_activation_la_SOURCES = plugins/monitor/monitor_gate_activation.c $(MONITOR_UTIL)
plugins_monitor_monitor_gate_activation_la_CPPFLAGS = $(PLUGIN_CPP)
plugins_monitor_monitor_gate_activation_la_LDFLAGS = $(PLUGIN_LINK)

plugins_monitor_monitor_grad_norm_la_SOURCES = plugins/monitor/monitor_grad_norm.c $(MONITOR_UTIL)
plugins_monitor_monitor_grad_norm_la_CPPFLAGS = $(PLUGIN_CPP)
plugins_monitor_monitor_grad_norm_la_LDFLAGS = $(PLUGIN_LINK)

plugins_monitor_monitor_time_conditioning_la_SOURCES = plugins/monitor/monitor_time_conditioning.c $(MONITOR_UTIL)
plugins_monitor_monitor_time_conditioning_la_CPPFLAGS = $(PLUGIN_CPP)
plugins_monitor_monitor_time_conditioning_la_LDFLAGS = $(PLUGIN_LINK)

check_PROGRAMS += tests/test_monitors
tests_test_monitors_SOURCES = tests/test_monitors.c tests/model_fixture.c tests/model_fixture.h tests/test_files.c tests/test_files.h
tests_test_monitors_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_monitors_LDADD = $(TEST_LIBS) $(CJSON_LIBS)
EXTRA_DIST += docs/monitors.md
