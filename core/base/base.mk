# base: what every layer uses (errors, logging, allocation, paths, atomic
# files, hashing, text, progress bars). Part of the engine library.
libalphast_engine_la_SOURCES = \
	core/base/base.h core/base/util.c core/base/paths.c core/base/regular_file.c core/base/atomic_file.c core/base/atomic_file.h \
	core/base/progress.c core/base/progress.h core/base/strlist.c core/base/strlist.h \
	core/base/hash.c core/base/hash.h core/base/crash.c core/base/crash.h core/base/text.h core/base/yaml_scalar.c core/base/did_you_mean.c \
	core/base/csv.c core/base/csv.h
EXTRA_DIST += core/base/README.md
