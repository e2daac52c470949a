/* The router (docs/model.md §2.7): logits = gate(x) [+ training noise] [+ time
 * projection], then either top-k per token or expert choice (each expert
 * takes its best tokens); the load-balance loss and the aux-loss-free bias
 * update. Routing decisions are made on host copies of the logits and
 * probabilities (moe_scores); the routing weights are built from host ops
 * so their gradient reaches the gate through autograd. */
#include <math.h>
#include <stdlib.h>

#include "moe.h"

/* The router's training noise: N(0, eps^2) per logit from one 64-bit draw
 * of the step's RNG, hashed with the element's index (ast_mix64) into two
 * uniforms for Box-Muller, so any thread can compute any element. In float:
 * the uniforms are exact (24-bit integers over 2^24) and logf, sqrtf, cosf
 * are within an ulp or two of the double formula, at half its cost (it
 * covers every logit, so it grows with the number of experts). It is drawn
 * on the host and written to the backend, so every backend routes with
 * the same noise. */
typedef struct noise_args {
    float *out;
    uint64_t key;
    float eps;
} noise_args;

static void noise_range(void *arg, int64_t lo, int64_t hi)
{
    const noise_args *a = arg;
    for (int64_t i = lo; i < hi; i++) {
        uint64_t z = ast_mix64(a->key + (uint64_t)i * 0x9e3779b97f4a7c15ull);
        /* u1 in (0, 1] so the log is finite; u2 in [0, 1) */
        float u1 = ((float)(z >> 40) + 1.0f) / 16777216.0f, u2 = (float)(z & 0xffffff) / 16777216.0f;
        a->out[i] = a->eps * (sqrtf(-2.0f * logf(u1)) * cosf(6.28318531f * u2));
    }
}

ast_tensor *moe_router_logits(const moe *m, ast_ctx *c, const moe_tokens *tk, ast_tensor *time)
{
    int n = m->o.num_experts;
    ast_tensor *logits = ast_linear(c, tk->x, m->gate.weight, NULL);
    float noise_eps = ast_ctx_scheduled(c, "moe.router_noise", m->o.noise_eps);
    if (ast_training(c) && noise_eps > 0.0f) {
        ast_tensor *scale = ast_softplus(c, ast_linear(c, tk->x, m->w_noise.weight, NULL));
        ast_tensor *eps = ast_zeros(c, 2, (int64_t[]){tk->n, n});
        float *noise = ast_alloc_uninit(c, (size_t)eps->size * sizeof *noise);
        ast_parallel_for(eps->size, 4096, noise_range, &(noise_args){noise, ast_rng_u64(c), noise_eps});
        ast_tensor_write(c, eps, 0, eps->size, noise);
        logits = ast_add(c, logits, ast_mul(c, eps, scale));
    }
    if (m->o.time_conditioned) {
        MOE_REQUIRE(time && time->ndim == 2 && time->shape[1] == m->time_proj.weight->shape[1],
                    "time_conditioned needs the time embedding [B, %lld] in the forward args",
                    (long long)m->time_proj.weight->shape[1]);
        ast_tensor *per_set = ast_linear(c, time, m->time_proj.weight, m->time_proj.bias);
        logits = ast_add(c, logits, ast_gather_rows(c, per_set, tk->batch, tk->n));
    }
    return logits;
}

/* The k largest of logit + bias (bias NULL: of logit), largest first; ties
 * go to the lower index. */
static void top_k(const float *logit, const float *bias, int n, int k, int32_t *chosen)
{
    for (int s = 0; s < k; s++) {
        int best = -1;
        float best_v = 0.0f;
        for (int e = 0; e < n; e++) {
            int taken = 0;
            for (int q = 0; q < s; q++) taken |= chosen[q] == e;
            float v = bias ? logit[e] + bias[e] : logit[e];
            if (!taken && (best < 0 || v > best_v)) {
                best = e;
                best_v = v;
            }
        }
        chosen[s] = best;
    }
}

/* Capacity ceil(assignments * factor / n) without libm. */
static int64_t capacity_of(double assignments, double factor, int n)
{
    double v = assignments * factor / n;
    int64_t cap = (int64_t)v;
    return cap < v ? cap + 1 : cap;
}

typedef struct top_k_args {
    const float *logits, *bias;
    int n, k;
    int64_t tokens;
    int32_t *chosen, *expert, *token, *weight, *flat; /* [tokens * k] each */
} top_k_args;

/* Each token's choices go to its own entries, so tokens run on the host's
 * threads (with 64 experts the search is a visible serial share otherwise). */
static void top_k_range(void *arg, int64_t lo, int64_t hi)
{
    const top_k_args *a = arg;
    for (int64_t t = lo; t < hi; t++) {
        int32_t *chosen = a->chosen + t * a->k;
        top_k(a->logits + t * a->n, a->bias, a->n, a->k, chosen);
        for (int s = 0; s < a->k; s++) {
            int64_t i = s * a->tokens + t;
            a->expert[i] = chosen[s];
            a->token[i] = (int32_t)t;
            a->weight[i] = (int32_t)(t * a->k + s);
            a->flat[t * a->k + s] = (int32_t)(t * a->n + chosen[s]);
        }
    }
}

/* Top-k: candidates in slot-major order (every token's first choice before
 * any second choice), so capacity drops the least preferred slots first.
 * Weights = softmax over the k selected logits, gathered from the logits. */
static void route_top_k(const moe *m, ast_ctx *c, const moe_scores *s, moe_routing *r)
{
    int n = m->o.num_experts, k = m->o.top_k;
    int64_t tokens = s->logits->shape[0], pairs = tokens * k;
    size_t bytes = (size_t)pairs * sizeof(int32_t);
    top_k_args a = {s->logits_h, m->sel_bias ? m->sel_bias->data : NULL, n, k, tokens, ast_alloc(c, bytes),
                    ast_alloc(c, bytes), ast_alloc(c, bytes), ast_alloc(c, bytes), ast_alloc(c, bytes)};
    /* a token's search costs about n * k compares: ~16k per range */
    ast_parallel_for(tokens, 1 + 16384 / ((int64_t)n * k), top_k_range, &a);
    int64_t cap = m->o.capacity_factor > 0.0f ? capacity_of((double)pairs, m->o.capacity_factor, n) : pairs;
    moe_sort_pairs(c, n, a.expert, a.token, a.weight, pairs, cap, r);

    ast_tensor *column = ast_reshape(c, s->logits, 2, (int64_t[]){tokens * n, 1});
    ast_tensor *picked = ast_reshape(c, ast_gather_rows(c, column, a.flat, pairs), 2, (int64_t[]){tokens, k});
    r->weights = ast_reshape(c, ast_softmax(c, picked, -1), 2, (int64_t[]){pairs, 1});
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
