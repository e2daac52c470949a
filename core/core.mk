# The core runtime, linked into alphast-run and the tests (plugins never link it).
noinst_LTLIBRARIES += libalphast.la
libalphast_la_SOURCES = \
	core/util.c core/rng.c core/ctx.c core/parallel.c core/profile.c core/profile.h core/tensor.c core/params.c \
	core/host.c core/sink.c core/ops_linalg.c core/paths.c
libalphast_la_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS) $(YAML_CFLAGS) $(HDF5_CFLAGS) $(LUA_CFLAGS) $(CJSON_CFLAGS) $(ZLIB_CFLAGS)
libalphast_la_LIBADD = $(BLAS_LIBS) $(YAML_LIBS) $(HDF5_LIBS) $(LUA_LIBS) $(CJSON_LIBS) $(ZLIB_LIBS) $(LTDL_LIBS) -lm

pkginclude_HEADERS += core/include/alphast/plugin.h core/include/alphast/ops.def
noinst_HEADERS = core/include/alphast/core.h core/include/alphast/sink.h core/include/alphast/fastmath.h \
	core/include/alphast/loader.h core/include/alphast/model.h
