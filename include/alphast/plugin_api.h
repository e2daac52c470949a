/* alphast/plugin_api.h: the plugin kit, the one header most plugins include.
 *
 * It adds to plugin.h what sqlite3ext.h adds to sqlite3.h: the host table
 * the entry point receives is kept in one global, `ast_api`, and every op
 * and service is called through it under the name the core gives it, so a
 * plugin reads like the core:
 *
 *     #include <alphast/plugin_api.h>
 *
 *     AST_API_DEFINE;           (once per plugin, next to AST_PLUGIN_DEFINE)
 *     ...
 *     ast_tensor *y = ast_gelu(c, ast_linear(c, x, l->fc.weight, l->fc.bias));
 *     float *gx = ast_grad(c, x);
 *     ...
 *     AST_PLUGIN_DEFINE(desc)   (stores the host table in ast_api)
 *
 * `ast_api` has hidden visibility: each shared object has its own, which
 * the host sets before it calls anything else in the plugin. A plugin of
 * several files writes AST_API_DEFINE in one and includes this header in
 * all of them.
 *
 * Names: every op of ops.def is ast_<name> with the op's parameters (a
 * static inline function generated from ops.def, so an op appended there
 * appears here). Services are macros naming the host table's members;
 * where the core has the same function they take its name:
 *
 *     ast_param ast_buffer ast_alloc ast_alloc_uninit ast_training
 *     ast_grad_enabled ast_grad ast_record ast_add_loss ast_parallel_for
 *     ast_sgemm ast_log                                  (as in the core)
 *     ast_publish_stat         host->stat      (ast_stat is the statistic's type)
 *     ast_ctx_scheduled        host->scheduled
 *     ast_sink_emit            host->emit
 *     ast_sink_warn_once       host->warn_once
 *     ast_rng_u64 ast_rng_uniform ast_rng_normal   host->rng_*
 *     ast_tensor_read ast_tensor_write             host->read, host->write (ABI 2.3)
 *     ast_rng_key ast_stats_wanted                 host->rng_key, host->stats_wanted (ABI 2.4)
 *     ast_publish_stat_tensor                      host->stat_tensor (ABI 2.6)
 *
 * Helper for forward(): ast_host_copy reads a tensor's data into host memory.
 * Helpers for create(): ast_linear_params and ast_layernorm_params make a
 * PyTorch Linear's and LayerNorm's parameters, and AST_REQUIRE fails
 * create() with a one-line reason.
 *
 * Do not include this header where the core's own declarations are
 * (core/engine/engine.h): it defines the same names. */
#ifndef ALPHAST_PLUGIN_API_H
#define ALPHAST_PLUGIN_API_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alphast/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the host table ----------------------------------------------------- */

#if defined(__GNUC__)
#define AST_API_HIDDEN __attribute__((visibility("hidden")))
#else
#define AST_API_HIDDEN
#endif

/* The host table of this plugin, set by its entry point. */
extern AST_API_HIDDEN const ast_host *ast_api;

/* Defines ast_api: write `AST_API_DEFINE;` once per plugin, in the file
 * that ends with AST_PLUGIN_DEFINE. */
#define AST_API_DEFINE AST_API_HIDDEN const ast_host *ast_api = 0

/* The entry point keeps the table it receives. */
#undef AST_API_SET
#define AST_API_SET(h) (ast_api = (h))

/* ---- ops: ast_<name>(...) for every line of ops.def ----------------------- */

#define AST_OP(slot, ret, name, params, args) \
    static inline ret ast_##name params { return ast_api->ops->name args; }
#include "alphast/ops.def"
#undef AST_OP

/* ---- services ------------------------------------------------------------- */

#define ast_param ast_api->param
#define ast_buffer ast_api->buffer
#define ast_alloc ast_api->alloc
#define ast_alloc_uninit ast_api->alloc_uninit
#define ast_training ast_api->training
#define ast_grad_enabled ast_api->grad_enabled
#define ast_grad ast_api->grad
#define ast_record ast_api->record
#define ast_rng_u64 ast_api->rng_u64
#define ast_rng_uniform ast_api->rng_uniform
#define ast_rng_normal ast_api->rng_normal
#define ast_rng_key ast_api->rng_key
#define ast_stats_wanted ast_api->stats_wanted
#define ast_add_loss ast_api->add_loss
#define ast_publish_stat ast_api->stat
#define ast_publish_stat_tensor ast_api->stat_tensor
#define ast_ctx_scheduled ast_api->scheduled
#define ast_parallel_for ast_api->parallel_for
#define ast_sgemm ast_api->sgemm
#define ast_sink_emit ast_api->emit
#define ast_sink_warn_once ast_api->warn_once
#define ast_log ast_api->log
#define ast_tensor_read ast_api->read
#define ast_tensor_write ast_api->write

/* ---- helpers for forward() ------------------------------------------------- */

/* A copy of t's data in host memory of the step arena: what a plugin reads
 * on the host (a mask, router logits), wherever the backend keeps t. On a
 * device it waits for the ops queued before it: read what you must. */
static inline float *ast_host_copy(ast_ctx *c, const ast_tensor *t)
{
    float *h = (float *)ast_alloc_uninit(c, (size_t)t->size * sizeof *h);
    ast_tensor_read(c, t, 0, t->size, h);
    return h;
}

/* ---- helpers for create() -------------------------------------------------- */

/* A layer's weight and bias (bias NULL when it has none). */
typedef struct ast_weights {
    ast_tensor *weight, *bias;
} ast_weights;

/* A PyTorch Linear(in, out): "<name>.weight" [out, in] and, when `bias`,
 * "<name>.bias" [out], both U(+-1/sqrt(in)) as PyTorch's default init. */
static inline ast_weights ast_linear_params(ast_scope *s, const char *name, int in, int out, int bias)
{
    char full[256];
    float bound = 1.0f / sqrtf((float)in);
    int64_t w_shape[2] = {out, in}, b_shape[1] = {out};
    ast_weights p = {0, 0};
    snprintf(full, sizeof full, "%s.weight", name);
    p.weight = ast_param(s, full, 2, w_shape, AST_INIT_UNIFORM, bound);
    if (bias) {
        snprintf(full, sizeof full, "%s.bias", name);
        p.bias = ast_param(s, full, 1, b_shape, AST_INIT_UNIFORM, bound);
    }
    return p;
}

/* A PyTorch LayerNorm(dim): "<name>.weight" [dim] = 1, "<name>.bias" [dim] = 0. */
static inline ast_weights ast_layernorm_params(ast_scope *s, const char *name, int dim)
{
    char full[256];
    int64_t shape[1] = {dim};
    ast_weights p;
    snprintf(full, sizeof full, "%s.weight", name);
    p.weight = ast_param(s, full, 1, shape, AST_INIT_ONE, 0.0f);
    snprintf(full, sizeof full, "%s.bias", name);
    p.bias = ast_param(s, full, 1, shape, AST_INIT_ZERO, 0.0f);
    return p;
}

#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
static inline void ast_require_failed(char *err, size_t errlen, const char *file, int line, const char *fmt, ...)
{
    const char *slash = strrchr(file, '/');
    int n = snprintf(err, errlen, "%s:%d: ", slash ? slash + 1 : file, line);
    if (n < 0 || (size_t)n >= errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

/* AST_REQUIRE(cond, err, errlen, fmt, ...): in create(), when cond is false,
 * writes "file:line: <message>" into err and returns NULL. Check before
 * allocating, or make the allocation the condition. */
#define AST_REQUIRE(cond, err, errlen, ...)                                          \
    do {                                                                              \
        if (!(cond)) {                                                                \
            ast_require_failed((err), (errlen), __FILE__, __LINE__, __VA_ARGS__);     \
            return NULL;                                                              \
        }                                                                             \
    } while (0)

/* Added to padded cells' key logits (as -AST_MASKED_LOGIT, through
 * ast_key_mask_bias) before a softmax: their exp underflows to exactly 0,
 * while valid logits get + 0 and keep their exact values. */
#define AST_MASKED_LOGIT 1e9f

/* The descriptor fields for an option table and a kernel table. */
#define AST_OPTIONS(table) .options = (table), .n_options = AST_N_OPTIONS(table)
#define AST_KERNELS(table) .kernels = (table), .n_kernels = (int)(sizeof(table) / sizeof((table)[0]))
#define AST_LEGACY_KEYS(table) .legacy_keys = (table), .n_legacy_keys = (int)(sizeof(table) / sizeof((table)[0]))

/* A plugin's descriptor `ast_plugin_self`, ast_api and the entry point in
 * one line, at the end of the plugin's main file:
 *
 *     AST_PLUGIN(AST_KIND_FFN, "dense", "1.0", "GELU feed-forward", .create = dense_create,
 *                .forward = dense_forward)
 *
 * The fields after the summary are the descriptor's (AST_OPTIONS(...),
 * .destroy when free(self) is not enough, ...). Code above it that needs the
 * descriptor (its kernel table) declares `static const ast_plugin_desc
 * ast_plugin_self;` first. */
#define AST_PLUGIN(kind_, name_, version_, summary_, ...)                                       \
    AST_API_DEFINE;                                                                             \
    static const ast_plugin_desc ast_plugin_self = {AST_PLUGIN_DESC_INIT(kind_, name_, version_, summary_), \
                                                    __VA_ARGS__};                               \
    AST_PLUGIN_DEFINE(ast_plugin_self)

#ifdef __cplusplus
}
#endif
#endif
