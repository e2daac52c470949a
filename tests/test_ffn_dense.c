/* The dense FFN plugin: parameter names and init, values against a naive
 * loop with the erf GELU, and gradients against finite differences. */
#include <criterion/criterion.h>
#include <math.h>

#include "ffn_fixture.h"
#include "gradcheck.h"

#define E 6
#define F 8

/* float32 sums of <= 8 products of O(1) numbers, against double. */
#define VAL_TOL 1e-5
/* Smooth function, h = 1e-2: central-difference truncation O(h^2 f''') and
 * float32 rounding of L / h both stay below 1e-2 relative. */
#define GRAD_TOL 1e-2

static const ast_layer_dims dims = {.d_model = E, .heads = 2, .d_ff = F, .d_time = 4, .num_layers = 1};

Test(ffn_dense, parameters_are_named_shaped_and_initialised_as_pytorch)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_dense", &dims, NULL, 1), "%s", l.err);
    const char *names[] = {"lin_expression_features_1.weight", "lin_expression_features_1.bias",
                           "lin_expression_features_2.weight", "lin_expression_features_2.bias"};
    const int64_t shapes[4][2] = {{F, E}, {F, 0}, {E, F}, {E, 0}};
    const float bound[] = {1 / sqrtf(E), 1 / sqrtf(E), 1 / sqrtf(F), 1 / sqrtf(F)};
    cr_assert_eq(ast_params_count(l.params), 4);
    for (int i = 0; i < 4; i++) {
        ast_tensor *t = ast_params_at(l.params, i);
        cr_assert_str_eq(t->name, ffn_param(&l, names[i])->name, "registration order");
        cr_assert_eq(t->shape[0], shapes[i][0]);
        cr_assert_eq(t->ndim, shapes[i][1] ? 2 : 1);
        if (shapes[i][1]) cr_assert_eq(t->shape[1], shapes[i][1]);
        float mx = 0;
        for (int64_t j = 0; j < t->size; j++) mx = fmaxf(mx, fabsf(t->data[j]));
        cr_assert_leq(mx, bound[i], "%s exceeds U(+-1/sqrt(fan_in))", t->name);
        cr_assert_gt(mx, 0.5f * bound[i], "%s looks zero-initialised", t->name);
    }
    cr_assert_eq(ast_params_numel(l.params), 2 * E * F + F + E, "docs/model.md §2.11 P_ffn");
    cr_assert_null(l.desc->active_params, "dense uses every parameter");
    ffn_layer_close(&l);
}

static double gelu(double v) { return 0.5 * v * (1.0 + erf(v / sqrt(2.0))); }

Test(ffn_dense, matches_naive_gelu_mlp)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_dense", &dims, NULL, 2), "%s", l.err);
    ast_params *p = ast_params_new(3);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, E}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ffn_forward(&l, c, x, NULL, NULL);
    const float *w1 = ffn_param(&l, "lin_expression_features_1.weight")->data;
    const float *b1 = ffn_param(&l, "lin_expression_features_1.bias")->data;
    const float *w2 = ffn_param(&l, "lin_expression_features_2.weight")->data;
    const float *b2 = ffn_param(&l, "lin_expression_features_2.bias")->data;
    cr_assert_eq(y->ndim, 3);
    cr_assert_eq(y->shape[2], E);
    for (int t = 0; t < 6; t++) {
        double hid[F];
        for (int f = 0; f < F; f++) {
            double s = b1[f];
            for (int e = 0; e < E; e++) s += w1[f * E + e] * x->data[t * E + e];
            hid[f] = gelu(s);
        }
        for (int e = 0; e < E; e++) {
            double s = b2[e];
            for (int f = 0; f < F; f++) s += w2[e * F + f] * hid[f];
            cr_assert_float_eq(y->data[t * E + e], s, VAL_TOL * (1 + fabs(s)), "y[%d,%d]", t, e);
        }
    }
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&l);
}

static ast_tensor *fwd_dense(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ffn_forward(ud, c, in[0], NULL, NULL);
}

Test(ffn_dense, gradients_wrt_input_and_every_parameter)
{
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_dense", &dims, NULL, 4), "%s", l.err);
    ast_params *p = ast_params_new(5);
    ast_tensor *in[5] = {gc_input(p, "x", 3, (int64_t[]){2, 3, E}, 1.0f)};
    for (int i = 0; i < 4; i++) in[i + 1] = ast_params_at(l.params, i);
    gc_result r = gc_check(fwd_dense, in, 5, &l, 1e-2f, 1e-2);
    cr_assert_lt(r.max_err, GRAD_TOL, "input %d[%lld]: analytic %g numeric %g", r.worst_input,
                 (long long)r.worst_index, r.analytic, r.numeric);
    ast_params_free(p);
    ffn_layer_close(&l);
}

/* Dropout is the only randomness: training with p > 0 zeroes some hidden
 * units, so the output moves; eval is deterministic. */
Test(ffn_dense, dropout_only_in_training)
{
    ast_layer_dims d = dims;
    d.dropout = 0.5f;
    ffn_layer l;
    cr_assert(ffn_layer_open(&l, "ffn_dense", &d, NULL, 6), "%s", l.err);
    ast_params *p = ast_params_new(7);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, E}, 1.0f);
    ast_ctx *c = ast_ctx_new(8);
    ast_tensor *eval = ffn_forward(&l, c, x, NULL, NULL);
    ast_ctx_set_training(c, 1);
    ast_tensor *train = ffn_forward(&l, c, x, NULL, NULL);
    int differ = 0;
    for (int64_t i = 0; i < eval->size; i++) differ |= eval->data[i] != train->data[i];
    cr_assert(differ, "dropout 0.5 left every output unchanged");
    ast_ctx_free(c);
    ast_params_free(p);
    ffn_layer_close(&l);
}
