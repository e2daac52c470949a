/* attn_geodesic (docs/model.md §2.12): it asks for the geodesic distances,
 * its gradients (input, every parameter, the per-head bias weight) against
 * finite differences, and the bias doing what it says: a strong one keeps
 * each cell's attention among the cells near it in expression. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "plugin_fixture.h"

#define PREFIX "attention"
enum { B = 2, N = 5, E = 8, H = 2 };

/* As test_attn_linear: central differences in float32 through one softmax
 * and four projections of O(1) values; h = 1e-2 keeps L's rounding over h
 * below 1e-3 relative, curvature error ~1e-4; a wrong backward gives O(1). */
#define GRAD_H 1e-2f
#define GRAD_FLOOR 1e-2
#define GRAD_TOL 3e-2

static const ast_layer_dims dims = {.d_model = E, .heads = H, .d_ff = 16, .d_time = 4, .num_layers = 1, .ln_eps = 1e-6f};

static pf_instance make(uint64_t seed, const char *bias_init)
{
    const char *opt[1];
    char text[64];
    snprintf(text, sizeof text, "bias_init=%s", bias_init);
    opt[0] = text;
    return pf_create(pf_load("attention", "attn_geodesic"), PREFIX, &dims, seed, opt, 1);
}

/* Cells {0, 1} and {2, 3, 4} of each set are two groups: distance 0
 * within a group (as if they coincided in expression), 2 across; the last cell of set 1 is padding (0 there). */
static ast_tensor *two_groups(int padded)
{
    float g[B * N * N];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) {
                int pad = padded && b == 1 && (i == N - 1 || j == N - 1);
                g[(b * N + i) * N + j] = pad || i == j ? 0.0f : (i < 2) == (j < 2) ? 0.0f : 2.0f;
            }
    return pf_const(3, (int64_t[]){B, N, N}, g);
}

Test(attn_geodesic, asks_the_host_for_geodesic_distances)
{
    cr_assert_eq(pf_load("attention", "attn_geodesic")->wants_geodesic, 1);
    cr_assert_eq(pf_load("attention", "attn_linear")->wants_geodesic, 0, "older descriptors read 0");
}

Test(attn_geodesic, gradients_of_input_and_every_parameter)
{
    pf_instance pi = make(4, "0.7");
    ast_params *xs = ast_params_new(5);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, N, E}, 1.0f);
    float m[B * N] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    ast_tensor *mask = pf_const(2, (int64_t[]){B, N}, m), *geo = two_groups(1);
    ast_test_gc_opts o = {.h = GRAD_H, .floor = GRAD_FLOOR};
    ast_test_gc_result r = ast_test_gradcheck(&pi, x, &(ast_fwd_args){.mask = mask, .geodesic = geo}, &o);
    const char *name = r.worst_input ? ast_params_at(pi.params, r.worst_input - 1)->name : "x";
    cr_assert_lt(r.max_err, GRAD_TOL, "%s[%lld]: analytic %g numeric %g", name, (long long)r.worst_index,
                 r.analytic, r.numeric);
    cr_assert_not_null(ast_params_find(pi.params, PREFIX ".geodesic_bias.weight"));
    pf_const_free(mask), pf_const_free(geo);
    ast_params_free(xs);
    pf_destroy(&pi);
}

/* Weight 40 on a distance gap of 2 scales the far cells' weights by
 * e^-80 (~2e-35): moving a far cell changes nothing in float32, moving a
 * near one does; with weight 0 (plain softmax) the far cell matters. */
static double change_of_cell0(const char *bias_init, int moved)
{
    pf_instance pi = make(6, bias_init);
    ast_params *xs = ast_params_new(7);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, N, E}, 1.0f), *geo = two_groups(0);
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_grad(c, 0);
    float before[E];
    memcpy(before, ast_test_forward(&pi, c, x, &(ast_fwd_args){.geodesic = geo})->data, sizeof before);
    for (int e = 0; e < E; e++) x->data[moved * E + e] += 2.0f;
    ast_tensor *after = ast_test_forward(&pi, c, x, &(ast_fwd_args){.geodesic = geo});
    double d = 0.0;
    for (int e = 0; e < E; e++) d = fmax(d, fabs((double)after->data[e] - before[e]));
    ast_ctx_free(c);
    pf_const_free(geo);
    ast_params_free(xs);
    pf_destroy(&pi);
    return d;
}

Test(attn_geodesic, a_strong_bias_keeps_attention_among_near_cells)
{
    cr_assert_eq(change_of_cell0("40", 3), 0.0, "a far cell reached cell 0");
    cr_assert_gt(change_of_cell0("40", 1), 1e-3, "the near cell should reach cell 0");
    cr_assert_gt(change_of_cell0("0", 3), 1e-3, "without the bias every cell reaches cell 0");
}
