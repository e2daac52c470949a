/* attn_linear: state_dict names and init, values against the independent
 * double-precision reference, gradients against finite differences, and
 * the node mask. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "attn_reference.h"
#include "plugin/loader.h"
#include "plugin_fixture.h"

#define PREFIX "attention"
enum { B = 2, N = 5, E = 8, H = 2 };

/* float32 through LN, two softmaxes, three matmul chains and a GELU MLP of
 * O(1) values against the double reference: measured 1.5e-7 of the output
 * scale; 1e-5 leaves room for another BLAS summation order. */
#define VAL_TOL 1e-5
/* Central differences in float32 (floor 1e-2 for near-zero gradients):
 * rounding of L (80 outputs through LN, softmax, GELU) divided by h
 * dominates below h = 1e-2, where the worst element measures 1.3e-2
 * relative (5e-2 at h = 3e-3); a wrong backward gives O(1). */
#define GRAD_H 1e-2f
#define GRAD_FLOOR 1e-2
#define GRAD_TOL 3e-2

static const ast_layer_dims dims = {.d_model = E, .heads = H, .d_ff = 16, .d_time = 4, .num_layers = 1, .ln_eps = 1e-6f};

static pf_instance make(uint64_t seed)
{
    return pf_create(pf_load("attention", "attn_linear"), PREFIX, &dims, seed, NULL, 0);
}

/* Last cells of set 1 are padding. */
static ast_tensor *padding_mask(void)
{
    float m[B * N] = {1, 1, 1, 1, 1, 1, 1, 1, 0, 0};
    return pf_const(2, (int64_t[]){B, N}, m);
}

/* Parameters perturbed away from LN's identity init so every path matters. */
static void perturb(pf_instance *pi, float scale)
{
    ast_rng r;
    ast_rng_seed(&r, 99);
    for (int i = 0; i < ast_params_count(pi->params); i++) {
        ast_tensor *t = ast_params_at(pi->params, i);
        for (int64_t j = 0; j < t->size; j++) t->data[j] += scale * ast_rng_gauss(&r);
    }
}

Test(attn_linear, parameters_follow_the_state_dict)
{
    static const struct { const char *name; int64_t rows, cols; } want[] = {
        {"layers.layers.0.0.fn.to_q.weight", E, E},       {"layers.layers.0.0.fn.to_k.weight", E, E},
        {"layers.layers.0.0.fn.to_v.weight", E, E},       {"layers.layers.0.0.fn.to_out.weight", E, E},
        {"layers.layers.0.0.fn.to_out.bias", E, 0},       {"layers.layers.0.0.norm.weight", E, 0},
        {"layers.layers.0.0.norm.bias", E, 0},            {"layers.layers.0.1.fn.fn.w1.weight", 4 * E, E},
        {"layers.layers.0.1.fn.fn.w1.bias", 4 * E, 0},    {"layers.layers.0.1.fn.fn.w2.weight", E, 4 * E},
        {"layers.layers.0.1.fn.fn.w2.bias", E, 0},        {"layers.layers.0.1.norm.weight", E, 0},
        {"layers.layers.0.1.norm.bias", E, 0},
    };
    pf_instance pi = make(1);
    int n = (int)(sizeof want / sizeof want[0]);
    cr_assert_eq(ast_params_count(pi.params), n);
    for (int i = 0; i < n; i++) {
        ast_tensor *t = ast_params_at(pi.params, i);
        cr_assert_str_eq(t->name + strlen(PREFIX ".") , want[i].name);
        cr_assert_eq(t->ndim, want[i].cols ? 2 : 1, "%s", t->name);
        cr_assert_eq(t->shape[0], want[i].rows, "%s", t->name);
        if (want[i].cols) cr_assert_eq(t->shape[1], want[i].cols, "%s", t->name);
    }
    /* docs/model.md §2.11: 12E^2 + 10E */
    cr_assert_eq(ast_params_numel(pi.params), 12 * E * E + 10 * E);
    /* LayerNorm w = 1, b = 0; Linear U(+-1/sqrt(fan_in)) */
    ast_tensor *lnw = ast_params_find(pi.params, PREFIX ".layers.layers.0.1.norm.weight");
    ast_tensor *lnb = ast_params_find(pi.params, PREFIX ".layers.layers.0.1.norm.bias");
    ast_tensor *w2 = ast_params_find(pi.params, PREFIX ".layers.layers.0.1.fn.fn.w2.weight");
    for (int i = 0; i < E; i++) {
        cr_assert_eq(lnw->data[i], 1.0f);
        cr_assert_eq(lnb->data[i], 0.0f);
    }
    for (int64_t i = 0; i < w2->size; i++) cr_assert_leq(fabsf(w2->data[i]), 1.0f / sqrtf(4 * E));
    pf_destroy(&pi);
}

static void check_against_reference(ast_tensor *mask)
{
    pf_instance pi = make(2);
    perturb(&pi, 0.3f);
    ast_params *xs = ast_params_new(3);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, N, E}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = pf_forward(&pi, c, x, mask);
    double ref[B * N * E], scale = 0;
    ref_linear_block(pi.params, PREFIX, (ref_dims){B, N, E, H}, x->data, mask ? mask->data : NULL, ref);
    for (int i = 0; i < B * N * E; i++) scale = fmax(scale, fabs(ref[i]));
    for (int i = 0; i < B * N * E; i++)
        cr_assert_leq(fabs(y->data[i] - ref[i]), VAL_TOL * scale, "y[%d] = %g, reference %g", i, y->data[i], ref[i]);
    ast_ctx_free(c);
    ast_params_free(xs);
    pf_destroy(&pi);
}

Test(attn_linear, matches_reference_without_mask) { check_against_reference(NULL); }

Test(attn_linear, matches_reference_with_padding)
{
    ast_tensor *m = padding_mask();
    check_against_reference(m);
    pf_const_free(m);
}

static void check_gradients(ast_tensor *mask)
{
    pf_instance pi = make(4);
    perturb(&pi, 0.3f);
    ast_params *xs = ast_params_new(5);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, N, E}, 1.0f);
    gc_result r = pf_gradcheck(&pi, x, mask, 0, GRAD_H, GRAD_FLOOR);
    const char *name = r.worst_input ? ast_params_at(pi.params, r.worst_input - 1)->name : "x";
    cr_assert_lt(r.max_err, GRAD_TOL, "%s[%lld]: analytic %g numeric %g", name, (long long)r.worst_index,
                 r.analytic, r.numeric);
    ast_params_free(xs);
    pf_destroy(&pi);
}

Test(attn_linear, gradients_of_input_and_every_parameter) { check_gradients(NULL); }

Test(attn_linear, gradients_with_padding)
{
    ast_tensor *m = padding_mask();
    check_gradients(m);
    pf_const_free(m);
}

/* Padded cells must not reach valid ones; an all-ones mask changes nothing. */
Test(attn_linear, padded_cells_do_not_reach_valid_ones)
{
    pf_instance pi = make(6);
    perturb(&pi, 0.3f);
    ast_params *xs = ast_params_new(7);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, N, E}, 1.0f);
    ast_tensor *mask = padding_mask();
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_grad(c, 0);
    float before[B * N * E], unmasked[B * N * E];
    memcpy(before, pf_forward(&pi, c, x, mask)->data, sizeof before);
    memcpy(unmasked, pf_forward(&pi, c, x, NULL)->data, sizeof unmasked);
    for (int n = 3; n < N; n++)
        for (int e = 0; e < E; e++) x->data[(N + n) * E + e] += 5.0f + e;
    ast_tensor *after = pf_forward(&pi, c, x, mask);
    for (int i = 0; i < B * N * E; i++) {
        int valid = i / E < N + 3;
        if (valid) cr_assert_eq(after->data[i], before[i], "valid output %d changed", i);
        else cr_assert_neq(after->data[i], before[i], "padded output %d should follow its input", i);
    }
    /* without a mask the padded cells do reach set 1's valid cells (docs/model.md §2.9) */
    ast_tensor *none = pf_forward(&pi, c, x, NULL);
    cr_assert_neq(memcmp(none->data + N * E, unmasked + N * E, 3 * E * sizeof(float)), 0);
    /* no padding: the mask path is exactly the unmasked computation */
    for (int i = 0; i < B * N; i++) mask->data[i] = 1.0f;
    ast_tensor *ones = pf_forward(&pi, c, x, mask);
    cr_assert_arr_eq(ones->data, none->data, sizeof before);
    ast_ctx_free(c);
    pf_const_free(mask);
    ast_params_free(xs);
    pf_destroy(&pi);
}

/* The host refuses the sizes before create() (ast_plugin_dims_ok), so the
 * plugin need not check them. */
Test(attn_linear, rejects_heads_not_dividing_the_width)
{
    ast_layer_dims bad = dims;
    bad.heads = 3;
    const ast_plugin_desc *d = pf_load("attention", "attn_linear");
    char err[256] = "";
    cr_assert_not(ast_plugin_dims_ok(d, &bad, err, sizeof err));
    cr_assert_not_null(strstr(err, "num_heads 3"), "message: %s", err);
}
