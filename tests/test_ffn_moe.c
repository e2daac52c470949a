/* The mixture-of-experts FFN plugin against independent naive loops:
 * routed output = dense evaluation of every expert, the load-balance loss
 * by hand, capacity drops, shared experts, expert choice, bias balancing,
 * time-conditioned routing, padding, parameter names and counts, and
 * finite-difference gradients through the router and the experts. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "ffn_fixture.h"
#include "gradcheck.h"

#define E 6
#define F 8
#define NE 4
#define MAX_T 16

/* Naive double sums of <= 8 float products vs float32 sgemm and a
 * different summation order: 1e-5 relative is a few float32 ulps. */
#define VAL_TOL 1e-5
/* h = 2e-3 on piecewise-smooth functions with no kink or routing flip
 * within h (margins are asserted): truncation O(h^2) is negligible and
 * float32 rounding of L / h stays below 2e-2 relative above the 1e-2 floor. */
#define GRAD_H 2e-3f
#define GRAD_TOL 2e-2
/* Routing and ReLU margins the FD step cannot cross: a step of h moves a
 * logit or pre-activation by at most h * max|x or w| < 5 * h. */
#define MIN_MARGIN 1e-2

static const ast_layer_dims dims = {.d_model = E, .heads = 2, .d_ff = F, .d_time = NE, .num_layers = 1};

static ast_tensor *param_j(const ffn_layer *l, const char *fmt, int j)
{
    char name[128];
    snprintf(name, sizeof name, fmt, j);
    return ffn_param(l, name);
}

/* ---- naive reference ------------------------------------------------- */

/* gate(x) + extra (router noise or time term; NULL = none). */
static void naive_logits(const ffn_layer *l, const float *x, const double *extra, double *logit)
{
    const float *g = ffn_param(l, "expression_ffn.ffn.router.gate.weight")->data;
    for (int e = 0; e < NE; e++) {
        logit[e] = extra ? extra[e] : 0;
        for (int i = 0; i < E; i++) logit[e] += g[e * E + i] * x[i];
    }
}

/* The time term of the router logits, time_proj(time[set of t]), per token. */
static void naive_time_term(const ffn_layer *l, const float *time, int T, int N, double *extra)
{
    const float *w = ffn_param(l, "expression_ffn.ffn.router.time_proj.weight")->data;
    const float *b = ffn_param(l, "expression_ffn.ffn.router.time_proj.bias")->data;
    for (int t = 0; t < T; t++)
        for (int e = 0; e < NE; e++) {
            double s = b[e];
            for (int j = 0; j < NE; j++) s += w[e * NE + j] * time[(t / N) * NE + j];
            extra[t * NE + e] = s;
        }
}

/* The training noise eps * N(0,1) * softplus(w_noise x), drawn as the
 * plugin draws it: one normal per (token, expert), row-major, from a step
 * RNG seeded with `seed` (gc_check seeds 1234 before every forward). */
/* The router's noise: one 64-bit draw of the step's RNG keys a splitmix64
 * hash of each logit's index, whose top and low 24 bits are the two
 * uniforms of a Box-Muller normal. */
static double naive_normal(uint64_t key, uint64_t i)
{
    uint64_t z = key + i * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    double u1 = ((double)(z >> 40) + 1.0) / 16777216.0, u2 = (double)(z & 0xffffff) / 16777216.0;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

static void naive_noise(const ffn_layer *l, const float *x, int T, double eps, uint64_t seed, double *extra)
{
    const float *w = ffn_param(l, "expression_ffn.ffn.router.w_noise.weight")->data;
    ast_rng r;
    ast_rng_seed(&r, seed);
    uint64_t key = ast_rng_next(&r);
    for (int t = 0; t < T; t++)
        for (int e = 0; e < NE; e++) {
            double s = 0;
            for (int i = 0; i < E; i++) s += w[e * E + i] * x[t * E + i];
            extra[t * NE + e] = eps * naive_normal(key, (uint64_t)(t * NE + e)) * log1p(exp(s));
        }
}

/* The noise is standard normal: over 200,000 draws the mean is within
 * 5 standard errors (0.011) of 0 and the variance within 0.02 of 1. */
Test(ffn_moe, router_noise_is_standard_normal)
{
    enum { DRAWS = 200000 };
    double s = 0, s2 = 0;
    for (uint64_t i = 0; i < DRAWS; i++) {
        double v = naive_normal(0x1234abcdull, i);
        s += v, s2 += v * v;
    }
    double mean = s / DRAWS, var = s2 / DRAWS - mean * mean;
    cr_assert_lt(fabs(mean), 0.011, "mean %g", mean);
    cr_assert_lt(fabs(var - 1.0), 0.02, "variance %g", var);
}

static void naive_softmax(const double *v, int n, double *p)
{
    double mx = v[0], s = 0;
    for (int i = 1; i < n; i++) mx = fmax(mx, v[i]);
    for (int i = 0; i < n; i++) s += p[i] = exp(v[i] - mx);
    for (int i = 0; i < n; i++) p[i] /= s;
}

/* Indices of v sorted descending, ties to the lower index. */
static void naive_order(const double *v, int n, int *order)
{
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[order[j]] > v[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
}

/* Expert j of `group` ("experts" or "shared_experts") on one token, added
 * into y with weight w; the smallest |pre-activation| goes into *kink. */
static void naive_expert(const ffn_layer *l, const char *group, int j, const float *x, double w, double *y,
                         double *kink)
{
    char fmt[4][128];
    const char *part[4] = {"w1.weight", "w1.bias", "w2.weight", "w2.bias"};
    for (int i = 0; i < 4; i++) snprintf(fmt[i], sizeof fmt[i], "expression_ffn.ffn.%s.%%d.%s", group, part[i]);
    ast_tensor *w1 = param_j(l, fmt[0], j);
    const float *b1 = param_j(l, fmt[1], j)->data, *w2 = param_j(l, fmt[2], j)->data, *b2 = param_j(l, fmt[3], j)->data;
    int f = (int)w1->shape[0];
    double hid[F];
    for (int u = 0; u < f; u++) {
        double s = b1[u];
        for (int i = 0; i < E; i++) s += w1->data[u * E + i] * x[i];
        if (kink) *kink = fmin(*kink, fabs(s));
        hid[u] = s > 0 ? s : 0;
    }
    for (int i = 0; i < E; i++) {
        double s = b2[i];
        for (int u = 0; u < f; u++) s += w2[i * f + u] * hid[u];
        y[i] += w * s;
    }
}

/* Smallest margins of the reference top-k routing over T tokens: between
 * the two best logits (the argmax of the balance loss), at the top-k
 * boundary, and of the routed experts' ReLUs. */
typedef struct margins {
    double route, kink;
} margins;

/* The reference top-k MoE evaluated densely: every expert on every token,
 * combined with the softmax-over-selected weights (0 for the others). */
static margins naive_topk(const ffn_layer *l, const float *x, const double *extra, int T, int k, double *out)
{
    margins m = {INFINITY, INFINITY};
    for (int t = 0; t < T; t++) {
        double logit[NE], sel[NE], w[NE], gate[NE] = {0};
        int order[NE];
        naive_logits(l, x + t * E, extra ? extra + t * NE : NULL, logit);
        naive_order(logit, NE, order);
        m.route = fmin(m.route, logit[order[0]] - logit[order[1]]);
        if (k < NE) m.route = fmin(m.route, logit[order[k - 1]] - logit[order[k]]);
        for (int s = 0; s < k; s++) sel[s] = logit[order[s]];
        naive_softmax(sel, k, w);
        for (int s = 0; s < k; s++) gate[order[s]] = w[s];
        for (int i = 0; i < E; i++) out[t * E + i] = 0;
        for (int e = 0; e < NE; e++) {
            double kink = INFINITY;
            naive_expert(l, "experts", e, x + t * E, gate[e], out + t * E, &kink);
            if (gate[e] > 0) m.kink = fmin(m.kink, kink);
        }
    }
    return m;
}

/* LB = n * sum_e f_e P_e over T tokens (docs/model.md §2.7), times w. */
static double naive_aux(const ffn_layer *l, const float *x, int T, double w)
{
    double P[NE] = {0}, f[NE] = {0};
    for (int t = 0; t < T; t++) {
        double logit[NE], p[NE];
        int order[NE];
        naive_logits(l, x + t * E, NULL, logit);
        naive_softmax(logit, NE, p);
        naive_order(logit, NE, order);
        f[order[0]] += 1.0 / T;
        for (int e = 0; e < NE; e++) P[e] += p[e] / T;
    }
    double lb = 0;
    for (int e = 0; e < NE; e++) lb += f[e] * P[e];
    return w * NE * lb;
}

static void assert_close(const float *got, const double *want, int64_t n, double tol, const char *what)
{
    for (int64_t i = 0; i < n; i++)
        cr_assert_float_eq(got[i], want[i], tol * (1 + fabs(want[i])), "%s[%lld]: %g vs %g", what, (long long)i,
                           got[i], want[i]);
}

static ast_tensor *input(ast_params *p, int B, int N, float scale)
{
    return gc_input(p, "x", 3, (int64_t[]){B, N, E}, scale);
}

/* ---- parameters -------------------------------------------------------- */

Test(ffn_moe, parameter_names_and_order_follow_the_reference)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, "num_experts=4,top_k=2", 1), "%s", l.err);
    cr_assert_eq(ast_params_count(l.params), 4 * 4 + 2);
    const char *part[4] = {"w1.weight", "w1.bias", "w2.weight", "w2.bias"};
    const int64_t rows[4] = {F / NE, F / NE, E, E};
    for (int j = 0; j < NE; j++)
        for (int i = 0; i < 4; i++) {
            char want[128];
            snprintf(want, sizeof want, FFN_SCOPE ".expression_ffn.ffn.experts.%d.%s", j, part[i]);
            ast_tensor *t = ast_params_at(l.params, 4 * j + i);
            cr_assert_str_eq(t->name, want);
            cr_assert_eq(t->shape[0], rows[i], "%s", want);
        }
    cr_assert_str_eq(ast_params_at(l.params, 16)->name, FFN_SCOPE ".expression_ffn.ffn.router.gate.weight");
    cr_assert_str_eq(ast_params_at(l.params, 17)->name, FFN_SCOPE ".expression_ffn.ffn.router.w_noise.weight");
    cr_assert_eq(ast_params_at(l.params, 17)->shape[0], NE);
    cr_assert_eq(ast_params_at(l.params, 17)->shape[1], E);
    ffn_layer_close(&l);
}

static void check_counts(const char *opts, int64_t p_exp, int64_t p_moe)
{
    const ast_layer_dims big = {.d_model = 128, .heads = 4, .d_ff = 256, .d_time = 32, .num_layers = 2};
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &big, opts, 1), "%s", l.err);
    int64_t expert = 0, router = 0;
    for (int i = 0; i < 4; i++) expert += ast_params_at(l.params, i)->size;
    for (int i = 16; i < 18; i++) router += ast_params_at(l.params, i)->size;
    cr_assert_eq(expert, p_exp, "%s: P_exp", opts);
    cr_assert_eq(ast_params_numel(l.params), p_moe, "%s: P_moe", opts);
    cr_assert_eq(router, 1024, "router 2 E n");
    /* docs/model.md §2.11: Activated = Total - (n - k) P_exp */
    cr_assert_eq(l.desc->active_params(l.self), p_moe - 2 * p_exp, "%s: active", opts);
    ffn_layer_close(&l);
}

/* The worked numbers of docs/model.md §2.11 (E=128, F=256, 4 experts, top-2). */
Test(ffn_moe, parameter_counts_match_the_spec)
{
    check_counts("num_experts=4,top_k=2,expert_hidden=split", 16576, 67328);
    check_counts("num_experts=4,top_k=2,expert_hidden=full", 65920, 264704);
}

Test(ffn_moe, bad_option_combinations_are_refused_with_a_reason)
{
    ffn_layer l;
    cr_assert_not(ffn_layer_open(&l, "ffn_moe", &dims, "num_experts=4,top_k=5", 1));
    cr_assert(strstr(l.err, "top_k"), "message: %s", l.err);
    ffn_layer_close(&l);
    cr_assert_not(ffn_layer_open(&l, "ffn_moe", &dims, "router=expert_choice,balance=bias", 1));
    cr_assert(strstr(l.err, "balance"), "message: %s", l.err);
    ffn_layer_close(&l);
}

/* ---- values ------------------------------------------------------------ */

Test(ffn_moe, routed_output_equals_dense_evaluation)
{
    const char *hidden[2] = {"num_experts=4,top_k=2", "num_experts=4,top_k=1,expert_hidden=full"};
    for (int v = 0; v < 2; v++) {
        ffn_layer l;
        cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, hidden[v], 10 + v), "%s", l.err);
        ast_params *p = ast_params_new(20 + v);
        ast_tensor *x = input(p, 2, 6, 1.0f);
        ast_ctx *c = ast_ctx_new(0);
        ast_tensor *y = ffn_forward(&l, c, x, NULL, NULL);
        double want[12 * E];
        naive_topk(&l, x->data, NULL, 12, v ? 1 : 2, want);
        cr_assert_eq(y->ndim, 3);
        assert_close(y->data, want, 12 * E, VAL_TOL, hidden[v]);
        ast_ctx_free(c);
        ast_params_free(p);
        ffn_layer_close(&l);
    }
}

Test(ffn_moe, statistics_are_published_per_layer)
{
    ast_layer_dims d = dims;
    d.layer = 3;
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &d, "num_experts=4,top_k=2", 2), "%s", l.err);
    ast_params *p = ast_params_new(3);
    ast_tensor *x = input(p, 2, 5, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ffn_forward(&l, c, x, NULL, NULL);
    const ast_stat *tpe = ffn_stat(c, "moe.tokens_per_expert"), *prob = ffn_stat(c, "moe.router_prob_mean");
    cr_assert_eq(tpe->layer, 3);
    cr_assert_eq(tpe->n, NE);
    double tokens = 0, mass = 0;
    for (int e = 0; e < NE; e++) {
        tokens += tpe->values[e];
        mass += prob->values[e];
    }
    cr_assert_eq(tokens, 10 * 2, "every token routed to k experts");
    cr_assert_float_eq(mass, 1.0, 1e-5, "mean of softmax rows sums to 1 (float32 sums)");
    cr_assert_eq(ffn_stat(c, "moe.dropped_tokens")->values[0], 0.0f);
    cr_assert_float_eq(ffn_stat(c, "moe.aux_loss")->values[0], ffn_loss(c, "moe_aux")->data[0], 0.0);
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* ---- load balance ------------------------------------------------------ */

/* Gate = 2 I on the first NE features, token t = one-hot of expert[t]: the
 * routing is fixed and known. Returns the published aux loss. */
static double aux_for_routing(const int *expert, int T, double *hand)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, "num_experts=4,top_k=2", 5), "%s", l.err);
    float *g = ffn_param(&l, "expression_ffn.ffn.router.gate.weight")->data;
    memset(g, 0, NE * E * sizeof *g);
    for (int e = 0; e < NE; e++) g[e * E + e] = 2.0f;
    ast_params *p = ast_params_new(6);
    ast_tensor *x = input(p, 1, T, 0.0f);
    for (int t = 0; t < T; t++) x->data[t * E + expert[t]] = 1.0f;
    ast_ctx *c = ast_ctx_new(0);
    ffn_forward(&l, c, x, NULL, NULL);
    ast_tensor *aux = ffn_loss(c, "moe_aux");
    cr_assert_not_null(aux, "balance: loss publishes moe_aux");
    *hand = naive_aux(&l, x->data, T, 0.01);
    double got = aux->data[0];
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&l);
    return got;
}

Test(ffn_moe, aux_loss_matches_hand_computation)
{
    const int skewed[8] = {0, 0, 0, 1, 1, 2, 0, 3};
    double hand;
    double got = aux_for_routing(skewed, 8, &hand);
    /* by hand: p = e^2/(e^2+3) on the chosen expert, 1/(e^2+3) elsewhere */
    double hi = exp(2.0) / (exp(2.0) + 3), lo = 1 / (exp(2.0) + 3);
    double f[NE] = {4 / 8.0, 2 / 8.0, 1 / 8.0, 1 / 8.0}, lb = 0;
    for (int e = 0; e < NE; e++) lb += f[e] * (f[e] * hi + (1 - f[e]) * lo);
    cr_assert_float_eq(hand, 0.01 * NE * lb, 1e-12, "naive loop agrees with the closed form");
    cr_assert_float_eq(got, hand, 1e-6 * hand, "float32 softmax means of 8 tokens");
}

/* The regression test of mindspore-ai/hyper-parallel#752: a loss that
 * cannot tell imbalanced from balanced routing is broken. */
Test(ffn_moe, imbalanced_routing_scores_higher_than_balanced)
{
    const int balanced[8] = {0, 1, 2, 3, 0, 1, 2, 3}, collapsed[8] = {0};
    double hand_b, hand_c;
    double b = aux_for_routing(balanced, 8, &hand_b), c = aux_for_routing(collapsed, 8, &hand_c);
    cr_assert_float_eq(b, 0.01, 1e-7, "balanced: LB = n * sum (1/n)(1/n) = 1");
    cr_assert_gt(c, 2.5 * b, "collapsed %g vs balanced %g", c, b);
    cr_assert_float_eq(c, hand_c, 1e-6 * hand_c);
}

/* ---- capacity, shared experts, expert choice ------------------------------ */

/* Every token prefers expert 0, then 1: with capacity factor 1 each expert
 * keeps ceil(8*2/4) = 4 assignments, first choices before second ones. */
Test(ffn_moe, capacity_drops_overflow_assignments)
{
    const char *opts[2] = {"num_experts=4,top_k=2,capacity_factor=1", "num_experts=4,top_k=2,capacity_factor=2"};
    const float expect_dropped[2] = {8, 0}, expect_kept[2] = {4, 8};
    for (int v = 0; v < 2; v++) {
        ffn_layer l;
        cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, opts[v], 7), "%s", l.err);
        float *g = ffn_param(&l, "expression_ffn.ffn.router.gate.weight")->data;
        memset(g, 0, NE * E * sizeof *g);
        for (int e = 0; e < NE; e++) g[e * E] = 3.0f - e;
        ast_params *p = ast_params_new(8);
        ast_tensor *x = input(p, 1, 8, 0.1f);
        for (int t = 0; t < 8; t++) x->data[t * E] = 1.0f;
        ast_ctx *c = ast_ctx_new(0);
        ast_tensor *y = ffn_forward(&l, c, x, NULL, NULL);
        const ast_stat *tpe = ffn_stat(c, "moe.tokens_per_expert");
        cr_assert_eq(ffn_stat(c, "moe.dropped_tokens")->values[0], expect_dropped[v], "%s", opts[v]);
        cr_assert_eq(tpe->values[0], expect_kept[v]);
        cr_assert_eq(tpe->values[1], expect_kept[v]);
        cr_assert_eq(tpe->values[2] + tpe->values[3], 0.0f);
        double want[8 * E];
        margins m = naive_topk(&l, x->data, NULL, 8, 2, want);
        cr_assert_gt(m.route, 0.5, "the constructed routing is unambiguous");
        int kept = (int)expect_kept[v];
        assert_close(y->data, want, kept * E, VAL_TOL, "tokens within capacity");
        for (int i = kept * E; i < 8 * E; i++) cr_assert_eq(y->data[i], 0.0f, "dropped tokens get no expert output");
        ast_ctx_free(c);
        ast_params_free(p);
        ffn_layer_close(&l);
    }
}

Test(ffn_moe, shared_experts_add_unweighted)
{
    ffn_layer plain, shared;
    cr_assert(ffn_layer_open(&plain, "ffn_moe", &dims, "num_experts=4,top_k=2", 9), "%s", plain.err);
    cr_assert(ffn_layer_open(&shared, "ffn_moe", &dims, "num_experts=4,top_k=2,num_shared_experts=2", 9), "%s",
              shared.err);
    cr_assert_eq(ast_params_count(shared.params), 18 + 2 * 4);
    cr_assert_str_eq(ast_params_at(shared.params, 18)->name,
                     FFN_SCOPE ".expression_ffn.ffn.shared_experts.0.w1.weight");
    cr_assert_eq(ast_params_at(shared.params, 18)->shape[0], F / NE, "same width as the routed experts");
    int64_t p_exp = (F / NE) * E * 2 + F / NE + E;
    cr_assert_eq(shared.desc->active_params(shared.self), 2 * NE * E + (2 + 2) * p_exp, "router + k + shared");
    ast_params *p = ast_params_new(10);
    ast_tensor *x = input(p, 2, 4, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y0 = ffn_forward(&plain, c, x, NULL, NULL), *y1 = ffn_forward(&shared, c, x, NULL, NULL);
    for (int t = 0; t < 8; t++) {
        double want[E];
        for (int i = 0; i < E; i++) want[i] = y0->data[t * E + i];
        for (int j = 0; j < 2; j++) naive_expert(&shared, "shared_experts", j, x->data + t * E, 1.0, want, NULL);
        assert_close(y1->data + t * E, want, E, VAL_TOL, "routed + shared");
    }
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&plain);
    ffn_layer_close(&shared);
}

/* Expert choice: each expert takes its tokens*k/n = 6 best tokens by router
 * probability and weights them by it; compared with a naive loop. */
Test(ffn_moe, expert_choice_fills_each_expert_to_capacity)
{
    const int T = 12, cap = 12 * 2 / NE;
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, "num_experts=4,top_k=2,router=expert_choice", 11), "%s", l.err);
    ast_params *p = ast_params_new(12);
    ast_tensor *x = input(p, 2, 6, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ffn_forward(&l, c, x, NULL, NULL);
    const ast_stat *tpe = ffn_stat(c, "moe.tokens_per_expert");
    for (int e = 0; e < NE; e++) cr_assert_eq(tpe->values[e], (float)cap, "expert %d", e);

    double prob[MAX_T][NE], want[MAX_T * E] = {0};
    int picked[MAX_T] = {0}, dropped = 0;
    for (int t = 0; t < T; t++) {
        double logit[NE];
        naive_logits(&l, x->data + t * E, NULL, logit);
        naive_softmax(logit, NE, prob[t]);
    }
    for (int e = 0; e < NE; e++) {
        double col[MAX_T];
        int order[MAX_T];
        for (int t = 0; t < T; t++) col[t] = prob[t][e];
        naive_order(col, T, order);
        for (int q = 0; q < cap; q++) {
            int t = order[q];
            picked[t] = 1;
            naive_expert(&l, "experts", e, x->data + t * E, prob[t][e], want + t * E, NULL);
        }
    }
    for (int t = 0; t < T; t++) dropped += !picked[t];
    assert_close(y->data, want, T * E, VAL_TOL, "expert choice");
    cr_assert_eq(ffn_stat(c, "moe.dropped_tokens")->values[0], (float)dropped, "tokens no expert picked");
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* ---- bias balancing, time conditioning, noise, padding --------------------- */

static float imbalance(ast_ctx *c)
{
    const ast_stat *s = ffn_stat(c, "moe.tokens_per_expert");
    float lo = s->values[0], hi = s->values[0];
    for (int e = 1; e < s->n; e++) {
        lo = fminf(lo, s->values[e]);
        hi = fmaxf(hi, s->values[e]);
    }
    return hi - lo;
}

/* Every token prefers experts 0 and 1 (logit offsets 1, 0.6, 0.2, -0.2
 * plus a token-dependent part): bias steps of 0.05 per training forward
 * must spread the load within 20 forwards (it settles near
 * imbalance 2 after ~14, then oscillates by one step), and eval forwards must
 * leave the bias alone. */
Test(ffn_moe, bias_balancing_moves_toward_balance)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &dims,
                             "num_experts=4,top_k=2,balance=bias,bias_update_rate=0.05,noise_epsilon=0", 13),
              "%s", l.err);
    float *g = ffn_param(&l, "expression_ffn.ffn.router.gate.weight")->data;
    for (int e = 0; e < NE; e++) g[e * E] = 1.0f - 0.4f * e;
    ast_params *p = ast_params_new(14);
    ast_tensor *x = input(p, 2, 6, 1.0f);
    for (int t = 0; t < 12; t++) x->data[t * E] = 1.0f;
    ast_ctx *c = ast_ctx_new(0);
    ffn_forward(&l, c, x, NULL, NULL);
    float before = imbalance(c);
    cr_assert_geq(before, 8.0f, "the construction starts imbalanced");
    cr_assert_null(ffn_loss(c, "moe_aux"), "balance: bias adds no loss");
    for (int i = 0; i < 3; i++) {
        ast_ctx_reset(c);
        ffn_forward(&l, c, x, NULL, NULL);
    }
    cr_assert_eq(imbalance(c), before, "eval forwards must not move the bias");
    ast_ctx_set_training(c, 1);
    for (int i = 0; i < 20; i++) {
        ast_ctx_reset(c);
        ffn_forward(&l, c, x, NULL, NULL);
    }
    cr_assert_leq(imbalance(c), before / 2, "imbalance %g -> %g after 20 training forwards", before, imbalance(c));
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* The combine is a fused op: the descriptor lists the fused CPU kernel and,
 * for cuda, the same from ops; create() refuses a backend with neither,
 * naming it and those it has. */
Test(ffn_moe, descriptor_lists_the_combine_kernels)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, NULL, 1), "%s", l.err);
    cr_assert_eq(l.desc->n_kernels, 2);
    ast_kernel_fn cpu = ast_kernel_find(l.desc->kernels, l.desc->n_kernels, "moe_combine", "cpu");
    ast_kernel_fn cuda = ast_kernel_find(l.desc->kernels, l.desc->n_kernels, "moe_combine", "cuda");
    cr_assert(cpu && cuda && cpu != cuda);
    char err[256] = "";
    ast_create_args a = {.host = ast_host_table(), .scope = ast_scope_new(l.params, "other"), .dims = &l.dims,
                         .opts = l.opts, .backend = "metal"};
    cr_assert_null(l.desc->create(&a, err, sizeof err));
    cr_assert(strstr(err, "'metal'") && strstr(err, "cpu, cuda"), "%s", err);
    ffn_layer_close(&l);
}

/* The layer of bias_balancing_moves_toward_balance: every token prefers experts 0 and 1. */
static void open_biased(ffn_layer *l)
{
    cr_assert(ffn_layer_open(l, "ffn_moe", &dims,
                             "num_experts=4,top_k=2,balance=bias,bias_update_rate=0.05,noise_epsilon=0", 13),
              "%s", l->err);
    float *g = ffn_param(l, "expression_ffn.ffn.router.gate.weight")->data;
    for (int e = 0; e < NE; e++) g[e * E] = 1.0f - 0.4f * e;
}

/* The selection bias is a host buffer (saved in checkpoints and
 * best.safetensors, unseen by the optimiser), and evaluation routes with
 * whatever it holds: a fresh layer given the trained bias, as loading a
 * run's weights gives it, routes and computes exactly as the trained one. */
Test(ffn_moe, selection_bias_is_a_saved_buffer_that_eval_routing_reads)
{
    ffn_layer trained, fresh, plain;
    open_biased(&trained);
    open_biased(&fresh);
    cr_assert_eq(ast_params_count(trained.params), 4 * 4 + 2, "the bias is no parameter");
    cr_assert_eq(ast_params_n_buffers(trained.params), 1);
    ast_tensor *bias = ast_params_find_buffer(trained.params, FFN_SCOPE ".expression_ffn.ffn.router.selection_bias");
    cr_assert_not_null(bias);
    cr_assert(bias->ndim == 1 && bias->shape[0] == NE && (bias->flags & AST_BUFFER) && !bias->grad);
    cr_assert(ffn_layer_open(&plain, "ffn_moe", &dims, "num_experts=4,top_k=2", 13), "%s", plain.err);
    cr_assert_eq(ast_params_n_buffers(plain.params), 0, "balance: loss keeps no state");

    ast_params *p = ast_params_new(14);
    ast_tensor *x = input(p, 2, 6, 1.0f);
    for (int t = 0; t < 12; t++) x->data[t * E] = 1.0f;
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_training(c, 1);
    for (int i = 0; i < 20; i++) {
        ast_ctx_reset(c);
        ffn_forward(&trained, c, x, NULL, NULL);
    }
    cr_assert(bias->data[0] < 0.0f && bias->data[NE - 1] > 0.0f, "training moved the bias in place");
    ast_ctx_set_training(c, 0);
    ast_ctx_reset(c);
    ast_tensor *y = ffn_forward(&trained, c, x, NULL, NULL);
    float *want = malloc((size_t)y->size * sizeof *want), balanced = imbalance(c);
    memcpy(want, y->data, (size_t)y->size * sizeof *want);

    ast_ctx_reset(c);
    ffn_forward(&fresh, c, x, NULL, NULL);
    cr_assert_geq(imbalance(c), 8.0f, "a fresh layer routes with a zero bias");
    ast_tensor *loaded = ast_params_buffer_at(fresh.params, 0);
    memcpy(loaded->data, bias->data, (size_t)NE * sizeof(float));
    ast_ctx_reset(c);
    y = ffn_forward(&fresh, c, x, NULL, NULL);
    cr_assert_eq(imbalance(c), balanced);
    cr_assert_eq(memcmp(y->data, want, (size_t)y->size * sizeof *want), 0, "eval output with the loaded bias");
    free(want);
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&plain);
    ffn_layer_close(&fresh);
    ffn_layer_close(&trained);
}

/* time_proj = 20 I: the time embedding decides the first choice; sets only
 * see their own time row. */
Test(ffn_moe, time_conditioning_changes_routing_with_t)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, "num_experts=4,top_k=1,time_conditioned=true", 15), "%s", l.err);
    cr_assert_eq(ast_params_count(l.params), 4 * 4 + 4);
    ast_tensor *tw = ffn_param(&l, "expression_ffn.ffn.router.time_proj.weight");
    ast_tensor *tb = ffn_param(&l, "expression_ffn.ffn.router.time_proj.bias");
    cr_assert_eq(tw->shape[0], NE);
    cr_assert_eq(tw->shape[1], NE, "[num_experts, d_time]");
    memset(tw->data, 0, tw->size * sizeof(float));
    memset(tb->data, 0, tb->size * sizeof(float));
    for (int e = 0; e < NE; e++) tw->data[e * NE + e] = 20.0f;
    ast_params *p = ast_params_new(16);
    ast_tensor *x = input(p, 2, 4, 1.0f);
    ast_tensor *time = gc_input(p, "time", 2, (int64_t[]){2, NE}, 0.0f);
    ast_ctx *c = ast_ctx_new(0);
    float first[8 * E];
    for (int pass = 0; pass < 2; pass++) {
        ast_ctx_reset(c);
        time->data[0] = 1.0f;                 /* set 0 -> expert 0 in both passes */
        time->data[NE + 1] = pass ? 0.0f : 1.0f; /* set 1 -> expert 1, then expert 3 */
        time->data[NE + 3] = pass ? 1.0f : 0.0f;
        ast_tensor *y = ffn_forward(&l, c, x, NULL, time);
        const float *tpe = ffn_stat(c, "moe.tokens_per_expert")->values;
        cr_assert_eq(tpe[0], 4.0f);
        cr_assert_eq(tpe[pass ? 3 : 1], 4.0f, "pass %d: set 1 follows its time row", pass);
        if (!pass) memcpy(first, y->data, sizeof first);
        else
            cr_assert_arr_eq(first, y->data, 4 * E * sizeof(float), "set 0's output ignores set 1's time");
    }
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* Router noise exists in training only. */
Test(ffn_moe, router_noise_only_in_training)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, "num_experts=4,top_k=2,noise_epsilon=1", 17), "%s", l.err);
    ast_params *p = ast_params_new(18);
    ast_tensor *x = input(p, 2, 6, 1.0f);
    float out[2][12 * E];
    for (int training = 0; training < 2; training++)
        for (int seed = 0; seed < 2; seed++) {
            ast_ctx *c = ast_ctx_new(100 + seed);
            ast_ctx_set_training(c, training);
            memcpy(out[seed], ffn_forward(&l, c, x, NULL, NULL)->data, sizeof out[seed]);
            ast_ctx_free(c);
            if (seed && !training) cr_assert_arr_eq(out[0], out[1], sizeof out[0], "eval is deterministic");
            if (seed && training) cr_assert(memcmp(out[0], out[1], sizeof out[0]), "training noise moves the output");
        }
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* A sweep's schedule (host->scheduled) replaces the options per step: the
 * aux loss is linear in its weight, and a scheduled noise of 0 turns the
 * training noise off. */
Test(ffn_moe, scheduled_weight_and_noise_replace_the_options)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, "num_experts=4,top_k=2,noise_epsilon=1", 17), "%s", l.err);
    ast_params *p = ast_params_new(18);
    ast_tensor *x = input(p, 2, 6, 1.0f);
    float out[2][12 * E];
    double aux[2];
    for (int seed = 0; seed < 2; seed++) {
        ast_ctx *c = ast_ctx_new(100 + seed);
        ast_ctx_set_training(c, 1);
        ast_ctx_set_scheduled(c, "moe.router_noise", 0.0f);
        ast_ctx_set_scheduled(c, "moe.load_balance_weight", seed ? 0.05f : 0.01f);
        memcpy(out[seed], ffn_forward(&l, c, x, NULL, NULL)->data, sizeof out[seed]);
        aux[seed] = ffn_loss(c, "moe_aux")->data[0];
        ast_ctx_free(c);
    }
    cr_assert_arr_eq(out[0], out[1], sizeof out[0], "no noise: different RNG seeds give the same output");
    /* the same routing scaled by 5: only the float32 product w * n / T^2 rounds */
    cr_assert_float_eq(aux[1], 5 * aux[0], 1e-6 * aux[1], "aux %g vs 5 x %g", aux[1], aux[0]);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* Padded cells are not routed: whatever they hold, valid outputs and the
 * aux loss are unchanged, padded outputs are 0, and the aux loss equals the
 * one of the valid cells alone. */
Test(ffn_moe, padding_changes_nothing)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &dims, "num_experts=4,top_k=2", 19), "%s", l.err);
    ast_params *p = ast_params_new(20);
    ast_tensor *x = input(p, 2, 4, 1.0f);
    ast_tensor *mask = gc_input(p, "mask", 2, (int64_t[]){2, 4}, 0.0f);
    for (int i = 0; i < 6; i++) mask->data[i] = 1.0f; /* set 1: cells 2, 3 padded */
    ast_ctx *c = ast_ctx_new(0);
    float y[2][8 * E], aux[2];
    for (int v = 0; v < 2; v++) {
        ast_ctx_reset(c);
        for (int i = 6 * E; i < 8 * E; i++) x->data[i] = v ? 5.0f * (i % 3) - 4.0f : 0.0f;
        memcpy(y[v], ffn_forward(&l, c, x, mask, NULL)->data, sizeof y[v]);
        aux[v] = ffn_loss(c, "moe_aux")->data[0];
        cr_assert_eq(ffn_stat(c, "moe.tokens_per_expert")->values[0] + ffn_stat(c, "moe.tokens_per_expert")->values[1] +
                         ffn_stat(c, "moe.tokens_per_expert")->values[2] +
                         ffn_stat(c, "moe.tokens_per_expert")->values[3],
                     12.0f, "6 valid tokens x k = 2");
    }
    cr_assert_arr_eq(y[0], y[1], 6 * E * sizeof(float), "valid outputs ignore padded content");
    cr_assert_eq(aux[0], aux[1], "aux loss ignores padded content");
    for (int i = 6 * E; i < 8 * E; i++) cr_assert_eq(y[1][i], 0.0f, "padded outputs are 0");
    double want[6 * E];
    naive_topk(&l, x->data, NULL, 6, 2, want);
    assert_close(y[0], want, 6 * E, VAL_TOL, "valid cells");
    double hand = naive_aux(&l, x->data, 6, 0.01);
    cr_assert_float_eq(aux[0], hand, 1e-6 * hand, "aux over the 6 valid cells (float32 means)");
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* ---- gradients -------------------------------------------------------------- */

typedef struct gc_moe {
    ffn_layer *l;
    int with_time, training;
} gc_moe;

/* y + aux (broadcast), so one check covers the experts, the routing weights
 * and the balance loss; training mode (noise, dropout 0) when asked. */
static ast_tensor *fwd_moe(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const gc_moe *g = ud;
    ast_ctx_set_training(c, g->training);
    ast_tensor *y = ffn_forward(g->l, c, in[0], NULL, g->with_time ? in[1] : NULL);
    ast_tensor *aux = ffn_loss(c, "moe_aux");
    return aux ? ast_add(c, y, aux) : y;
}

static void check_gradients(ffn_layer *l, ast_tensor *x, ast_tensor *time, int training)
{
    ast_tensor *in[64] = {x, time};
    int n = time ? 2 : 1;
    for (int i = 0; i < ast_params_count(l->params); i++) in[n++] = ast_params_at(l->params, i);
    gc_moe g = {l, time != NULL, training};
    gc_result r = gc_check(fwd_moe, in, n, &g, GRAD_H, 1e-2);
    cr_assert_lt(r.max_err, GRAD_TOL, "%s[%lld]: analytic %g numeric %g", in[r.worst_input]->name,
                 (long long)r.worst_index, r.analytic, r.numeric);
}

static void assert_margins(margins m)
{
    cr_assert_gt(m.route, MIN_MARGIN, "routing margin %g: pick another seed", m.route);
    cr_assert_gt(m.kink, MIN_MARGIN, "ReLU margin %g: pick another seed", m.kink);
}

static ffn_layer *open_wide(ffn_layer *l, const char *opts, uint64_t seed)
{
    cr_assert(ffn_layer_open(l, "ffn_moe", &dims, opts, seed), "%s", l->err);
    float *g = ffn_param(l, "expression_ffn.ffn.router.gate.weight")->data;
    for (int i = 0; i < NE * E; i++) g[i] *= 3.0f; /* wider routing margins */
    return l;
}

/* Eval mode: the routed experts, the softmax over the selected logits and
 * the balance loss (weight 1 so its gradient is not lost in rounding). */
Test(ffn_moe, gradients_wrt_input_and_every_parameter)
{
    ffn_layer l;
    open_wide(&l, "num_experts=4,top_k=2,load_balance_weight=1", 21);
    ast_params *p = ast_params_new(22);
    ast_tensor *x = input(p, 2, 3, 1.0f);
    double scratch[6 * E];
    assert_margins(naive_topk(&l, x->data, NULL, 6, 2, scratch));
    check_gradients(&l, x, NULL, 0);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* Time projection (and the time input) and shared experts. */
Test(ffn_moe, gradients_with_time_conditioning_and_shared_experts)
{
    ffn_layer l;
    open_wide(&l, "num_experts=4,top_k=2,time_conditioned=true,num_shared_experts=1", 23);
    ast_params *p = ast_params_new(24);
    ast_tensor *x = input(p, 2, 3, 1.0f);
    ast_tensor *time = gc_input(p, "time", 2, (int64_t[]){2, NE}, 1.0f);
    double extra[6 * NE], scratch[6 * E];
    naive_time_term(&l, time->data, 6, 3, extra);
    assert_margins(naive_topk(&l, x->data, extra, 6, 2, scratch));
    check_gradients(&l, x, time, 0);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* Training mode: noisy routing against the naive model with the same noise,
 * then gradients. gc_check reseeds the RNG with 1234 for every evaluation,
 * so the routing margins are checked for that seed's noise. */
Test(ffn_moe, gradients_through_router_noise)
{
    ffn_layer l;
    open_wide(&l, "num_experts=4,top_k=2,noise_epsilon=0.5", 31);
    ast_params *p = ast_params_new(28);
    ast_tensor *x = input(p, 2, 3, 1.0f);
    double extra[6 * NE], want[6 * E];
    naive_noise(&l, x->data, 6, 0.5, 1234, extra);
    assert_margins(naive_topk(&l, x->data, extra, 6, 2, want));
    ast_ctx *c = ast_ctx_new(1234);
    ast_ctx_set_training(c, 1);
    assert_close(ffn_forward(&l, c, x, NULL, NULL)->data, want, 6 * E, VAL_TOL, "noisy routing");
    ast_ctx_free(c);
    check_gradients(&l, x, NULL, 1);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* ---- at scale: the grouped experts against a linear per expert ---------- */

/* 512 tokens of width 64, 16 experts 64 wide, top-2: enough work that the
 * grouped GEMMs split the rows over the pool's threads. The selection bias
 * (balance: bias) makes expert 3 empty and sends every token to expert 7. */
enum { WD = 64, WN = 16, WT = 512, WK = 2 };
static const ast_layer_dims wide_dims = {.d_model = WD, .heads = 2, .d_ff = WD * WN, .d_time = 4, .num_layers = 1};

typedef struct wide_routing {
    int32_t token[WT * WK], weight[WT * WK], flat[WT * WK];
    int32_t count[WN], start[WN + 1];
} wide_routing;

/* Top-2 of logit + bias per token as the router picks (ties to the lower
 * index), the pairs sorted by expert in slot-major candidate order. */
static void wide_route(const float *logits, const float *bias, wide_routing *r)
{
    int32_t expert[WT * WK];
    memset(r->count, 0, sizeof r->count);
    for (int t = 0; t < WT; t++)
        for (int s = 0; s < WK; s++) {
            int best = -1;
            for (int e = 0; e < WN; e++) {
                float v = logits[t * WN + e] + bias[e];
                int taken = s && expert[t] == e;
                if (!taken && (best < 0 || v > logits[t * WN + best] + bias[best])) best = e;
            }
            expert[s * WT + t] = best;
            if (!s) expert[t] = best;
            r->flat[t * WK + s] = t * WN + best;
            r->count[best]++;
        }
    r->start[0] = 0;
    for (int e = 0; e < WN; e++) r->start[e + 1] = r->start[e] + r->count[e];
    int32_t cursor[WN];
    memcpy(cursor, r->start, sizeof cursor);
    for (int s = 0; s < WK; s++)
        for (int t = 0; t < WT; t++) {
            int p = cursor[expert[s * WT + t]]++;
            r->token[p] = t, r->weight[p] = t * WK + s;
        }
}

/* The MoE as it ran before the grouped op: per expert, gather its rows, a
 * linear, ReLU, a linear, and add its rows weighted into the output, in
 * expert order; the weights are the softmax over each token's two selected
 * logits, so gradients reach the router as in the plugin. */
static ast_tensor *moe_per_expert(const ffn_layer *l, ast_ctx *c, ast_tensor *x, wide_routing *r)
{
    float *bias = ast_params_find_buffer(l->params, FFN_SCOPE ".expression_ffn.ffn.router.selection_bias")->data;
    ast_tensor *flat = ast_reshape(c, x, 2, (int64_t[]){WT, WD});
    ast_tensor *logits = ast_linear(c, flat, ffn_param(l, "expression_ffn.ffn.router.gate.weight"), NULL);
    wide_route(logits->data, bias, r);
    ast_tensor *column = ast_reshape(c, logits, 2, (int64_t[]){WT * WN, 1});
    ast_tensor *picked = ast_reshape(c, ast_gather_rows(c, column, r->flat, WT * WK), 2, (int64_t[]){WT, WK});
    ast_tensor *weights = ast_reshape(c, ast_softmax(c, picked, -1), 2, (int64_t[]){WT * WK, 1});
    ast_tensor *out = ast_zeros(c, 2, (int64_t[]){WT, WD});
    for (int e = 0; e < WN; e++) {
        int32_t n = r->count[e], *rows = r->token + r->start[e];
        if (!n) continue;
        const char *fmt[4] = {"expression_ffn.ffn.experts.%d.w1.weight", "expression_ffn.ffn.experts.%d.w1.bias",
                              "expression_ffn.ffn.experts.%d.w2.weight", "expression_ffn.ffn.experts.%d.w2.bias"};
        ast_tensor *h = ast_relu(c, ast_linear(c, ast_gather_rows(c, flat, rows, n), param_j(l, fmt[0], e),
                                               param_j(l, fmt[1], e)));
        ast_tensor *y = ast_linear(c, h, param_j(l, fmt[2], e), param_j(l, fmt[3], e));
        ast_tensor *w = ast_reshape(c, ast_gather_rows(c, weights, r->weight + r->start[e], n), 1, (int64_t[]){n});
        out = ast_add(c, out, ast_scatter_add_rows(c, y, rows, w, WT));
    }
    return out;
}

/* Forward of one path and the gradients of sum(y * proj) into every
 * parameter and x, copied out in parameter order then x. */
static float *run_path(ffn_layer *l, ast_tensor *x, int grouped, wide_routing *r, float **y_out)
{
    ast_params_zero_grad(l->params);
    memset(x->grad, 0, (size_t)x->size * sizeof(float));
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = grouped ? ffn_forward(l, c, x, NULL, NULL) : moe_per_expert(l, c, x, r);
    ast_tensor *proj = ast_zeros(c, 1, (int64_t[]){y->size});
    for (int64_t i = 0; i < y->size; i++) proj->data[i] = (float)((i % 11) - 5) / 5.0f;
    ast_backward(c, ast_sum(c, ast_mul(c, ast_reshape(c, y, 1, (int64_t[]){y->size}), proj)));
    int64_t n = ast_params_numel(l->params), at = 0;
    float *g = malloc((size_t)(n + x->size) * sizeof *g);
    for (int i = 0; i < ast_params_count(l->params); i++) {
        ast_tensor *t = ast_params_at(l->params, i);
        memcpy(g + at, t->grad, (size_t)t->size * sizeof *g);
        at += t->size;
    }
    memcpy(g + at, x->grad, (size_t)x->size * sizeof *g);
    *y_out = memcpy(malloc((size_t)y->size * sizeof(float)), y->data, (size_t)y->size * sizeof(float));
    ast_ctx_free(c);
    return g;
}

/* Each output element is the same dot products (lengths 64 and 64) with
 * the same bias and the same weighted adds in expert order; only the split
 * of the rows between GEMM calls changes, which leaves OpenBLAS's order of
 * summation along k alone: 1e-6 of (1 + |value|), a few float32 ulps.
 * Gradients sum the same products over up to 512 rows split differently
 * (dW) or per row (dx): 1e-5 of (1 + |value|). */
Test(ffn_moe, grouped_experts_equal_a_linear_per_expert_at_scale)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_moe", &wide_dims, "num_experts=16,top_k=2,balance=bias", 40), "%s", l.err);
    float *bias = ast_params_find_buffer(l.params, FFN_SCOPE ".expression_ffn.ffn.router.selection_bias")->data;
    bias[3] = -1e9f, bias[7] = 1e9f;
    ast_params *p = ast_params_new(41);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){4, WT / 4, WD}, 1.0f);
    wide_routing r;
    float *y_ref, *y_new;
    float *g_ref = run_path(&l, x, 0, &r, &y_ref), *g_new = run_path(&l, x, 1, &r, &y_new);
    cr_assert_eq(r.count[3], 0, "expert 3 is empty");
    cr_assert_eq(r.count[7], WT, "expert 7 holds every token");
    for (int64_t i = 0; i < WT * WD; i++)
        cr_assert_float_eq(y_new[i], y_ref[i], 1e-6 * (1 + fabsf(y_ref[i])), "y[%lld]", (long long)i);
    int64_t n = ast_params_numel(l.params) + x->size;
    for (int64_t i = 0; i < n; i++)
        cr_assert_float_eq(g_new[i], g_ref[i], 1e-5 * (1 + fabsf(g_ref[i])), "gradient element %lld", (long long)i);
    free(y_ref), free(y_new), free(g_ref), free(g_new);
    ast_params_free(p);
    ffn_layer_close(&l);
}
