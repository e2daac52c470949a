# Fuzzing (tests/fuzz/README.md): `make fuzz` builds the libFuzzer targets
# with clang in a build tree of their own (_build-fuzz here; the normal
# build is untouched) and runs each for FUZZ_SECONDS from its seed corpus;
# it fails on any finding. `make fuzz FUZZ_SECONDS=600 FUZZ_TARGETS="csv h5ad"`.
FUZZ_SECONDS = 60
FUZZ_TARGETS =
fuzz:
	FUZZ_SECONDS='$(FUZZ_SECONDS)' FUZZ_BUILD='$(abs_top_builddir)/_build-fuzz' \
	  $(SHELL) '$(abs_top_srcdir)/scripts/fuzz.sh' $(FUZZ_TARGETS)
.PHONY: fuzz

EXTRA_DIST += tests/fuzz scripts/fuzz.sh
