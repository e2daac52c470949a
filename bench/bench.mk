# Benchmarks (issue 6): `make bench`, `make bench-torch`, `make parity`.
# Never built or run by `make check`: the programs are EXTRA_PROGRAMS, built
# only by these targets. Threads: OPENBLAS_NUM_THREADS (default 2); pass
# options with BENCH_ARGS='--sections demo --steps 5'.
EXTRA_PROGRAMS = bench/bench_model bench/parity_setup bench/bench_prior bench/bench_fma
BENCH_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS) $(CJSON_CFLAGS)
BENCH_LIBS = libalphast.la $(BLAS_LIBS) $(CJSON_LIBS)

bench_bench_model_SOURCES = bench/bench_model.c bench/bench.h bench/bench_cases.c bench/bench_child.c \
	bench/bench_flops.c bench/bench_json.c bench/bench_sgemm.c bench/bench_steps.c
bench_bench_model_CFLAGS = $(BENCH_CFLAGS)
bench_bench_model_LDADD = $(BENCH_LIBS)
bench_parity_setup_SOURCES = bench/parity_setup.c
bench_parity_setup_LDADD = libalphast.la
bench_bench_prior_SOURCES = bench/bench_prior.c bench/bench_child.c bench/bench.h
bench_bench_prior_CFLAGS = $(BENCH_CFLAGS)
bench_bench_prior_LDADD = libalphast.la
bench_bench_fma_SOURCES = bench/bench_fma.c
CLEANFILES += $(EXTRA_PROGRAMS)
EXTRA_DIST += bench/torch_twin.py bench/torch_bench.py bench/parity.py bench/predict_stitch.py bench/configs/baseline.yaml \
	bench/configs/gated.yaml bench/configs/moe.yaml bench/configs/gated_moe.yaml

# Debian's python3, where python3-torch installs (scripts/install-deps.sh --bench);
# a python3 earlier on PATH may not have it.
BENCH_PY = /usr/bin/python3
# The reference model's dumps, which the twin is checked against first.
BENCH_GOLDEN = $(abs_top_srcdir)/tests/data/golden

BENCH_RESULTS = bench/results
BENCH_THREADS = OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-2}

bench: bench/bench_model$(EXEEXT) $(plugin_LTLIBRARIES)
	@mkdir -p $(BENCH_RESULTS)
	$(BENCH_THREADS) ./bench/bench_model --json $(BENCH_RESULTS)/alphast.json \
		--compare $(BENCH_RESULTS)/pytorch.json $(BENCH_ARGS)

bench-torch:
	@mkdir -p $(BENCH_RESULTS)
	$(BENCH_THREADS) $(BENCH_PY) $(srcdir)/bench/torch_bench.py --json $(BENCH_RESULTS)/pytorch.json $(BENCH_ARGS)

parity: alphast-run$(EXEEXT) bench/parity_setup$(EXEEXT) $(plugin_LTLIBRARIES)
	$(BENCH_THREADS) $(BENCH_PY) $(srcdir)/bench/parity.py --alphast ./alphast-run \
		--setup ./bench/parity_setup --configs $(srcdir)/bench/configs --work bench/parity \
		--golden $(BENCH_GOLDEN)

# The structural prior's cost per set at N = 64 .. 1024 (docs/model.md §2.12).
bench-prior: bench/bench_prior$(EXEEXT)
	$(BENCH_THREADS) ./bench/bench_prior

# One core's float32 FMA peak; one process per core at once for the machine's.
bench-fma: bench/bench_fma$(EXEEXT)
	./bench/bench_fma

.PHONY: bench bench-torch parity bench-prior bench-fma
