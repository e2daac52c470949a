# The plugin loader (libltdl): search path, ABI and descriptor checks, options.
libalphast_la_SOURCES += core/plugin_loader.c core/plugin_search.c core/plugin_check.c \
	core/plugin_options.c core/plugin_internal.h core/suggest.c core/suggest.h \
	core/strlist.c core/strlist.h
