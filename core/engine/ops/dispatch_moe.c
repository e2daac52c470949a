/* Mixture-of-experts routing in backend memory: keyed noise, the top-k
 * routing plan and the ops that read it (pick, gather, combine;
 * moe_grouped_linear is in dispatch_grouped.c). Shapes, outputs and tape
 * nodes; the kernels are the backends' (ops/ops_moe.c, cuda/ops_moe.cu).
 * Nothing here reads the plan: every size is known on the host from the
 * shapes, so a step that routes this way keeps its shapes and replays as a
 * graph. */
#include "engine/kernels.h"

/* T k candidate pairs, held exactly as floats and indexed in int32. */
static void check_pairs(int64_t tokens, int k, const char *op)
{
    AST_ASSERT(k >= 1 && tokens * k < (1ll << 24), "%s: %lld tokens x k %d (at most 2^24 pairs)", op,
               (long long)tokens, k);
}

/* The plan of T tokens and k slots: at least its pair arrays and offsets. */
static void check_plan(const ast_tensor *plan, int64_t tokens, int k, const char *op)
{
    check_pairs(tokens, k, op);
    AST_ASSERT(plan->ndim == 1 && plan->size >= AST_MOE_PLAN_OFFSETS(tokens * k) + 2,
               "%s: plan of %lld values for %lld tokens x %d (moe_route's output)", op, (long long)plan->size,
               (long long)tokens, k);
}

/* iarg[0] the key (a host kernel's), saved its slot in backend memory (a
 * device kernel's), farg[0] eps; in[0] the rows' mask or NULL. */
ast_tensor *ast_noise_normal(ast_ctx *c, int ndim, const int64_t *shape, ast_tensor *rows, float eps)
{
    ast_tensor *out = ast_empty(c, ndim, shape);
    AST_ASSERT(!rows || (ndim == 2 && rows->size == shape[0]), "noise_normal: rows of %lld values for %lld rows",
               rows ? (long long)rows->size : 0ll, (long long)shape[0]);
    const uint64_t *key_at;
    uint64_t key = ast_ctx_key(c, &key_at);
    ast_node n = {.out = out, .in = {rows}, .n_in = rows ? 1 : 0, .saved = (void *)key_at, .iarg = {(int64_t)key},
                  .farg = {eps}};
    int grad = ast_grad_enabled(c);
    ast_ctx_set_grad(c, 0); /* noise: nothing to differentiate */
    ast_op_run(c, AST_OP_noise_normal, &n);
    ast_ctx_set_grad(c, grad);
    return out;
}

/* iarg[0] k, iarg[1] per_set; farg[0] the capacity factor. */
ast_tensor *ast_moe_route(ast_ctx *c, ast_tensor *logits, ast_tensor *valid, int k, float capacity_factor,
                          int64_t per_set)
{
    char s[64];
    AST_ASSERT(logits->ndim == 2, "moe_route: logits %s, expected [T, E]", ast_shape_str(logits, s, sizeof s));
    int64_t tokens = logits->shape[0], experts = logits->shape[1];
    check_pairs(tokens, k, "moe_route");
    AST_ASSERT(k <= experts, "moe_route: k %d above %lld experts", k, (long long)experts);
    AST_ASSERT(!valid || valid->size == tokens, "moe_route: valid of %lld values for %lld tokens",
               valid ? (long long)valid->size : 0ll, (long long)tokens);
    AST_ASSERT(per_set >= 1 && tokens % per_set == 0, "moe_route: %lld tokens are not sets of %lld",
               (long long)tokens, (long long)per_set);
    AST_ASSERT(capacity_factor >= 0.0f, "moe_route: capacity factor %g", (double)capacity_factor);
    int64_t size = AST_MOE_PLAN_SIZE(tokens, k, experts, tokens / per_set);
    ast_node n = {.out = ast_empty(c, 1, (int64_t[]){size}), .in = {logits, valid}, .n_in = 2,
                  .iarg = {k, per_set}, .farg = {capacity_factor}};
    int grad = ast_grad_enabled(c);
    ast_ctx_set_grad(c, 0); /* decisions: no gradient */
    ast_tensor *plan = ast_op_run(c, AST_OP_moe_route, &n);
    ast_ctx_set_grad(c, grad);
    return plan;
}

/* in[1] the plan; iarg[0] k. */
ast_tensor *ast_moe_pick(ast_ctx *c, ast_tensor *logits, ast_tensor *plan, int k)
{
    char s[64];
    AST_ASSERT(logits->ndim == 2, "moe_pick: logits %s, expected [T, E]", ast_shape_str(logits, s, sizeof s));
    check_plan(plan, logits->shape[0], k, "moe_pick");
    return ast_op_run(c, AST_OP_moe_pick, &(ast_node){.out = ast_empty(c, 2, (int64_t[]){logits->shape[0], k}),
                                                       .in = {logits, plan}, .n_in = 2, .iarg = {k}});
}

/* in[1] the plan; iarg[0] k. */
ast_tensor *ast_moe_gather(ast_ctx *c, ast_tensor *x, ast_tensor *plan, int k)
{
    int64_t tokens = ast_rows(x);
    check_plan(plan, tokens, k, "moe_gather");
    return ast_op_run(c, AST_OP_moe_gather, &(ast_node){.out = ast_empty(c, 2, (int64_t[]){tokens * k, ast_cols(x)}),
                                                         .in = {x, plan}, .n_in = 2, .iarg = {k}});
}

/* in[2] the plan. */
ast_tensor *ast_moe_combine(ast_ctx *c, ast_tensor *y, ast_tensor *weights, ast_tensor *plan)
{
    char s1[64], s2[64];
    AST_ASSERT(weights->ndim == 2 && y->ndim == 2 && y->shape[0] == weights->size,
               "moe_combine: weights %s for expert rows %s, expected [T, k] and [T k, D]",
               ast_shape_str(weights, s1, sizeof s1), ast_shape_str(y, s2, sizeof s2));
    int64_t tokens = weights->shape[0];
    check_plan(plan, tokens, (int)weights->shape[1], "moe_combine");
    return ast_op_run(c, AST_OP_moe_combine, &(ast_node){.out = ast_empty(c, 2, (int64_t[]){tokens, y->shape[1]}),
                                                          .in = {y, weights, plan}, .n_in = 3});
}
