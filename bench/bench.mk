# Benchmarks (issue 6): `make bench`, `make bench-torch`, `make parity`.
# Never built or run by `make check`: the programs are EXTRA_PROGRAMS, built
# only by these targets. Threads: OPENBLAS_NUM_THREADS (default 2); pass
# options with BENCH_ARGS='--sections demo --steps 5'.
EXTRA_PROGRAMS = bench/bench_model
BENCH_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS) $(CJSON_CFLAGS)
BENCH_LIBS = libalphast.la $(BLAS_LIBS) $(CJSON_LIBS)

bench_bench_model_SOURCES = bench/bench_model.c bench/bench.h bench/bench_cases.c bench/bench_child.c \
	bench/bench_flops.c bench/bench_json.c bench/bench_sgemm.c bench/bench_steps.c
bench_bench_model_CFLAGS = $(BENCH_CFLAGS)
bench_bench_model_LDADD = $(BENCH_LIBS)
CLEANFILES += $(EXTRA_PROGRAMS)

BENCH_RESULTS = bench/results
BENCH_THREADS = OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-2}

bench: bench/bench_model$(EXEEXT) $(plugin_LTLIBRARIES)
	@mkdir -p $(BENCH_RESULTS)
	$(BENCH_THREADS) ./bench/bench_model --json $(BENCH_RESULTS)/alphast.json \
		--compare $(BENCH_RESULTS)/pytorch.json $(BENCH_ARGS)

.PHONY: bench
