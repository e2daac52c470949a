/* The MoE plugin's combine kernels, the fused CPU node (plugins/ffn/
 * moe_combine.c) and the same from ops (moe_combine_ops.c, the "cuda"
 * kernel), each driven directly through the host table: two experts' rows
 * combined and summed against a direct loop, and finite-difference
 * gradients to both experts' rows and to the routing weights. Both reach
 * the host through the plugin kit's ast_api, which the plugin's entry
 * point sets; here the suite sets it to the core's table. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "moe_combine.h"

/* Sums of <= 2 float32 products against double: an ulp or two. */
#define VAL_TOL 1e-6
/* Linear in each input: central differences carry only float32 rounding
 * of L / h (~1e-5 at h = 1e-2). */
#define GRAD_TOL 1e-3

const ast_host *ast_api;

static void use_core_host(void) { ast_api = ast_host_table(); }

TestSuite(moe_combine, .init = use_core_host);

enum { T = 5, D = 3, N0 = 3, N1 = 4, M = 9 };
/* Top-2 style: tokens 0 and 2 go to both experts, token 4 to neither.
 * Weight rows are scattered over [0, M), as rows of a [tokens * k, 1]
 * routing-weight tensor are. */
static const int32_t TOKEN0[N0] = {0, 2, 3}, WEIGHT0[N0] = {0, 4, 6};
static const int32_t TOKEN1[N1] = {0, 1, 2, 2}, WEIGHT1[N1] = {1, 2, 5, 8};

/* The kernel under test, as gc_check's user data. */
typedef struct kernel {
    moe_combine_fn fn;
} kernel;

static const kernel FUSED = {moe_combine}, FROM_OPS = {moe_combine_ops};

/* in: y0 [N0, D], y1 [N1, D], weights [M, 1]; both experts' combines summed. */
static ast_tensor *fwd_combine(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const kernel *k = ud;
    ast_tensor *y0 = k->fn(c, T, in[0], in[2], TOKEN0, WEIGHT0);
    return ast_host_table()->ops->add(c, y0, k->fn(c, T, in[1], in[2], TOKEN1, WEIGHT1));
}

static void inputs(ast_params *p, ast_tensor **in)
{
    in[0] = gc_input(p, "y0", 2, (int64_t[]){N0, D}, 1.0f);
    in[1] = gc_input(p, "y1", 2, (int64_t[]){N1, D}, 1.0f);
    in[2] = gc_input(p, "weights", 2, (int64_t[]){M, 1}, 1.0f);
}

static void add_expert(double *want, const ast_tensor *y, const ast_tensor *w, const int32_t *token,
                       const int32_t *weight, int n)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < D; k++) want[token[i] * D + k] += (double)w->data[weight[i]] * y->data[i * D + k];
}

static void check_values(const kernel *k)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *in[3];
    inputs(p, in);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *out = fwd_combine(c, in, (void *)k);
    double want[T * D] = {0};
    add_expert(want, in[0], in[2], TOKEN0, WEIGHT0, N0);
    add_expert(want, in[1], in[2], TOKEN1, WEIGHT1, N1);
    for (int i = 0; i < T * D; i++) cr_assert_float_eq(out->data[i], want[i], VAL_TOL, "element %d", i);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(moe_combine, experts_add_weighted_rows) { check_values(&FUSED); }
Test(moe_combine, from_ops_experts_add_weighted_rows) { check_values(&FROM_OPS); }

static void check_gradients(const kernel *k)
{
    ast_params *p = ast_params_new(2);
    ast_tensor *in[3];
    inputs(p, in);
    gc_result r = gc_check(fwd_combine, in, 3, (void *)k, 1e-2f, 1e-2);
    cr_assert_lt(r.max_err, GRAD_TOL, "input %d[%lld] analytic %g numeric %g", r.worst_input,
                 (long long)r.worst_index, r.analytic, r.numeric);
    /* weight rows no pair reads get no gradient */
    cr_assert_eq(in[2]->grad[3], 0.0f);
    cr_assert_eq(in[2]->grad[7], 0.0f);
    ast_params_free(p);
}

Test(moe_combine, gradients_to_both_experts_and_the_weights) { check_gradients(&FUSED); }
Test(moe_combine, from_ops_gradients_to_both_experts_and_the_weights) { check_gradients(&FROM_OPS); }

/* Enough rows for the host's threads (2,000 x 64): with every token and
 * weight distinct, with each token twice (as top-2 routing gives: the
 * forward goes by token, so a token's rows add on one thread) and with each
 * weight row twice (the backward's rows then stay on one thread), against a
 * direct double loop, forward and both gradients. Sums of <= 2 terms
 * (forward) and up to 128 products (weight gradient, ~1e-5 of its magnitude). */
static void check_many_rows(const kernel *k, int repeat_tokens, int repeat_weights)
{
    enum { ROWS = 2000, DD = 64 };
    int64_t tokens = repeat_tokens ? ROWS / 2 : ROWS;
    const ast_host *h = ast_host_table();
    ast_params *p = ast_params_new(5);
    ast_tensor *y = gc_input(p, "y", 2, (int64_t[]){ROWS, DD}, 1.0f);
    ast_tensor *w = gc_input(p, "w", 2, (int64_t[]){ROWS, 1}, 1.0f);
    int32_t *token = malloc(ROWS * sizeof *token), *weight = malloc(ROWS * sizeof *weight);
    int64_t weights = repeat_weights ? ROWS / 2 : ROWS;
    for (int i = 0; i < ROWS; i++) token[i] = (int32_t)((i * 7919) % tokens), weight[i] = (int32_t)((i * 31) % weights);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *out = k->fn(c, tokens, y, w, token, weight);
    ast_tensor *r = h->ops->zeros(c, 2, (int64_t[]){tokens, DD});
    for (int64_t i = 0; i < r->size; i++) r->data[i] = (float)((i % 13) - 6) / 6.0f;
    ast_backward(c, h->ops->sum(c, h->ops->mul(c, out, r)));
    double *want = calloc((size_t)(tokens * DD), sizeof *want);
    for (int i = 0; i < ROWS; i++)
        for (int k = 0; k < DD; k++) want[token[i] * DD + k] += (double)w->data[weight[i]] * y->data[i * DD + k];
    for (int64_t i = 0; i < tokens * DD; i++) cr_assert_float_eq(out->data[i], want[i], 1e-5, "out %lld", (long long)i);
    double *want_gw = calloc(ROWS, sizeof *want_gw);
    for (int i = 0; i < ROWS; i++)
        for (int k = 0; k < DD; k++) {
            double g = (double)w->data[weight[i]] * r->data[token[i] * DD + k];
            cr_assert_float_eq(y->grad[i * DD + k], g, 1e-5, "dy[%d, %d]", i, k);
            want_gw[weight[i]] += (double)r->data[token[i] * DD + k] * y->data[i * DD + k];
        }
    for (int j = 0; j < ROWS; j++) cr_assert_float_eq(w->grad[j], want_gw[j], 1e-4, "dw[%d]", j);
    free(want), free(want_gw), free(token), free(weight);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(moe_combine, many_distinct_rows_split_over_threads) { check_many_rows(&FUSED, 0, 0); }
Test(moe_combine, many_rows_sharing_tokens_stay_correct) { check_many_rows(&FUSED, 1, 0); }
Test(moe_combine, many_rows_sharing_weights_stay_correct) { check_many_rows(&FUSED, 0, 1); }
Test(moe_combine, from_ops_many_rows_sharing_tokens_and_weights) { check_many_rows(&FROM_OPS, 1, 1); }

/* The same numbers from both kernels on the CPU: each token's rows are
 * added in row order by both, and a weight's gradient in row order. */
Test(moe_combine, both_kernels_agree_bit_for_bit)
{
    enum { ROWS = 600, DD = 16, TOKENS = 200, WEIGHTS = 300 };
    const ast_host *h = ast_host_table();
    ast_params *p = ast_params_new(7);
    ast_tensor *y = gc_input(p, "y", 2, (int64_t[]){ROWS, DD}, 1.0f);
    ast_tensor *w = gc_input(p, "w", 2, (int64_t[]){WEIGHTS, 1}, 1.0f);
    static int32_t token[ROWS], weight[ROWS];
    for (int i = 0; i < ROWS; i++) token[i] = (int32_t)((i * 37) % TOKENS), weight[i] = (int32_t)((i * 11) % WEIGHTS);
    float *want[3], *got[3];
    const kernel *k[2] = {&FUSED, &FROM_OPS};
    for (int run = 0; run < 2; run++) {
        float **dst = run ? got : want;
        ast_ctx *c = ast_ctx_new(0);
        ast_tensor *out = k[run]->fn(c, TOKENS, y, w, token, weight);
        ast_backward(c, h->ops->sum(c, h->ops->mul(c, out, out)));
        dst[0] = malloc((size_t)out->size * sizeof(float));
        memcpy(dst[0], out->data, (size_t)out->size * sizeof(float));
        dst[1] = malloc(sizeof(float) * ROWS * DD);
        memcpy(dst[1], y->grad, sizeof(float) * ROWS * DD);
        dst[2] = malloc(sizeof(float) * WEIGHTS);
        memcpy(dst[2], w->grad, sizeof(float) * WEIGHTS);
        memset(y->grad, 0, sizeof(float) * ROWS * DD);
        memset(w->grad, 0, sizeof(float) * WEIGHTS);
        ast_ctx_free(c);
    }
    cr_assert_arr_eq(got[0], want[0], sizeof(float) * TOKENS * DD, "forward");
    cr_assert_arr_eq(got[1], want[1], sizeof(float) * ROWS * DD, "dy");
    cr_assert_arr_eq(got[2], want[2], sizeof(float) * WEIGHTS, "dweights");
    for (int i = 0; i < 3; i++) free(want[i]), free(got[i]);
    ast_params_free(p);
}
