/* engine/engine.h: the tensor engine as the layers above it see it: the
 * step context (arena, tape, RNG), tensors, the op set, parameters, the
 * thread pool and the host table handed to plugins. Plugin authors use
 * alphast/plugin_api.h instead. */
#ifndef ALPHAST_ENGINE_H
#define ALPHAST_ENGINE_H

#include "base/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- deterministic RNG (xoshiro256**; seeded by splitmix64) ------------- */

typedef struct ast_rng {
    uint64_t s[4];
    int has_spare;
    float spare;
} ast_rng;

void ast_rng_seed(ast_rng *r, uint64_t seed);
/* Inline: a batch draws millions (expression dropout, one per entry). */
static inline uint64_t ast_rng_next(ast_rng *r)
{
    uint64_t *s = r->s, x = s[1] * 5;
    uint64_t result = ((x << 7) | (x >> 57)) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}
/* [0, 1) with 24 random bits */
static inline float ast_rng_uniform01(ast_rng *r) { return (float)(ast_rng_next(r) >> 40) * (1.0f / 16777216.0f); }
float ast_rng_gauss(ast_rng *r);     /* Box-Muller, N(0, 1) */

/* ---- step context: arena + tape ---------------------------------------- */

/* A context on the CPU backend, or on backend b (engine/backend.h). */
ast_ctx *ast_ctx_new(uint64_t seed);
typedef struct ast_backend ast_backend;
ast_ctx *ast_ctx_new_on(const ast_backend *b, uint64_t seed);
const ast_backend *ast_ctx_backend(const ast_ctx *c);
void ast_ctx_free(ast_ctx *c);
/* Forget the previous step's activations and tape; parameters stay. */
void ast_ctx_reset(ast_ctx *c);
void ast_ctx_set_training(ast_ctx *c, int training);
void ast_ctx_set_grad(ast_ctx *c, int enabled);
/* The precision of the GEMMs of linear, matmul and bmm, forward and
 * backward (default float32). AST_PRECISION_BF16 rounds their operands to
 * bfloat16 and accumulates in float32 (oneDNN, gemm_bf16.c), as PyTorch's
 * CPU autocast does; parameters, gradients and every other op stay float32.
 * Setting it where ast_bf16_supported says no is a programming error.
 * AST_PRECISION_TF32 (a device's only) runs them on TF32 tensor cores:
 * operands rounded to a 10-bit mantissa, float32 accumulation, as
 * PyTorch's allow_tf32; the CPU has none and computes those in float32. */
typedef enum ast_precision { AST_PRECISION_FP32, AST_PRECISION_BF16, AST_PRECISION_TF32 } ast_precision;
void ast_ctx_set_precision(ast_ctx *c, ast_precision p);
ast_precision ast_ctx_precision(const ast_ctx *c);
/* 1 if this build and CPU run bf16 GEMMs in hardware (oneDNN with
 * AVX512-BF16 or AMX); else 0 with the reason and the fix in why. */
int ast_bf16_supported(char *why, size_t n);
ast_rng *ast_ctx_rng(ast_ctx *c);
/* A kernel's random key: the next draw of the context's RNG, also put in
 * backend memory at *at, where the kernel reads it (so a captured step's
 * replay gets new keys: graph.h). Returns the key for host kernels. */
uint64_t ast_ctx_key(ast_ctx *c, const uint64_t **at);
/* Whether anyone observes the statistics the model and its plugins publish
 * (time.t, time.modulation_norm, attn.gate_mean, moe.*: what monitors
 * read); on by default. On a device each costs a copy the host waits for
 * mid-step, so a run without monitors turns them off. */
void ast_ctx_set_stats(ast_ctx *c, int wanted);
int ast_ctx_stats_wanted(const ast_ctx *c);
/* Bytes of arena carved now (spans the backward handed back for reuse
 * included) and at most since creation: the memory a step touches. */
size_t ast_ctx_arena_used(const ast_ctx *c);
size_t ast_ctx_arena_peak(const ast_ctx *c);

/* Runs fn(arg, lo, hi) over [0, n) in contiguous ranges on the thread pool
 * (OPENBLAS_NUM_THREADS threads), or serially when n < 2 * grain elements
 * would not pay for the hand-off. fn must write disjoint outputs per range;
 * each range is one thread's, so results do not depend on timing. Inside
 * fn, ast_sgemm and ast_parallel_for run on the calling thread; nothing
 * that allocates from the arena may be called there. */
void ast_parallel_for(int64_t n, int64_t grain, ast_range_fn fn, void *arg);
int ast_parallel_threads(void);
/* memcpy by the thread pool, in 1 MiB pieces (serially below 4 MiB): for
 * the copies of a whole batch on a step's critical path. */
void ast_copy_parallel(void *to, const void *from, size_t bytes);
/* Elements below which an elementwise kernel stays on one thread. */
#define AST_PAR_GRAIN 16384
/* The grain, in rows, for kernels whose items are rows of `cols` elements. */
static inline int64_t ast_row_grain(int64_t cols) { return cols >= AST_PAR_GRAIN ? 1 : AST_PAR_GRAIN / (cols > 0 ? cols : 1); }

/* Host-service implementations (also reachable through ast_host). */
void *ast_alloc(ast_ctx *c, size_t bytes);
/* Arena memory left as it is, for buffers the caller writes in full (op
 * outputs): zeroing them would only be overwritten. Sanitizer builds fill it
 * with NaN instead, so an op that misses an element fails its tests. */
void *ast_alloc_uninit(ast_ctx *c, size_t bytes);
int ast_training(const ast_ctx *c);
int ast_grad_enabled(const ast_ctx *c);
float *ast_grad(ast_ctx *c, ast_tensor *t);
/* For a backward that writes every element of t's gradient: when no other
 * backward has written it yet, the buffer comes unzeroed with *fresh = 1 and
 * the caller assigns (=) instead of adding, which saves zeroing and reading
 * it — the usual case, as most activations have a single consumer. */
float *ast_grad_fresh(ast_ctx *c, ast_tensor *t, int *fresh);
void ast_record(ast_ctx *c, const ast_node *n);
void ast_add_loss(ast_ctx *c, const char *name, ast_tensor *scalar);
void ast_publish_stat(ast_ctx *c, const char *name, int layer, const float *values, int n);
/* A statistic that is a tensor of the step (host->stat_tensor): reduced
 * where the step runs and not waited for. On the CPU its values are copied
 * as ast_publish_stat's; on a device they are copied into pinned memory
 * with the step's ops (ast_ctx_read_later), readable once the backend has
 * synchronised, which the trainer does once per step for its loss. */
void ast_publish_stat_tensor(ast_ctx *c, const char *name, int layer, const ast_tensor *t);
/* Where the host will find `bytes` of backend data `src` once the backend
 * has synchronised: src itself on the CPU (valid until ast_ctx_reset);
 * on a device a pinned copy, queued (and captured) with the step's ops, at
 * an address that every step carving the same results repeats. */
const void *ast_ctx_read_later(ast_ctx *c, const void *src, size_t bytes);

/* The named losses published this step (host->add_loss); the model layer
 * sums them into the training loss (ast_model_extra_loss). */
int ast_ctx_n_losses(const ast_ctx *c);
const char *ast_ctx_loss_name(const ast_ctx *c, int i);
ast_tensor *ast_ctx_loss(const ast_ctx *c, int i);
/* Statistics published this step; the first call after the step copies
 * the tensors published with ast_publish_stat_tensor (one wait). */
int ast_ctx_n_stats(const ast_ctx *c);
const ast_stat *ast_ctx_stats(const ast_ctx *c);
/* Values scheduled for the current optimiser step (host->scheduled); they
 * survive ast_ctx_reset, so every micro-batch of the step sees them. */
void ast_ctx_set_scheduled(ast_ctx *c, const char *name, float value);
float ast_ctx_scheduled(const ast_ctx *c, const char *name, float fallback);

/* Reverse-mode pass: seeds dloss = 1 and runs the tape backwards, adding
 * into the grad of every tensor that requires one. loss must be [1]. */
void ast_backward(ast_ctx *c, ast_tensor *loss);
/* The same from any output, with dL/dout given (out->size floats). */
void ast_backward_seed(ast_ctx *c, ast_tensor *out, const float *dout);

/* Does this op's output need a tape node? (grad on and an input needs it) */
int ast_needs_grad(const ast_ctx *c, ast_tensor *const *in, int n);

/* ---- tensors ------------------------------------------------------------ */

int64_t ast_shape_size(int ndim, const int64_t *shape);
int ast_same_shape(const ast_tensor *a, const ast_tensor *b);
/* Rows = product of all dims but the last; cols = the last dim. */
int64_t ast_rows(const ast_tensor *t);
int64_t ast_cols(const ast_tensor *t);
/* "[2, 24, 128]" into buf, for messages. */
const char *ast_shape_str(const ast_tensor *t, char *buf, size_t n);
/* Arena tensor whose elements the caller writes, every one (see ast_alloc_uninit). */
ast_tensor *ast_empty(ast_ctx *c, int ndim, const int64_t *shape);
/* Arena tensor with the given shape and a copy of data (may be NULL = 0). */
ast_tensor *ast_tensor_from(ast_ctx *c, int ndim, const int64_t *shape, const float *data);

/* ---- the op set ---------------------------------------------------------- */

/* ast_<name> runs the op on the backend of its context (engine/backend.h). */
#define AST_OP(slot, ret, name, params, args) ret ast_##name params;
#include "alphast/ops.def"
#undef AST_OP

/* ---- parameters ---------------------------------------------------------- */

/* All persistent parameters of a model, in registration (state_dict) order. */
typedef struct ast_params ast_params;

ast_params *ast_params_new(uint64_t init_seed);
void ast_params_free(ast_params *p);
int ast_params_count(const ast_params *p);
ast_tensor *ast_params_at(const ast_params *p, int i);
ast_tensor *ast_params_find(const ast_params *p, const char *name);
int64_t ast_params_numel(const ast_params *p);
void ast_params_zero_grad(ast_params *p);
/* Moves every parameter's data and gradient to backend b's memory (once,
 * after the model is built; on the CPU it only records b). From then on
 * their data is read and written on the host only through these copies;
 * buffers stay on the host. */
void ast_params_to_backend(ast_params *p, const ast_backend *b);
const ast_backend *ast_params_backend(const ast_params *p);
void ast_params_read(const ast_params *p, const ast_tensor *t, float *host_dst);
void ast_params_write(ast_params *p, ast_tensor *t, const float *host_src);
/* A scope appends "prefix." to the names created through it. */
ast_scope *ast_scope_new(ast_params *p, const char *prefix);
ast_scope *ast_scope_child(ast_scope *parent, const char *name);
ast_tensor *ast_param(ast_scope *s, const char *name, int ndim, const int64_t *shape,
                      ast_init init, float a);
/* Persistent state that is saved and restored but not trained (host->buffer):
 * zero-filled, no gradient, kept apart from the parameters (the optimiser
 * and the parameter counts never see it), in registration order. */
ast_tensor *ast_buffer(ast_scope *s, const char *name, int ndim, const int64_t *shape);
int ast_params_n_buffers(const ast_params *p);
ast_tensor *ast_params_buffer_at(const ast_params *p, int i);
ast_tensor *ast_params_find_buffer(const ast_params *p, const char *name);

/* The service table handed to plugins. */
const ast_host *ast_host_table(void);

/* The library that runs the float32 GEMMs (gemm.c): OpenBLAS, oneDNN's
 * matmul, or per shape by the rule measured on the CPU's instruction set
 * (auto; docs/benchmarks.md). ALPHAST_GEMM=openblas|onednn|auto picks it
 * at the first GEMM (auto where unset); a bad value or onednn where this
 * build or CPU has none ends the process with one line saying so. */
typedef enum { AST_GEMM_AUTO, AST_GEMM_OPENBLAS, AST_GEMM_ONEDNN } ast_gemm_library;
/* Sets the library for the process (tests, bench_sgemm); 0, with why,
 * where oneDNN is asked of a build or CPU that cannot run it. */
int ast_gemm_use(ast_gemm_library lib, char *why, size_t n);
/* What runs a float32 GEMM of this shape now: OPENBLAS or ONEDNN. */
ast_gemm_library ast_gemm_library_for(int trans_a, int trans_b, int m, int n, int k);
const char *ast_gemm_library_name(ast_gemm_library lib);

/* Row-major sgemm on host memory, split over the thread pool (gemm.c). */
/* The same with C's rows first set to bias [n] (beta ignored), for linear. */
void ast_sgemm_bias(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                    const float *b, int ldb, float beta, float *cmat, int ldc, const float *bias);
void ast_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *cmat, int ldc);
/* C = op(A) op(B) + beta C (+ bias [n] in each row, beta then ignored) in
 * precision p: the GEMMs of linear, matmul and bmm. */
void ast_gemm(ast_precision p, int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
              const float *b, int ldb, float beta, float *cmat, int ldc, const float *bias);

#ifdef __cplusplus
}
#endif
#endif
