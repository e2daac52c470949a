# io: file formats alphast writes and reads besides the data: safetensors
# (weights, golden dumps, checkpoints; cJSON headers), the .h5ad writer and
# TensorBoard's event files.
libalphast_la_SOURCES += core/io/safetensors.h core/io/safetensors_dtype.c core/io/safetensors_read.c \
	core/io/safetensors_values.c core/io/safetensors_write.c core/io/safetensors_params.c \
	core/io/safetensors_meta.c core/io/h5ad_write.h core/io/h5ad_internal.h core/io/h5ad_write.c core/io/h5ad_frame.c \
	core/io/tfevents.h core/io/tfevents.c
EXTRA_DIST += core/io/README.md

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
