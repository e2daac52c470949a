# safetensors I/O (weights, golden inputs/outputs, checkpoints) and atomic
# file replacement.
libalphast_la_SOURCES += \
	core/atomic_file.c core/safetensors_dtype.c core/safetensors_read.c \
	core/safetensors_values.c core/safetensors_write.c core/safetensors_params.c
noinst_HEADERS += core/include/alphast/atomic_file.h core/include/alphast/safetensors.h

check_PROGRAMS += tests/test_safetensors
tests_test_safetensors_SOURCES = tests/test_safetensors.c
tests_test_safetensors_CFLAGS = $(TEST_CC) $(CJSON_CFLAGS)
tests_test_safetensors_LDADD = $(TEST_LIBS) $(CJSON_LIBS)

# The golden PyTorch dumps the parity tests read (see tests/data/golden/README.md).
EXTRA_DIST += tests/data/golden/README.md \
	tests/data/golden/baseline.json tests/data/golden/baseline.weights.safetensors \
	tests/data/golden/baseline.io.safetensors \
	tests/data/golden/gated.json tests/data/golden/gated.weights.safetensors \
	tests/data/golden/gated.io.safetensors \
	tests/data/golden/moe.json tests/data/golden/moe.weights.safetensors \
	tests/data/golden/moe.io.safetensors \
	tests/data/golden/gated_moe.json tests/data/golden/gated_moe.weights.safetensors \
	tests/data/golden/gated_moe.io.safetensors \
	tests/data/golden/gated_moe_full.json tests/data/golden/gated_moe_full.weights.safetensors \
	tests/data/golden/gated_moe_full.io.safetensors
