# The README's set-up commands (quickstart.sh, test.sh) and what they run,
# shipped so that they work from an unpacked tarball as from a checkout; and
# the other tools of scripts/ (fuzz.sh: tests/fuzz/fuzz.mk).
EXTRA_DIST += scripts/quickstart.sh scripts/test.sh scripts/install-deps.sh scripts/build.sh \
	scripts/test-summary.sh scripts/hostile-inputs.sh scripts/hostile-round3.sh scripts/device-bench.sh scripts/mpi-scaling.sh scripts/sweep-throughput.sh

# The main job's sweep, installed beside the shipped configs/ it reads
# (`alphast-run sweep $(pkgdatadir)/scripts/ablation.lua`).
nobase_pkgdata_DATA = scripts/ablation.lua
