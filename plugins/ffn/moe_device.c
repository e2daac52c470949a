/* The top-k MoE forward routed in backend memory (ABI 2.6's plan ops), for
 * a device backend: the step never waits for the host and keeps its shapes
 * (every row is routed, padded ones with no pairs; the expert rows are the
 * worst case T k, those past the kept pairs zero), so it replays as a CUDA
 * graph. The same decisions and arithmetic as the host routing
 * (moe_router.c, moe_dispatch.c, moe_combine_ops.c) on the valid rows; the
 * balance loss divides by the valid tokens counted on the device, and the
 * statistics are published as tensors (host->stat_tensor), read after the
 * step. */
#include "moe.h"

/* x [B, N, E] (or [rows, E]) as tokens: every row, with the mask. */
static moe_tokens all_tokens(const moe *m, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    int64_t rows = x->size / m->d_model;
    const ast_tensor *mask = a ? a->mask : NULL;
    MOE_REQUIRE(!mask || mask->size == rows, "mask has %lld entries for %lld cells", (long long)mask->size,
                (long long)rows);
    moe_tokens tk = {.x = ast_reshape(c, x, 2, (int64_t[]){rows, m->d_model}), .n = rows,
                     .sets = x->ndim > 2 ? x->shape[0] : 1};
    if (mask) tk.valid = ast_reshape(c, (ast_tensor *)mask, 1, (int64_t[]){rows});
    return tk;
}

/* The plan's n values from `at`, a new [n] tensor. */
static ast_tensor *plan_part(ast_ctx *c, ast_tensor *plan, int64_t at, int64_t n) { return ast_slice(c, plan, at, n); }

/* moe_balance_loss over the valid rows: w n sum_e f_e P_e with the counts
 * of the plan's argmax and the valid tokens Tv from the plan (a device
 * scalar), so the step does not read them: w n dot / Tv^2. */
static ast_tensor *balance_loss(const moe *m, ast_ctx *c, ast_tensor *prob_sum, ast_tensor *plan, int64_t pairs)
{
    int n = m->o.num_experts;
    ast_tensor *argmax_count = plan_part(c, plan, AST_MOE_PLAN_ARGMAX(pairs, n), n);
    ast_tensor *dot = ast_sum(c, ast_mul(c, prob_sum, argmax_count));
    ast_tensor *tokens = plan_part(c, plan, AST_MOE_PLAN_VALID, 1);
    float weight = ast_ctx_scheduled(c, "moe.load_balance_weight", m->o.lb_weight);
    return ast_div(c, ast_affine(c, dot, weight * (float)n, 0.0f), ast_mul(c, tokens, tokens));
}

/* The statistics of ffn_moe.c's publish_stats and publish_set_stats, as tensors. */
static void publish_stats(const moe *m, ast_ctx *c, int layer, ast_tensor *plan, ast_tensor *prob_sum, ast_tensor *aux,
                          const moe_tokens *tk)
{
    int n = m->o.num_experts;
    int64_t pairs = tk->n * m->o.top_k;
    ast_tensor *tokens = plan_part(c, plan, AST_MOE_PLAN_VALID, 1);
    ast_publish_stat_tensor(c, "moe.tokens_per_expert", layer, plan_part(c, plan, AST_MOE_PLAN_COUNT(pairs, n), n));
    ast_publish_stat_tensor(c, "moe.router_prob_mean", layer, ast_div(c, prob_sum, tokens));
    ast_publish_stat_tensor(c, "moe.dropped_tokens", layer, plan_part(c, plan, AST_MOE_PLAN_DROPPED, 1));
    ast_publish_stat_tensor(c, "moe.aux_loss", layer, aux ? aux : ast_zeros(c, 1, (int64_t[]){1}));
    ast_publish_stat_tensor(c, "moe.set_tokens_per_expert", layer,
                            plan_part(c, plan, AST_MOE_PLAN_SETS(pairs, n), tk->sets * n));
}

/* sum over kept pairs of w * Expert_e(x_t), [T, E]: moe_dispatch with the plan. */
static ast_tensor *routed_experts(const moe *m, ast_ctx *c, const moe_tokens *tk, ast_tensor *logits,
                                  ast_tensor *plan)
{
    int k = m->o.top_k, n = m->o.num_experts;
    ast_tensor *weights = ast_softmax(c, ast_moe_pick(c, logits, plan, k), -1);
    ast_tensor *x = ast_moe_gather(c, tk->x, plan, k);
    ast_tensor *hid = ast_relu(c, ast_moe_grouped_linear(c, x, plan, k, n, m->w1, m->b1));
    ast_tensor *y = ast_moe_grouped_linear(c, ast_dropout(c, hid, m->dropout), plan, k, n, m->w2, m->b2);
    return ast_moe_combine(c, y, weights, plan);
}

ast_tensor *moe_forward_on_device(const moe *m, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    moe_tokens tk = all_tokens(m, c, x, a);
    ast_tensor *logits = moe_router_logits(m, c, &tk, a ? a->time : NULL);
    ast_tensor *probs = ast_softmax(c, logits, -1);
    ast_tensor *plan = ast_moe_route(c, logits, tk.valid, m->o.top_k, m->o.capacity_factor, tk.n / tk.sets);
    ast_tensor *y = routed_experts(m, c, &tk, logits, plan);
    for (int j = 0; j < m->o.num_shared; j++) y = ast_add(c, y, moe_expert_forward(m, c, &m->shared[j], tk.x));
    ast_tensor *valid_col = tk.valid ? ast_reshape(c, tk.valid, 2, (int64_t[]){tk.n, 1}) : NULL;
    if (valid_col && m->o.num_shared) y = ast_mul(c, y, valid_col); /* padded rows: 0, as the host's scatter */

    int stats = ast_stats_wanted(c);
    ast_tensor *prob_sum = NULL, *aux = NULL;
    if (m->o.balance == MOE_BALANCE_LOSS || stats)
        prob_sum = ast_sum_axis(c, valid_col ? ast_mul(c, probs, valid_col) : probs, 0);
    if (m->o.balance == MOE_BALANCE_LOSS) {
        aux = balance_loss(m, c, prob_sum, plan, tk.n * m->o.top_k);
        ast_add_loss(c, "moe_aux", aux);
    }
    if (stats) publish_stats(m, c, a ? a->layer : -1, plan, ast_reshape(c, prob_sum, 1, (int64_t[]){m->o.num_experts}),
                             aux, &tk);
    return ast_reshape(c, y, x->ndim, x->shape);
}
