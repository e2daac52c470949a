/* The router (docs/model.md §2.7): logits = gate(x) [+ training noise] [+ time
 * projection], then either top-k per token or expert choice (each expert
 * takes its best tokens); the load-balance loss and the aux-loss-free bias
 * update. Top-k decisions come from the op moe_route, whose plan is read
 * on the host; expert choice decides on host copies of the probabilities
 * (moe_scores); the routing weights are built from host ops so their
 * gradient reaches the gate through autograd. A device routes top-k
 * without the host read (moe_device.c). */
#include <math.h>
#include <stdlib.h>

#include "moe.h"

ast_tensor *moe_router_logits(const moe *m, ast_ctx *c, const moe_tokens *tk, ast_tensor *time)
{
    int n = m->o.num_experts;
    ast_tensor *logits = ast_linear(c, tk->x, m->gate.weight, NULL);
    float noise_eps = ast_ctx_scheduled(c, "moe.router_noise", m->o.noise_eps);
    if (ast_training(c) && noise_eps > 0.0f) {
        ast_tensor *scale = ast_softplus(c, ast_linear(c, tk->x, m->w_noise.weight, NULL));
        /* N(0, eps^2) from a kernel key (ABI 2.6's noise_normal): valid rows
         * draw what they would compacted, so both routings see one noise */
        ast_tensor *eps = ast_noise_normal(c, 2, (int64_t[]){tk->n, n}, tk->valid, noise_eps);
        logits = ast_add(c, logits, ast_mul(c, eps, scale));
    }
    if (m->o.time_conditioned) {
        MOE_REQUIRE(time && time->ndim == 2 && time->shape[1] == m->time_proj.weight->shape[1],
                    "time_conditioned needs the time embedding [B, %lld] in the forward args",
                    (long long)m->time_proj.weight->shape[1]);
        ast_tensor *per_set = ast_linear(c, time, m->time_proj.weight, m->time_proj.bias);
        if (tk->batch) return ast_add(c, logits, ast_gather_rows(c, per_set, tk->batch, tk->n));
        ast_tensor *by_set = ast_reshape(c, logits, 3, (int64_t[]){tk->sets, tk->n / tk->sets, n});
        by_set = ast_add(c, by_set, ast_reshape(c, per_set, 3, (int64_t[]){tk->sets, 1, n}));
        logits = ast_reshape(c, by_set, 2, (int64_t[]){tk->n, n});
    }
    return logits;
}

/* Capacity ceil(assignments * factor / n) without libm (expert choice's). */
static int64_t capacity_of(double assignments, double factor, int n)
{
    double v = assignments * factor / n;
    int64_t cap = (int64_t)v;
    return cap < v ? cap + 1 : cap;
}

/* The logits top-k selects by: with balance: bias, logit + bias (a host
 * buffer, written to the backend), else the logits. */
static ast_tensor *selection_logits(const moe *m, ast_ctx *c, ast_tensor *logits)
{
    if (!m->sel_bias) return logits;
    ast_tensor *bias = ast_zeros(c, 1, (int64_t[]){m->o.num_experts});
    ast_tensor_write(c, bias, 0, bias->size, m->sel_bias->data);
    return ast_add(c, logits, bias);
}

/* The host's moe_routing from moe_route's plan (its host copy). */
static void routing_of_plan(ast_ctx *c, const float *plan, int n, int64_t pairs, moe_routing *r)
{
    r->n_pairs = (int64_t)plan[AST_MOE_PLAN_KEPT_PAIRS];
    r->dropped = (int64_t)plan[AST_MOE_PLAN_DROPPED];
    r->offset = ast_alloc(c, (size_t)(n + 1) * sizeof *r->offset);
    r->load = ast_alloc(c, (size_t)n * sizeof *r->load);
    for (int e = 0; e <= n; e++) r->offset[e] = (int64_t)plan[AST_MOE_PLAN_OFFSETS(pairs) + e];
    for (int e = 0; e < n; e++) r->load[e] = plan[AST_MOE_PLAN_LOAD(pairs, n) + e];
    r->token = ast_alloc(c, (size_t)r->n_pairs * sizeof *r->token);
    r->weight = ast_alloc(c, (size_t)r->n_pairs * sizeof *r->weight);
    for (int64_t p = 0; p < r->n_pairs; p++) {
        r->token[p] = (int32_t)plan[AST_MOE_PLAN_TOKEN(pairs) + p];
        r->weight[p] = (int32_t)plan[AST_MOE_PLAN_WEIGHT(pairs) + p];
    }
}

/* Top-k: the op moe_route decides (candidates in slot-major order, every
 * token's first choice before any second, so capacity drops the least
 * preferred slots first; a stable sort by expert); its plan comes to the
 * host once. Weights = softmax over the k selected logits (moe_pick). */
static void route_top_k(const moe *m, ast_ctx *c, const moe_scores *s, moe_routing *r)
{
    int n = m->o.num_experts, k = m->o.top_k;
    int64_t tokens = s->logits->shape[0], pairs = tokens * k;
    ast_tensor *plan = ast_moe_route(c, selection_logits(m, c, s->logits), NULL, k, m->o.capacity_factor, tokens);
    routing_of_plan(c, ast_host_copy(c, plan), n, pairs, r);
    r->weights = ast_reshape(c, ast_softmax(c, ast_moe_pick(c, s->logits, plan, k), -1), 2, (int64_t[]){pairs, 1});
}

typedef struct scored {
    float score;
    int32_t token;
} scored;

static int by_score_desc(const void *pa, const void *pb)
{
    const scored *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    return (a->token > b->token) - (a->token < b->token);
}

/* Expert choice (arXiv 2202.09368): expert e takes the ceil(tokens*k/n)
 * tokens with the highest router probability (ties: lower token) and
 * weights each by that probability. Tokens nobody picks are "dropped". */
static void route_expert_choice(const moe *m, ast_ctx *c, const moe_scores *s, moe_routing *r)
{
    int n = m->o.num_experts;
    int64_t tokens = s->probs->shape[0];
    int64_t cap = capacity_of((double)tokens * m->o.top_k, 1.0, n);
    if (cap > tokens) cap = tokens;
    int64_t pairs = cap * n;
    int32_t *expert = ast_alloc(c, (size_t)pairs * sizeof *expert);
    int32_t *token = ast_alloc(c, (size_t)pairs * sizeof *token);
    int32_t *weight = ast_alloc(c, (size_t)pairs * sizeof *weight);
    scored *order = ast_alloc(c, (size_t)tokens * sizeof *order);
    unsigned char *picked = ast_alloc(c, (size_t)tokens);
    for (int e = 0; e < n; e++) {
        for (int64_t t = 0; t < tokens; t++) order[t] = (scored){s->probs_h[t * n + e], (int32_t)t};
        qsort(order, (size_t)tokens, sizeof *order, by_score_desc);
        for (int64_t q = 0; q < cap; q++) {
            int64_t i = e * cap + q, t = order[q].token;
            expert[i] = e;
            token[i] = (int32_t)t;
            weight[i] = (int32_t)(t * n + e);
            picked[t] = 1;
        }
    }
    moe_sort_pairs(c, n, expert, token, weight, pairs, pairs, r);
    r->dropped = 0;
    for (int64_t t = 0; t < tokens; t++) r->dropped += !picked[t];
    r->weights = ast_reshape(c, s->probs, 2, (int64_t[]){tokens * n, 1});
}

void moe_route(const moe *m, ast_ctx *c, const moe_scores *s, moe_routing *r)
{
    if (m->o.router == MOE_ROUTER_EXPERT_CHOICE)
        route_expert_choice(m, c, s, r);
    else
        route_top_k(m, c, s, r);
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int e = 1; e < n; e++)
        if (v[e] > v[best]) best = e;
    return best;
}

/* w * n * sum_e f_e P_e over the routed (valid) tokens, with P_e the mean
 * router probability and f_e the fraction of tokens whose argmax is e (a
 * constant: only P carries the gradient). w is the option unless the run
 * schedules it. */
ast_tensor *moe_balance_loss(const moe *m, ast_ctx *c, const moe_scores *s)
{
    int n = m->o.num_experts;
    int64_t tokens = s->logits->shape[0];
    float *count = ast_alloc(c, (size_t)n * sizeof *count);
    for (int64_t t = 0; t < tokens; t++) count[argmax(s->logits_h + t * n, n)] += 1.0f;
    ast_tensor *argmax_count = ast_zeros(c, 1, (int64_t[]){n});
    ast_tensor_write(c, argmax_count, 0, n, count);
    ast_tensor *prob_sum = ast_sum_axis(c, s->probs, 0);
    ast_tensor *dot = ast_sum(c, ast_mul(c, prob_sum, argmax_count));
    float weight = ast_ctx_scheduled(c, "moe.load_balance_weight", m->o.lb_weight);
    return ast_affine(c, dot, weight * (float)n / ((float)tokens * (float)tokens), 0.0f);
}

/* DeepSeek-V3's aux-loss-free balancing: nudge each expert's selection bias
 * by +-rate toward the mean load (sign of mean - load), outside autograd,
 * in place in its buffer (host memory on every backend). */
void moe_update_bias(moe *m, const moe_routing *r, int64_t tokens)
{
    float mean = (float)tokens * (float)m->o.top_k / (float)m->o.num_experts, *bias = m->sel_bias->data;
    for (int e = 0; e < m->o.num_experts; e++) {
        if (r->load[e] < mean) bias[e] += m->o.bias_rate;
        if (r->load[e] > mean) bias[e] -= m->o.bias_rate;
    }
}
