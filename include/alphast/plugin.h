/* alphast/plugin.h: the one header a plugin author needs.
 *
 * A plugin is a shared object that exports one function,
 *
 *     const ast_plugin_desc *alphast_plugin_entry(void);
 *
 * (write AST_PLUGIN_DEFINE(my_desc) at the end of the file). The descriptor
 * says which ABI it was built for, what it is (attention, ffn or monitor),
 * which options it takes, and its entry points. The host passes its services
 * (ops with autograd, parameters, RNG, logging) in `struct ast_host`, so a
 * plugin never links the alphast core; build it with
 *
 *     cc -shared -fPIC $(pkg-config --cflags alphast-plugin) -o attn_x.so attn_x.c
 *
 * and name the file <kind prefix>_<name>.so: attn_, ffn_ or monitor_.
 *
 * ABI rules: every table and struct here only ever grows at its tail. The
 * minor version changes when something is appended (an op at the end of
 * ops.def, a field at the end of a struct); the major version when anything
 * else changes. The host loads a plugin whose major equals its own and whose
 * minor is not newer than its own, and gives it a table at least as long as
 * the one it was built for. The end of this file asserts the offset of every
 * field, so an accidental move fails the build of the host and of every
 * plugin. (ABI 1 kept the ops in the middle of the host table, so appending
 * one moved the fields after it: version 2 puts them in their own table.)
 *
 * Most authors include alphast/plugin_api.h instead, which adds the kit:
 * ops and services called as ast_<name>(...) as the core calls them.
 */
#ifndef ALPHAST_PLUGIN_H
#define ALPHAST_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AST_ABI_MAJOR 2
/* 2.1 appended the ops silu, exp and key_mask_bias; 2.2 grouped_linear;
 * 2.3 the host table's read and write (tensor data to and from host memory);
 * 2.4 the host table's rng_key (a kernel's key in backend memory) and
 * stats_wanted; 2.5 the descriptor's legacy_keys and wants_geodesic,
 * the forward arguments' geodesic (the expression graph's distances), and
 * destroy may be NULL (the host then frees the instance); 2.6 the ops
 * noise_normal, moe_route, moe_pick, moe_gather, moe_grouped_linear and
 * moe_combine (routing in backend memory), aligned_mse (the Kabsch-aligned
 * position loss), add_layernorm (a fused residual LayerNorm) and the
 * host table's stat_tensor; 2.7 the ops kabsch_align (a prediction turned
 * onto a target per set, for the sampler) and linear_attention (the fused
 * linear attention core) */
#define AST_ABI_MINOR 7
#define AST_MAX_DIMS 4

/* ---- tensors ---------------------------------------------------------- */

enum {
    AST_REQUIRES_GRAD = 1u << 0, /* gradients flow into this tensor */
    AST_PARAM = 1u << 1,         /* persistent parameter: data and grad outlive the step */
    AST_BUFFER = 1u << 2         /* persistent state that is saved but not trained (host->buffer) */
};

typedef struct ast_node ast_node;
/* A kernel over the index range [lo, hi) (host->parallel_for). */
typedef void (*ast_range_fn)(void *arg, int64_t lo, int64_t hi);

/* splitmix64's finaliser: a 64-bit hash with full avalanche. Random numbers
 * that any thread can compute in any order come from it as
 * ast_mix64(key + i * 0x9e3779b97f4a7c15), key one draw of host->rng_u64.
 * AST_HOSTDEV lets CUDA kernels call it too, so the CPU and a GPU draw the
 * same numbers (dropout's mask) from the same key. */
#if defined(__CUDACC__)
#define AST_HOSTDEV __host__ __device__
#else
#define AST_HOSTDEV
#endif
static inline AST_HOSTDEV uint64_t ast_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The layout of moe_route's plan (ops.def), a float tensor whose integers
 * are exact (T k < 2^24), for P = T k candidate pairs, E experts and S sets:
 * the header (kept pairs, valid tokens, dropped pairs, capacity), then per
 * sorted pair p the token and its weight row t k + s (-1 past the kept
 * pairs), per candidate t k + s its sorted position (-1: not kept) and its
 * expert, the offsets [E + 1] (expert e owns [offsets[e], offsets[e + 1])),
 * per expert the candidates before capacity (load), the kept pairs and the
 * tokens whose largest logit it is (argmax), and the kept pairs per set and
 * expert [S, E]. */
#define AST_MOE_PLAN_KEPT_PAIRS 0
#define AST_MOE_PLAN_VALID 1
#define AST_MOE_PLAN_DROPPED 2
#define AST_MOE_PLAN_CAPACITY 3
#define AST_MOE_PLAN_TOKEN(P) (4 + 0 * (int64_t)(P))
#define AST_MOE_PLAN_WEIGHT(P) (4 + (int64_t)(P))
#define AST_MOE_PLAN_POS(P) (4 + 2 * (int64_t)(P))
#define AST_MOE_PLAN_EXPERT(P) (4 + 3 * (int64_t)(P))
#define AST_MOE_PLAN_OFFSETS(P) (4 + 4 * (int64_t)(P))
#define AST_MOE_PLAN_LOAD(P, E) (AST_MOE_PLAN_OFFSETS(P) + (E) + 1)
#define AST_MOE_PLAN_COUNT(P, E) (AST_MOE_PLAN_LOAD(P, E) + (E))
#define AST_MOE_PLAN_ARGMAX(P, E) (AST_MOE_PLAN_COUNT(P, E) + (E))
#define AST_MOE_PLAN_SETS(P, E) (AST_MOE_PLAN_ARGMAX(P, E) + (E))
#define AST_MOE_PLAN_SIZE(T, k, E, S) (AST_MOE_PLAN_SETS((int64_t)(T) * (k), E) + (int64_t)(S) * (E))

/* Where a tensor's data lives: memory the CPU can address, or a device's. */
typedef enum ast_memory { AST_MEM_HOST = 0, AST_MEM_DEVICE = 1 } ast_memory;

/* A contiguous row-major float32 tensor. It never owns its memory: `data`
 * and `grad` point into a buffer of the backend that runs the step (the
 * step arena) or of the parameter store. Plugins may read and write `data`
 * of tensors they created when `memory` is AST_MEM_HOST; device data moves
 * only through the backend's explicit copies (host->read and host->write;
 * buffers from host->buffer always stay on the host). `grad` is allocated by the
 * tape on demand (use host->grad to obtain it inside a backward function).
 * Tensors are made by the host only, so this struct may grow at its tail. */
typedef struct ast_tensor {
    float *data;
    float *grad;
    int ndim;
    int64_t shape[AST_MAX_DIMS];
    int64_t size;
    uint32_t flags;
    const char *name; /* parameters and buffers: full state_dict name; else NULL */
    uint32_t memory;  /* ast_memory of data and grad */
    int32_t device;   /* which device of the backend; 0 on the CPU */
} ast_tensor;

/* One step's arena, tape, RNG and published statistics. Opaque. */
typedef struct ast_ctx ast_ctx;

/* Where a plugin's parameters live; names given to host->param are
 * relative to it (e.g. "q_proj.weight"). Opaque. */
typedef struct ast_scope ast_scope;

/* ---- fused ops with a hand-written backward --------------------------- */

#define AST_NODE_MAX_IN 8

/* Called in reverse tape order once out->grad holds dL/dout. It must add
 * (+=) into host->grad(c, in[i]) for every input that requires a gradient
 * (host->grad returns NULL for the others). After the call the host hands
 * out->grad back to the step's arena and sets it to NULL (after the
 * earliest call when several nodes write one output), so keep no pointer
 * to it, nor read the gradient of a non-leaf tensor after the backward. */
typedef void (*ast_backward_fn)(ast_ctx *c, const ast_node *n);

struct ast_node {
    const char *op;      /* name, for error messages and profiles */
    ast_backward_fn backward;
    ast_tensor *out;
    ast_tensor *in[AST_NODE_MAX_IN];
    int n_in;
    void *saved;         /* arena memory the backward needs */
    int64_t iarg[4];
    float farg[4];
};

/* ---- options ---------------------------------------------------------- */

typedef enum ast_opt_type {
    AST_OPT_BOOL,
    AST_OPT_INT,
    AST_OPT_FLOAT,
    AST_OPT_ENUM,
    AST_OPT_STRING
} ast_opt_type;

/* One row of a plugin's declarative option table. The host validates the
 * YAML config against it and lists it in `alphast-run --list-plugins`. */
typedef struct ast_option_spec {
    const char *name;
    ast_opt_type type;
    const char *def;     /* default, as YAML text ("true", "0.01", "headwise") */
    double min, max;     /* inclusive range for INT and FLOAT; unchecked if min > max */
    const char *choices; /* ENUM only: "headwise|elementwise|none" */
    const char *help;
} ast_option_spec;

/* A validated option value: BOOL and INT in i (and f); FLOAT in f;
 * ENUM as its index in i and its text in s; STRING in s. */
typedef struct ast_optval {
    int64_t i;
    double f;
    const char *s;
} ast_optval;

/* ---- what the host tells a plugin ------------------------------------- */

typedef enum ast_plugin_kind {
    AST_KIND_ATTENTION = 1,
    AST_KIND_FFN = 2,
    AST_KIND_MONITOR = 3
} ast_plugin_kind;

/* Model sizes a layer plugin is built for. */
typedef struct ast_layer_dims {
    int d_model;    /* E: token width in and out */
    int heads;      /* H: E % H == 0 */
    int d_ff;       /* F: feed-forward width */
    int d_time;     /* T: width of the diffusion-time embedding */
    int layer;      /* 0-based index of this layer */
    int num_layers;
    float dropout;  /* p, applied only in training */
    float ln_eps;
} ast_layer_dims;

typedef struct ast_host ast_host;

typedef struct ast_create_args {
    const ast_host *host;
    ast_scope *scope;           /* NULL for monitors */
    const ast_layer_dims *dims; /* NULL for monitors */
    const ast_optval *opts;     /* one per options[] row, in that order */
    const char *backend;        /* the backend the instance runs on ("cpu"): pick fused kernels by it */
} ast_create_args;

/* Per-call inputs besides the token tensor x [B, N, E]. */
typedef struct ast_fwd_args {
    ast_tensor *mask; /* [B, N]: 1 valid cell, 0 padding; NULL = no padding */
    ast_tensor *time; /* [B, T]: diffusion-time embedding entering this layer */
    ast_tensor *positions; /* [B, N, 3]: cell positions entering this layer */
    int layer;
    /* ABI 2.5: [B, N, N] geodesic distances between the cells along each
     * set's expression k-NN graph, over their mean (docs/model.md §2.12); 0
     * on padded rows and columns. Given only to a plugin whose descriptor
     * sets wants_geodesic, else NULL. */
    ast_tensor *geodesic;
} ast_fwd_args;

/* A statistic published during a step (host->stat), e.g. "moe.tokens_per_expert". */
typedef struct ast_stat {
    const char *name;
    int layer;          /* -1 when not per layer */
    int n;
    const float *values;
} ast_stat;

typedef enum ast_phase { AST_PHASE_TRAIN_STEP = 1, AST_PHASE_VAL = 2, AST_PHASE_EPOCH_END = 3 } ast_phase;

/* Opaque destination of a monitor's metrics (the run's metrics.jsonl). */
typedef struct ast_sink ast_sink;

/* What a monitor sees after each step / validation / epoch. */
typedef struct ast_observation {
    ast_phase phase;
    int64_t step;
    int epoch;
    const ast_stat *stats;
    int n_stats;
    ast_sink *sink;
} ast_observation;

/* ---- host services ----------------------------------------------------- */

typedef enum ast_init { AST_INIT_ZERO, AST_INIT_ONE, AST_INIT_UNIFORM, AST_INIT_NORMAL } ast_init;
typedef enum ast_log_level { AST_LOG_DEBUG, AST_LOG_INFO, AST_LOG_WARN, AST_LOG_ERROR } ast_log_level;

/* The op set: one pointer per line of ops.def, at its slot. Each runs the
 * kernel of the backend that holds the context `c`, so a plugin built from
 * these ops runs on every backend unchanged. */
typedef struct ast_ops {
    uint32_t n_ops; /* slots this table fills (ops.def lines of the host's version) */
#define AST_OP(slot, ret, name, params, args) ret (*name) params;
#include "alphast/ops.def"
#undef AST_OP
} ast_ops;

struct ast_host {
    uint32_t abi_major, abi_minor, struct_size;

    /* The op set (ops.def), each with forward and backward. */
    const ast_ops *ops;

    /* Parameters: created once in create(); `a` is the bound (UNIFORM, +-a)
     * or the standard deviation (NORMAL). A PyTorch Linear(in, out) is
     * weight [out, in] and bias [out], both UNIFORM with a = 1/sqrt(in). */
    ast_tensor *(*param)(ast_scope *s, const char *name, int ndim, const int64_t *shape,
                         ast_init init, float a);
    /* State that is not trained but must survive a resume (MoE's selection
     * bias): created once in create(), zero-filled, saved in checkpoints and
     * best.safetensors under its full name and restored before training
     * continues. The plugin updates `data` itself; no gradient flows. */
    ast_tensor *(*buffer)(ast_scope *s, const char *name, int ndim, const int64_t *shape);

    /* Step services. */
    void *(*alloc)(ast_ctx *c, size_t bytes);            /* arena, 64-byte aligned, zeroed */
    /* Arena memory like alloc but not zeroed, for buffers written in full. */
    void *(*alloc_uninit)(ast_ctx *c, size_t bytes);
    int (*training)(const ast_ctx *c);                    /* 1 in training mode */
    int (*grad_enabled)(const ast_ctx *c);
    float *(*grad)(ast_ctx *c, ast_tensor *t);           /* NULL if t needs no gradient */
    /* Put a fused op on the tape (copied); marks out as requiring a
     * gradient when any input does. No-op when grad mode is off. */
    void (*record)(ast_ctx *c, const ast_node *n);
    uint64_t (*rng_u64)(ast_ctx *c);
    float (*rng_uniform)(ast_ctx *c);                     /* [0, 1) */
    float (*rng_normal)(ast_ctx *c);                      /* N(0, 1) */
    /* Add a named scalar [1] to the training loss (e.g. "moe_aux"). */
    void (*add_loss)(ast_ctx *c, const char *name, ast_tensor *scalar);
    /* Publish statistics for monitors (values are copied). */
    void (*stat)(ast_ctx *c, const char *name, int layer, const float *values, int n);
    /* A value the run schedules per optimiser step (a sweep's Lua
     * schedule): "moe.load_balance_weight", "moe.router_noise",
     * "masking.ratio"; `fallback` (the plugin's option) when nothing does. */
    float (*scheduled)(const ast_ctx *c, const char *name, float fallback);

    /* CPU kernels of fused ops. The thread pool (OPENBLAS_NUM_THREADS
     * threads) runs fn(arg, lo, hi) over [0, n) in contiguous ranges, one per
     * thread, or serially when n < 2 * grain. Each range must write its own
     * outputs. Inside fn, sgemm and parallel_for run on the calling thread;
     * ops and alloc must not be called there (the arena is not thread-safe). */
    void (*parallel_for)(int64_t n, int64_t grain, ast_range_fn fn, void *arg);
    /* Row-major C = alpha op(A) op(B) + beta C on host memory (OpenBLAS). */
    void (*sgemm)(int trans_a, int trans_b, int m, int n, int k, float alpha,
                  const float *a, int lda, const float *b, int ldb, float beta, float *cmat, int ldc);

    /* Monitors: write a metric to the run log; warn once per key per run. */
    void (*emit)(ast_sink *s, const char *name, int layer, double value);
    void (*warn_once)(ast_sink *s, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 3, 4)))
#endif
        ;

    void (*log)(ast_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
        __attribute__((format(printf, 2, 3)))
#endif
        ;

    /* ABI 2.3: copies of n floats from element `off` between a tensor's
     * data and host memory, for a plugin that looks at data the backend
     * holds (a mask, router logits) or hands it what it computed on the
     * host. On the CPU a memcpy; on a device a copy that waits for the ops
     * queued before it (read returns with the data in host_dst), so keep
     * them to what the host must see. Not for host->buffer tensors: those
     * are host memory, used through `data`. */
    void (*read)(const ast_ctx *c, const ast_tensor *t, int64_t off, int64_t n, float *host_dst);
    void (*write)(const ast_ctx *c, ast_tensor *t, int64_t off, int64_t n, const float *host_src);

    /* ABI 2.4: a key for a kernel that draws random numbers (a dropout
     * mask, as ast_mix64(key + i * golden)): the next draw of the step's
     * RNG, returned for a CPU kernel and put in the backend's memory at
     * *at, where a device kernel reads it. A captured step (CUDA graph)
     * replays with new keys only in *at: a key from rng_u64 passed by value
     * would repeat, so such a step is not captured. */
    uint64_t (*rng_key)(ast_ctx *c, const uint64_t **at);
    /* ABI 2.4: 1 when a monitor observes what `stat` publishes in this
     * step. A statistic read from device data costs the step a wait (and
     * its CUDA graph): compute and publish it only then. */
    int (*stats_wanted)(const ast_ctx *c);
    /* ABI 2.6: publish a statistic that is a tensor of the step (n =
     * t->size values), computed with ops where the step runs: on a device
     * it is copied to pinned host memory with the step's ops, nothing
     * waits, and a captured step (CUDA graph) keeps publishing it. Prefer
     * it to `stat` for anything reduced from device data. */
    void (*stat_tensor)(ast_ctx *c, const char *name, int layer, const ast_tensor *t);
};

/* ---- the descriptor a plugin returns ------------------------------------ */

/* Any function, stored in a kernel table and cast back by its owner. */
typedef void (*ast_kernel_fn)(void);

/* One fused op's kernel for one backend. */
typedef struct ast_kernel {
    const char *op;      /* "gated_attention": the plugin's name for the fused op */
    const char *backend; /* "cpu" */
    ast_kernel_fn fn;
} ast_kernel;

/* The kernel of `op` for `backend` in a descriptor's table, NULL if none. */
static inline ast_kernel_fn ast_kernel_find(const ast_kernel *k, int n, const char *op, const char *backend)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(k[i].op, op) && !strcmp(k[i].backend, backend)) return k[i].fn;
    return 0;
}

/* A key of the reference's flat config that sets one of the plugin's
 * options ("TransformerLayer_setting.moe_top_k" -> "top_k"). */
typedef struct ast_legacy_key {
    const char *key;    /* the full config key; the host's schema declares it */
    const char *option; /* a name in the plugin's options[] */
} ast_legacy_key;

typedef struct ast_plugin_desc {
    uint32_t abi_major, abi_minor, struct_size; /* AST_ABI_MAJOR, AST_ABI_MINOR, sizeof */
    ast_plugin_kind kind;
    const char *name;    /* what the config names: "gated", "moe" */
    const char *version;
    const char *summary; /* one line for --list-plugins */
    const ast_option_spec *options;
    int n_options;

    /* Build one instance (attention/ffn: one per layer). Return NULL and
     * write a one-line reason into err on failure. An attention plugin
     * is created only with dims->heads dividing dims->d_model (> 0): the
     * host checks that first. */
    void *(*create)(const ast_create_args *a, char *err, size_t errlen);
    /* NULL (ABI 2.5): the instance is one malloc'd block the host frees. */
    void (*destroy)(void *self);

    /* attention and ffn: x [B, N, E] -> [B, N, E], built from host ops so
     * the backward pass comes from the tape. */
    ast_tensor *(*forward)(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a);

    /* monitor: called after every training step, validation and epoch. */
    void (*observe)(void *self, const ast_observation *o);

    /* attention and ffn, optional: parameters one token uses (MoE: the
     * router and k experts). NULL means all of the instance's parameters. */
    int64_t (*active_params)(void *self);

    /* Fused ops the plugin implements itself, one kernel per backend (the
     * tiled gated attention, the MoE combine). The host refuses to create an
     * instance on a backend that lacks a kernel for one of these ops, naming
     * the op and the backends it has; create() picks its kernels by
     * a->backend (ast_kernel_find). NULL / 0: the plugin uses ops only. */
    const ast_kernel *kernels;
    int n_kernels;

    /* ABI 2.5, optional: the reference config's keys that feed this
     * plugin's options when the reference's switch chose it (use_moe: true
     * chooses moe) or when they are written beside it. NULL / 0: none. */
    const ast_legacy_key *legacy_keys;
    int n_legacy_keys;
    /* ABI 2.5, attention and ffn: 1 when forward reads a->geodesic, which
     * the host then computes for every set (a cost per step). */
    int wants_geodesic;
} ast_plugin_desc;

/* How the host ends an instance: the plugin's destroy, else free(). */
static inline void ast_plugin_destroy(const ast_plugin_desc *d, void *self)
{
    if (!self) return;
    if (d->destroy) d->destroy(self);
    else free(self);
}

#define AST_PLUGIN_DESC_INIT(kind_, name_, version_, summary_)                       \
    .abi_major = AST_ABI_MAJOR, .abi_minor = AST_ABI_MINOR,                           \
    .struct_size = sizeof(ast_plugin_desc), .kind = (kind_), .name = (name_),         \
    .version = (version_), .summary = (summary_)

#if defined(__GNUC__)
#define AST_EXPORT __attribute__((visibility("default")))
#else
#define AST_EXPORT
#endif

/* The entry point: the host calls it once with its table (plugin_api.h
 * keeps it in AST_API_SET; plain plugins get it again in create()). */
#define AST_API_SET(host) ((void)(host))
#define AST_PLUGIN_DEFINE(desc)                                                       \
    AST_EXPORT const ast_plugin_desc *alphast_plugin_entry(const ast_host *host);     \
    const ast_plugin_desc *alphast_plugin_entry(const ast_host *host)                 \
    {                                                                                 \
        AST_API_SET(host);                                                            \
        return &(desc);                                                               \
    }

#define AST_N_OPTIONS(table) ((int)(sizeof(table) / sizeof((table)[0])))

#include "alphast/abi_layout.h"

#ifdef __cplusplus
}
#endif
#endif
