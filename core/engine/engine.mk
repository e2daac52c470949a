# engine: the tensor engine (context, arena, tape, tensors, parameters, RNG,
# thread pool, GEMM, profile, the host table) and its op set in ops/. It
# builds as its own library, with no libyaml, libhdf5, Lua or cJSON.
noinst_LTLIBRARIES += libalphast_engine.la
libalphast_engine_la_SOURCES += \
	core/engine/engine.h core/engine/arena.h core/engine/arena.c core/engine/ctx.c core/engine/ctx_internal.h \
	core/engine/keys.h core/engine/keys.c core/engine/graph.h core/engine/graph.c core/engine/tensor.c core/engine/params.c core/engine/host.c \
	core/engine/rng.c core/engine/parallel.c core/engine/profile.c core/engine/profile.h \
	core/engine/sink.c core/engine/sink.h core/engine/gemm.c core/engine/gemm_internal.h core/engine/gemm_onednn.c core/engine/gemm_bf16.c \
	core/engine/backend.h core/engine/kernels.h core/engine/backend.c core/engine/backend_cpu.c core/engine/backend_cpu_services.c \
	core/engine/blas_coretype.h core/engine/blas_coretype.c core/engine/kabsch.h core/engine/kabsch.c \
	core/engine/ops/ops_axis.h core/engine/ops/ops_plan.h core/engine/ops/ops_shape.c core/engine/ops/ops_elementwise.c \
	core/engine/ops/ops_linalg.c core/engine/ops/ops_norm.c core/engine/ops/ops_reduce.c \
	core/engine/ops/ops_routing.c core/engine/ops/ops_grouped.c core/engine/ops/ops_moe.c core/engine/ops/ops_aligned.c core/engine/ops/ops_loss.c \
	core/engine/ops/ops_softmax.h core/engine/ops/ops_attention.c core/engine/ops/dispatch.c \
	core/engine/ops/dispatch_linalg.c core/engine/ops/dispatch_reduce.c core/engine/ops/dispatch_routing.c core/engine/ops/dispatch_loss.c core/engine/ops/dispatch_shape.c core/engine/ops/dispatch_norm.c \
	core/engine/ops/dispatch_elementwise.c core/engine/ops/dispatch_grouped.c core/engine/ops/dispatch_moe.c \
	core/engine/ops/dispatch_attention.c
libalphast_engine_la_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS) $(FASTMATH_CFLAGS)
libalphast_engine_la_LIBADD = $(BLAS_LIBS) $(ONEDNN_LIBS) -lm
EXTRA_DIST += core/engine/README.md

# Engine tests link the engine library alone: it needs nothing above it.
ENGINE_TEST_LIBS = tests/libgradcheck.la libalphast_engine.la $(CRITERION_LIBS)
ENGINE_TESTS = tests/test_ops_shape tests/test_ops_elementwise tests/test_ops_linalg tests/test_ops_norm \
	tests/test_ops_reduce tests/test_ops_routing tests/test_ops_loss tests/test_ops_aligned tests/test_ops_attention tests/test_ctx tests/test_rng \
	tests/test_fastmath tests/test_parallel tests/test_blas_coretype tests/test_bf16 tests/test_gemm_onednn
check_PROGRAMS += $(ENGINE_TESTS)
tests_test_bf16_SOURCES = tests/test_bf16.c tests/gemm_reference.h
tests_test_bf16_CFLAGS = $(TEST_CC)
tests_test_bf16_LDADD = $(ENGINE_TEST_LIBS)
tests_test_gemm_onednn_SOURCES = tests/test_gemm_onednn.c tests/gemm_reference.h
tests_test_gemm_onednn_CFLAGS = $(TEST_CC)
tests_test_gemm_onednn_LDADD = $(ENGINE_TEST_LIBS)
tests_test_blas_coretype_SOURCES = tests/test_blas_coretype.c
tests_test_blas_coretype_CFLAGS = $(TEST_CC)
tests_test_blas_coretype_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ops_shape_SOURCES = tests/test_ops_shape.c
tests_test_ops_shape_CFLAGS = $(TEST_CC)
tests_test_ops_shape_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ops_elementwise_SOURCES = tests/test_ops_elementwise.c
tests_test_ops_elementwise_CFLAGS = $(TEST_CC)
tests_test_ops_elementwise_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ops_linalg_SOURCES = tests/test_ops_linalg.c
tests_test_ops_linalg_CFLAGS = $(TEST_CC)
tests_test_ops_linalg_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ops_norm_SOURCES = tests/test_ops_norm.c
tests_test_ops_norm_CFLAGS = $(TEST_CC)
tests_test_ops_norm_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ops_reduce_SOURCES = tests/test_ops_reduce.c
tests_test_ops_reduce_CFLAGS = $(TEST_CC)
tests_test_ops_reduce_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ops_routing_SOURCES = tests/test_ops_routing.c
tests_test_ops_routing_CFLAGS = $(TEST_CC)
tests_test_ops_routing_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ops_loss_SOURCES = tests/test_ops_loss.c
tests_test_ops_loss_CFLAGS = $(TEST_CC)
tests_test_ops_loss_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ops_aligned_SOURCES = tests/test_ops_aligned.c
tests_test_ops_aligned_CFLAGS = $(TEST_CC)
tests_test_ops_aligned_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ops_attention_SOURCES = tests/test_ops_attention.c
tests_test_ops_attention_CFLAGS = $(TEST_CC)
tests_test_ops_attention_LDADD = $(ENGINE_TEST_LIBS)
tests_test_ctx_SOURCES = tests/test_ctx.c
tests_test_ctx_CFLAGS = $(TEST_CC)
tests_test_ctx_LDADD = $(ENGINE_TEST_LIBS)
tests_test_rng_SOURCES = tests/test_rng.c
tests_test_rng_CFLAGS = $(TEST_CC)
tests_test_rng_LDADD = $(ENGINE_TEST_LIBS)
tests_test_fastmath_SOURCES = tests/test_fastmath.c
tests_test_fastmath_CFLAGS = $(TEST_CC)
tests_test_fastmath_LDADD = $(ENGINE_TEST_LIBS)
tests_test_parallel_SOURCES = tests/test_parallel.c
tests_test_parallel_CFLAGS = $(TEST_CC)
# It also checks that optimiser steps do not depend on the thread count.
tests_test_parallel_LDADD = $(TEST_LIBS)

# The backend interface, seen from the model: needs the layers above.
check_PROGRAMS += tests/test_backend
tests_test_backend_SOURCES = tests/test_backend.c tests/model_fixture.c tests/model_fixture.h
tests_test_backend_CFLAGS = $(TEST_CC)
tests_test_backend_LDADD = $(TEST_LIBS)

# The CUDA backend (configure found nvcc, cudart and cuBLAS): nvcc objects
# (Makefile.am's .cu.lo rule) linked into the engine library.
CUDA_ENGINE_SOURCES = core/engine/cuda/backend_cuda.cu core/engine/cuda/ops_shape.cu \
	core/engine/cuda/ops_elementwise.cu core/engine/cuda/ops_linalg.cu core/engine/cuda/ops_grouped.cu \
	core/engine/cuda/ops_routing.cu core/engine/cuda/ops_norm.cu core/engine/cuda/ops_reduce.cu \
	core/engine/cuda/ops_loss.cu core/engine/cuda/ops_moe.cu core/engine/cuda/ops_aligned.cu
EXTRA_DIST += $(CUDA_ENGINE_SOURCES) core/engine/cuda/cuda_internal.h core/engine/cuda/cuda_gemm.h
# The fixed-order row reductions of the norm, reduce and loss kernels.
EXTRA_DIST += core/engine/cuda/row_reduce.cuh
if HAVE_CUDA
CUDA_ENGINE_OBJECTS = $(CUDA_ENGINE_SOURCES:.cu=.lo)
CUDA_OBJECTS += $(CUDA_ENGINE_OBJECTS)
libalphast_engine_la_LIBADD += $(CUDA_ENGINE_OBJECTS) $(CUDA_LIBS)
EXTRA_libalphast_engine_la_DEPENDENCIES = $(CUDA_ENGINE_OBJECTS)
$(CUDA_ENGINE_OBJECTS): core/engine/cuda/cuda_internal.h core/engine/backend.h core/engine/engine.h include/alphast/ops.def \
	core/engine/ops/ops_plan.h
core/engine/cuda/ops_norm.lo core/engine/cuda/ops_reduce.lo core/engine/cuda/ops_loss.lo core/engine/cuda/ops_aligned.lo: core/engine/cuda/row_reduce.cuh
core/engine/cuda/ops_linalg.lo core/engine/cuda/ops_grouped.lo: core/engine/cuda/cuda_gemm.h
core/engine/cuda/ops_norm.lo core/engine/cuda/ops_reduce.lo: core/engine/ops/ops_axis.h
endif
