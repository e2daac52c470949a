/* The CPU kernels of routing in backend memory (ops/dispatch_moe.c): the
 * reference for the device's (cuda/ops_moe.cu), serial and in the order
 * the plugin's host routing uses (plugins/ffn/moe_router.c), so the two
 * make the same decisions. */
#include <math.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/ops/ops_plan.h"

/* ---- noise_normal ------------------------------------------------------------ */

/* The element's draw: eps N(0, 1) from the 24-bit halves of its hash, u1
 * in (0, 1] so the log is finite (the plugin's formula until ABI 2.6). */
static float normal_of(uint64_t key, int64_t j, float eps)
{
    uint64_t z = ast_mix64(key + (uint64_t)j * 0x9e3779b97f4a7c15ull);
    float u1 = ((float)(z >> 40) + 1.0f) / 16777216.0f, u2 = (float)(z & 0xffffff) / 16777216.0f;
    return eps * (sqrtf(-2.0f * logf(u1)) * cosf(6.28318531f * u2));
}

typedef struct noise_args {
    float *out;
    uint64_t key;
    float eps;
} noise_args;

static void noise_range(void *arg, int64_t lo, int64_t hi)
{
    const noise_args *a = arg;
    for (int64_t i = lo; i < hi; i++) a->out[i] = normal_of(a->key, i, a->eps);
}

/* in[0] the rows' mask or NULL: a skipped row gets zeros, a kept one the
 * draws of its place among the kept rows. */
static void noise_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *rows = n->in[0], *y = n->out;
    uint64_t key = (uint64_t)n->iarg[0];
    float eps = n->farg[0];
    if (!rows) {
        /* a row's draws cost ~50 ns each: 4096 per range */
        ast_parallel_for(y->size, 4096, noise_range, &(noise_args){y->data, key, eps});
        return;
    }
    int64_t cols = ast_cols(y), rank = 0;
    for (int64_t r = 0; r < ast_rows(y); r++) {
        for (int64_t k = 0; k < cols; k++)
            y->data[r * cols + k] = rows->data[r] != 0.0f ? normal_of(key, rank * cols + k, eps) : 0.0f;
        rank += rows->data[r] != 0.0f;
    }
}

/* ---- moe_route --------------------------------------------------------------- */

/* The k largest logits, largest first, ties to the lower index. */
static void top_k(const float *logit, int n, int k, float *chosen)
{
    for (int s = 0; s < k; s++) {
        int best = -1;
        for (int e = 0; e < n; e++) {
            int taken = 0;
            for (int q = 0; q < s; q++) taken |= (int)chosen[q] == e;
            if (!taken && (best < 0 || logit[e] > logit[best])) best = e;
        }
        chosen[s] = (float)best;
    }
}

static int argmax(const float *v, int n)
{
    int best = 0;
    for (int e = 1; e < n; e++)
        if (v[e] > v[best]) best = e;
    return best;
}

/* ceil(assignments * factor / n) in double (the plugin's capacity_of). */
static int64_t capacity_of(double assignments, double factor, int n)
{
    double v = assignments * factor / n;
    int64_t cap = (int64_t)v;
    return cap < v ? cap + 1 : cap;
}

typedef struct choose_args {
    const float *logits;
    float *expert;
    int experts, k;
} choose_args;

/* Each token's choices go to its own entries, so tokens run on the pool's
 * threads (with 64 experts the search is a visible serial share otherwise). */
static void choose_range(void *arg, int64_t lo, int64_t hi)
{
    const choose_args *a = arg;
    for (int64_t t = lo; t < hi; t++) top_k(a->logits + t * a->experts, a->experts, a->k, a->expert + t * a->k);
}

/* Every token's choices and the argmax counts; the valid tokens. */
static int64_t choose(const float *logits, const float *valid, int64_t tokens, int experts, int k, float *plan)
{
    int64_t pairs = tokens * k, tv = 0;
    choose_args a = {logits, plan + AST_MOE_PLAN_EXPERT(pairs), experts, k};
    /* a token's search costs about experts * k compares: ~16k per range */
    ast_parallel_for(tokens, 1 + 16384 / ((int64_t)experts * k), choose_range, &a);
    float *argmax_count = plan + AST_MOE_PLAN_ARGMAX(pairs, experts);
    for (int64_t t = 0; t < tokens; t++) {
        if (valid && valid[t] == 0.0f) continue;
        tv++;
        argmax_count[argmax(logits + t * experts, experts)] += 1.0f;
    }
    return tv;
}

/* iarg[0] k, iarg[1] per_set; farg[0] the capacity factor. The candidates
 * in slot-major order (i = s T + t), kept in that order up to capacity,
 * then placed by a stable counting sort (moe_dispatch.c's moe_sort_pairs). */
static void route_forward(ast_ctx *c, ast_node *n)
{
    const float *logits = n->in[0]->data, *valid = n->in[1] ? n->in[1]->data : NULL;
    int k = (int)n->iarg[0], experts = (int)ast_cols(n->in[0]);
    int64_t tokens = ast_rows(n->in[0]), pairs = tokens * k, per_set = n->iarg[1];
    float *plan = n->out->data;
    memset(plan, 0, (size_t)n->out->size * sizeof *plan);
    for (int64_t i = 0; i < 3 * pairs; i++) plan[AST_MOE_PLAN_TOKEN(pairs) + i] = -1.0f; /* token, weight, pos */
    int64_t tv = choose(logits, valid, tokens, experts, k, plan);
    int64_t cap = n->farg[0] > 0.0f ? capacity_of((double)(tv * k), n->farg[0], experts) : tv * k;
    float *expert = plan + AST_MOE_PLAN_EXPERT(pairs), *pos = plan + AST_MOE_PLAN_POS(pairs);
    float *offsets = plan + AST_MOE_PLAN_OFFSETS(pairs), *load = plan + AST_MOE_PLAN_LOAD(pairs, experts);
    float *count = plan + AST_MOE_PLAN_COUNT(pairs, experts), *sets = plan + AST_MOE_PLAN_SETS(pairs, experts);
    for (int64_t i = 0; i < pairs; i++) { /* ranks within the expert, up to capacity */
        int64_t t = i % tokens, w = t * k + i / tokens;
        if (valid && valid[t] == 0.0f) continue;
        int e = (int)expert[w];
        load[e] += 1.0f;
        if (count[e] < (float)cap) pos[w] = count[e]++;
    }
    for (int e = 0; e < experts; e++) offsets[e + 1] = offsets[e] + count[e];
    for (int64_t w = 0; w < pairs; w++) {
        if (pos[w] < 0.0f) continue;
        int64_t t = w / k, p = (int64_t)(offsets[(int)expert[w]] + pos[w]);
        pos[w] = (float)p;
        plan[AST_MOE_PLAN_TOKEN(pairs) + p] = (float)t;
        plan[AST_MOE_PLAN_WEIGHT(pairs) + p] = (float)w;
        sets[(t / per_set) * experts + (int)expert[w]] += 1.0f;
    }
    plan[AST_MOE_PLAN_KEPT_PAIRS] = offsets[experts];
    plan[AST_MOE_PLAN_VALID] = (float)tv;
    plan[AST_MOE_PLAN_DROPPED] = (float)(tv * k) - offsets[experts];
    plan[AST_MOE_PLAN_CAPACITY] = (float)cap;
}

/* ---- moe_pick ------------------------------------------------------------------ */

/* iarg[0] k. out[t, s] = logits[t, expert of t k + s]. */
static void pick_forward(ast_ctx *c, ast_node *n)
{
    int64_t experts = ast_cols(n->in[0]), pairs = n->out->size, k = n->iarg[0];
    const float *expert = n->in[1]->data + AST_MOE_PLAN_EXPERT(pairs);
    for (int64_t w = 0; w < pairs; w++) n->out->data[w] = n->in[0]->data[(w / k) * experts + (int64_t)expert[w]];
}

/* Each (t, s) names its own logit: the adds never meet. */
static void pick_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    int64_t experts = ast_cols(n->in[0]), pairs = n->out->size, k = n->iarg[0];
    const float *expert = n->in[1]->data + AST_MOE_PLAN_EXPERT(pairs);
    for (int64_t w = 0; g->g[0] && w < pairs; w++) g->g[0][(w / k) * experts + (int64_t)expert[w]] += n->out->grad[w];
}

/* ---- moe_gather ------------------------------------------------------------------ */

static int64_t kept_pairs(const float *plan) { return (int64_t)plan[AST_MOE_PLAN_KEPT_PAIRS]; }

typedef struct gather_args {
    const float *x, *token;
    float *y;
    int64_t d, kept;
} gather_args;

static void gather_range(void *arg, int64_t lo, int64_t hi)
{
    const gather_args *a = arg;
    for (int64_t p = lo; p < hi; p++) {
        if (p < a->kept) memcpy(a->y + p * a->d, a->x + (int64_t)a->token[p] * a->d, (size_t)a->d * sizeof(float));
        else memset(a->y + p * a->d, 0, (size_t)a->d * sizeof(float));
    }
}

/* out[p] = x[token of p] below the kept pairs, else 0: each row its own,
 * on the pool. */
static void gather_forward(ast_ctx *c, ast_node *n)
{
    int64_t d = ast_cols(n->in[0]), pairs = ast_rows(n->out);
    const float *plan = n->in[1]->data;
    gather_args a = {n->in[0]->data, plan + AST_MOE_PLAN_TOKEN(pairs), n->out->data, d, kept_pairs(plan)};
    ast_parallel_for(pairs, ast_row_grain(d), gather_range, &a);
}

/* gx[token of p] += dy[p] in increasing p (the CPU gather_rows' order). */
static void gather_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    int64_t d = ast_cols(n->in[0]), pairs = ast_rows(n->out);
    const float *plan = n->in[1]->data, *token = plan + AST_MOE_PLAN_TOKEN(pairs);
    for (int64_t p = 0; g->g[0] && p < kept_pairs(plan); p++) {
        float *gx = g->g[0] + (int64_t)token[p] * d;
        for (int64_t j = 0; j < d; j++) gx[j] += n->out->grad[p * d + j];
    }
}

/* ---- moe_grouped_linear ------------------------------------------------------------ */

/* Rows [r0, r1) of expert e of the plan's offsets. */
static void expert_rows(const float *plan, int64_t pairs, int e, int64_t *r0, int64_t *r1)
{
    *r0 = (int64_t)plan[AST_MOE_PLAN_OFFSETS(pairs) + e];
    *r1 = (int64_t)plan[AST_MOE_PLAN_OFFSETS(pairs) + e + 1];
}

/* y[expert e's rows] = x w[e]^T + b[e]; rows past the kept pairs 0. */
static void grouped_forward(ast_ctx *c, ast_node *n)
{
    const ast_groups *s = n->saved;
    const float *plan = n->in[3]->data;
    int64_t pairs = ast_rows(n->in[0]), in = ast_cols(n->in[0]), out = ast_cols(n->out), r0, r1;
    for (int e = 0; e < s->n; e++) {
        expert_rows(plan, pairs, e, &r0, &r1);
        if (r1 > r0)
            ast_sgemm_bias(0, 1, (int)(r1 - r0), (int)out, (int)in, 1.0f, n->in[0]->data + r0 * in, (int)in,
                           s->w[e]->data, (int)in, 0.0f, n->out->data + r0 * out, (int)out,
                           s->b ? s->b[e]->data : NULL);
    }
    int64_t kept = kept_pairs(plan);
    memset(n->out->data + kept * out, 0, (size_t)((pairs - kept) * out) * sizeof(float));
}

/* dx (+)= dy w[e] on each expert's rows, 0 past the kept pairs;
 * dw[e] += dy_e^T x_e, db[e] += the column sums of dy_e in row order. */
static void grouped_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    const ast_groups *s = n->saved;
    const float *plan = n->in[3]->data, *x = n->in[0]->data, *dy = n->out->grad;
    int64_t pairs = ast_rows(n->in[0]), in = ast_cols(n->in[0]), out = ast_cols(n->out), r0, r1;
    float *dx = g->g[0], dx_beta = g->assign[0] ? 0.0f : 1.0f;
    if (dx && g->assign[0]) memset(dx, 0, (size_t)(pairs * in) * sizeof *dx);
    for (int e = 0; e < s->n; e++) {
        expert_rows(plan, pairs, e, &r0, &r1);
        int rows = (int)(r1 - r0);
        if (!rows) continue;
        if (dx) ast_sgemm(0, 0, rows, (int)in, (int)out, 1.0f, dy + r0 * out, (int)out, s->w[e]->data, (int)in, dx_beta,
                          dx + r0 * in, (int)in);
        if (s->gw && s->gw[e])
            ast_sgemm(1, 0, (int)out, (int)in, rows, 1.0f, dy + r0 * out, (int)out, x + r0 * in, (int)in, 1.0f,
                      s->gw[e], (int)in);
        for (int64_t r = r0; s->gb && s->gb[e] && r < r1; r++)
            for (int64_t o = 0; o < out; o++) s->gb[e][o] += dy[r * out + o];
    }
}

/* ---- moe_combine -------------------------------------------------------------------- */

/* The sorted positions of token t's kept pairs, in increasing order, and their slots; returns how many. */
static int kept_of(const float *pos, int64_t t, int k, int *slot)
{
    int m = 0;
    for (int s = 0; s < k; s++) {
        if (pos[t * k + s] < 0.0f) continue;
        int q = m++;
        for (; q > 0 && pos[t * k + slot[q - 1]] > pos[t * k + s]; q--) slot[q] = slot[q - 1];
        slot[q] = s;
    }
    return m;
}

typedef struct combine_args {
    const float *y, *w, *pos, *dout;
    float *out, *gy, *gw;
    int *slot; /* k per token */
    int64_t k, d;
    int assign_w;
} combine_args;

static void combine_range(void *arg, int64_t lo, int64_t hi)
{
    const combine_args *a = arg;
    for (int64_t t = lo; t < hi; t++) {
        int *slot = a->slot + t * a->k, m = kept_of(a->pos, t, (int)a->k, slot);
        float *dst = a->out + t * a->d;
        memset(dst, 0, (size_t)a->d * sizeof(float));
        for (int q = 0; q < m; q++) {
            const float *src = a->y + (int64_t)a->pos[t * a->k + slot[q]] * a->d;
            float scale = a->w[t * a->k + slot[q]];
            for (int64_t j = 0; j < a->d; j++) dst[j] += scale * src[j];
        }
    }
}

/* out[t] = sum of w[t, s] y[p] over t's kept pairs in increasing p: each
 * token's row its own, on the pool. */
static void combine_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *y = n->in[0], *w = n->in[1];
    int64_t tokens = w->shape[0], k = w->shape[1], d = ast_cols(y);
    combine_args a = {.y = y->data, .w = w->data, .pos = n->in[2]->data + AST_MOE_PLAN_POS(tokens * k),
                      .out = n->out->data, .slot = ast_alloc_uninit(c, (size_t)(tokens * k) * sizeof(int)), .k = k, .d = d};
    ast_parallel_for(tokens, ast_row_grain(k * d), combine_range, &a);
}

/* Pairs [lo, hi): a kept pair p is one (t, s), so its row of dy and its
 * weight's gradient are written by it alone. */
static void combine_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const combine_args *a = arg;
    for (int64_t i = lo; i < hi; i++) {
        int64_t p = (int64_t)a->pos[i], t = i / a->k;
        float dot = 0.0f;
        for (int64_t j = 0; p >= 0 && j < a->d; j++) {
            if (a->gy) a->gy[p * a->d + j] += a->w[i] * a->dout[t * a->d + j];
            dot += a->dout[t * a->d + j] * a->y[p * a->d + j];
        }
        if (a->gw) a->gw[i] = a->assign_w ? dot : a->gw[i] + dot;
    }
}

/* dy[p] (=) w[t, s] dout[t] for kept p, else 0; dw[t, s] (=) <dout[t], y[p]> for kept, else 0. */
static void combine_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *y = n->in[0], *w = n->in[1];
    int64_t tokens = w->shape[0], k = w->shape[1], d = ast_cols(y), pairs = tokens * k;
    combine_args a = {.y = y->data, .w = w->data, .pos = n->in[2]->data + AST_MOE_PLAN_POS(pairs), .dout = n->out->grad,
                      .gy = g->g[0], .gw = g->g[1], .k = k, .d = d, .assign_w = g->assign[1]};
    if (a.gy && g->assign[0]) memset(a.gy, 0, (size_t)y->size * sizeof *a.gy);
    ast_parallel_for(pairs, ast_row_grain(d), combine_backward_range, &a);
}

void ast_cpu_moe_kernels(ast_op_kernel *t)
{
    t[AST_OP_noise_normal] = (ast_op_kernel){.forward = noise_forward};
    t[AST_OP_moe_route] = (ast_op_kernel){.forward = route_forward};
    t[AST_OP_moe_pick] = (ast_op_kernel){.forward = pick_forward, .backward = pick_backward};
    t[AST_OP_moe_gather] = (ast_op_kernel){.forward = gather_forward, .backward = gather_backward};
    t[AST_OP_moe_grouped_linear] =
        (ast_op_kernel){.forward = grouped_forward, .backward = grouped_backward, .assigns = 1};
    t[AST_OP_moe_combine] = (ast_op_kernel){.forward = combine_forward, .backward = combine_backward, .assigns = 3};
}
