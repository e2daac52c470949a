# What a release installs besides the program, the library and the data,
# all under $(docdir) (share/doc/alphast): the README with the licence, news
# and citation beside it, the guides as docs/ (so the README's links still
# lead somewhere) and the example plugin as examples/.
dist_doc_DATA = README.md NEWS LICENSE CITATION.cff
nobase_dist_doc_DATA = docs/architecture.md docs/benchmarks.md docs/cluster.md docs/config.md docs/evaluation.md docs/gpu.md docs/model.md docs/predict.md \
	docs/monitors.md docs/plugin-guide.md docs/python.md docs/report.md docs/sweeps.md \
	docs/img/report-configs.png docs/img/report-key-metrics.png docs/img/report-routing.png \
	docs/img/report-verdict.png docs/img/report-placements.png docs/img/report-curves.png \
	examples/attn_distbias/Makefile examples/attn_distbias/README.md \
	examples/attn_distbias/attn_distbias.c examples/attn_distbias/monitor_distbias.c \
	examples/attn_distbias/test_distbias.c

# Shipped, not installed: the measurements docs/benchmarks.md quotes (the
# whole folder: each run on another machine adds one).
EXTRA_DIST += bench/results
