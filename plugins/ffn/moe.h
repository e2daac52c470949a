/* Internal interface of the mixture-of-experts FFN plugin (docs/model.md §2.7):
 * the instance, the routing decision of one forward, and the pieces
 * (experts, router, dispatch, combine) that ffn_moe.c puts together. */
#ifndef ALPHAST_PLUGIN_MOE_H
#define ALPHAST_PLUGIN_MOE_H

#include <stdlib.h>

#include "alphast/plugin_api.h"
#include "moe_combine.h"

/* A broken caller contract (a programming error, like a core shape
 * assertion): say what and stop. */
#define MOE_REQUIRE(cond, ...)                                                         \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            ast_log(AST_LOG_ERROR, "ffn moe: " __VA_ARGS__);                           \
            abort();                                                                   \
        }                                                                              \
    } while (0)

typedef enum moe_router_kind { MOE_ROUTER_TOPK, MOE_ROUTER_EXPERT_CHOICE } moe_router_kind;
typedef enum moe_balance_kind { MOE_BALANCE_LOSS, MOE_BALANCE_BIAS, MOE_BALANCE_NONE } moe_balance_kind;

/* One expert: w2(Dropout(ReLU(w1(x)))). */
typedef struct moe_expert {
    ast_weights w1, w2;
} moe_expert;

typedef struct moe_opts {
    int num_experts, top_k, num_shared, hidden;
    float lb_weight, noise_eps, capacity_factor, bias_rate;
    moe_router_kind router;
    moe_balance_kind balance;
    int time_conditioned;
} moe_opts;

typedef struct moe {
    moe_opts o;
    int d_model;
    float dropout;
    ast_weights gate, w_noise; /* [n, E], no bias */
    ast_weights time_proj;     /* [n, T] and [n]; only when time_conditioned */
    /* [n] balance: bias only (else NULL): a host buffer, so checkpoints
     * and best.safetensors keep it; added to the logits for selection only. */
    ast_tensor *sel_bias;
    moe_combine_fn combine; /* the kernel of the fused combine for this instance's backend */
    /* Route with the plan ops in backend memory (moe_device.c): a device
     * backend, top-k, balance loss or none. Else on host copies. */
    int route_on_device;
    /* The routed experts' parameters by layer, [num_experts] each, as
     * grouped_linear takes them (one call runs every expert). */
    ast_tensor **w1, **b1, **w2, **b2;
    moe_expert *shared;     /* [num_shared]: the tail of experts */
    moe_expert experts[];   /* [num_experts] routed, then the shared ones */
} moe;

/* The tokens of one forward, flattened to rows: the valid ones (routed on
 * the host), or all of them with their mask (routed on the device). */
typedef struct moe_tokens {
    ast_tensor *x;        /* [Tv, E], or [T, E] */
    int64_t n;            /* Tv, or T */
    const int32_t *batch; /* [Tv] set index of each row (for the time embedding), or NULL: */
    int64_t sets;         /* the rows are `sets` sets of n / sets rows */
    ast_tensor *valid;    /* [T] 1 valid, 0 padding, or NULL: every row */
} moe_tokens;

/* The router's output of one forward, [Tv, n] each, as tensors on the
 * backend and as host copies read once: expert choice's decisions, the
 * balance loss's argmax counts and the statistics are made on the host
 * (top-k's decisions by the op moe_route). */
typedef struct moe_scores {
    ast_tensor *logits, *probs;
    const float *logits_h, *probs_h;
} moe_scores;

/* One forward's routing: the kept (token, expert) assignments sorted by
 * expert (a counting sort), each with the row of `weights` holding its
 * differentiable routing weight. Lives in the step arena, so the gather
 * and combine of the backward reuse the same permutation. */
typedef struct moe_routing {
    int32_t *token;    /* [n_pairs] row of the token in moe_tokens.x */
    int32_t *weight;   /* [n_pairs] row of `weights` */
    int64_t *offset;   /* [num_experts + 1] expert e owns [offset[e], offset[e+1]) */
    ast_tensor *weights; /* [M, 1] */
    int64_t n_pairs;
    int64_t dropped;   /* the moe.dropped_tokens statistic (ffn_moe.c) */
    float *load;       /* [num_experts] tokens that selected each expert, before capacity */
} moe_routing;

/* moe_expert.c */
void moe_expert_init(ast_scope *s, const char *prefix, int j, int d_model, int hidden, moe_expert *e);
ast_tensor *moe_expert_forward(const moe *m, ast_ctx *c, const moe_expert *e, ast_tensor *x);
int moe_experts_group(moe *m);
ast_tensor *moe_experts_forward(const moe *m, ast_ctx *c, ast_tensor *x, const int64_t *offset);
int64_t moe_expert_numel(const moe_expert *e);

/* moe_router.c */
ast_tensor *moe_router_logits(const moe *m, ast_ctx *c, const moe_tokens *tk, ast_tensor *time);
void moe_route(const moe *m, ast_ctx *c, const moe_scores *s, moe_routing *r);
ast_tensor *moe_balance_loss(const moe *m, ast_ctx *c, const moe_scores *s);
void moe_update_bias(moe *m, const moe_routing *r, int64_t tokens);

/* moe_device.c */
ast_tensor *moe_forward_on_device(const moe *m, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a);

/* moe_dispatch.c */
void moe_sort_pairs(ast_ctx *c, int n_experts, const int32_t *expert, const int32_t *token, const int32_t *weight,
                    int64_t n, int64_t capacity, moe_routing *r);
ast_tensor *moe_dispatch(const moe *m, ast_ctx *c, const moe_tokens *tk, const moe_routing *r);

/* moe_combine.c, moe_combine_ops.c: the kernels of the fused op
 * "moe_combine" (moe_combine.h) that the descriptor lists for "cpu" and
 * "cuda"; the instance calls its backend's through moe.combine. */

#endif
