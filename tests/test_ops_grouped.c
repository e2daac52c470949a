/* grouped_linear (ABI 2.2): values against a naive double loop and against
 * one linear per group, gradients against finite differences, with empty
 * groups, one group holding every row and uneven blocks, the rows split over
 * the pool's threads, and broken offsets or shapes refused. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "gradcheck.h"

/* float32 sums of <= 64 products of O(1) numbers (plus a bias) against
 * double: the rounding of each partial sum, ~64 * 6e-8 of the summed
 * magnitude at worst; 1e-5 of (1 + |value|) covers it with room. */
#define VAL_TOL 1e-5
/* The op is linear in each input (x, every weight, every bias), so central
 * differences have no truncation error, only float32 rounding of L / h
 * (~1e-5 at h = 1e-2), as for linear in test_ops_linalg.c. */
#define GRAD_H 1e-2f
#define GRAD_TOL 1e-2

#define MAX_G 9

typedef struct groups {
    int n;
    int64_t offsets[MAX_G + 1];
    int bias;
} groups;

/* in: x, then n weights, then n biases (when g->bias). */
static ast_tensor *fwd_grouped(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const groups *g = ud;
    return ast_grouped_linear(c, in[0], g->offsets, g->n, in + 1, g->bias ? in + 1 + g->n : NULL);
}

/* x [rows, in], weights [out, in] and biases [out], N(0, 1). */
static int make_inputs(ast_params *p, const groups *g, int64_t in_dim, int64_t out_dim, ast_tensor **in)
{
    char name[32];
    in[0] = gc_input(p, "x", 2, (int64_t[]){g->offsets[g->n], in_dim}, 1.0f);
    for (int k = 0; k < g->n; k++) {
        snprintf(name, sizeof name, "w%d", k);
        in[1 + k] = gc_input(p, name, 2, (int64_t[]){out_dim, in_dim}, 1.0f);
        snprintf(name, sizeof name, "b%d", k);
        if (g->bias) in[1 + g->n + k] = gc_input(p, name, 1, (int64_t[]){out_dim}, 1.0f);
    }
    return 1 + g->n * (g->bias ? 2 : 1);
}

/* y against sum_i x[r, i] w[g][o, i] + b[g][o] in double, row by row. */
static void check_values(const groups *g, ast_tensor *const *in, const ast_tensor *y)
{
    int64_t in_dim = in[0]->shape[1], out_dim = in[1]->shape[0];
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], g->offsets[g->n]);
    cr_assert_eq(y->shape[1], out_dim);
    for (int k = 0; k < g->n; k++)
        for (int64_t r = g->offsets[k]; r < g->offsets[k + 1]; r++)
            for (int64_t o = 0; o < out_dim; o++) {
                double s = g->bias ? in[1 + g->n + k]->data[o] : 0.0;
                for (int64_t i = 0; i < in_dim; i++) s += (double)in[0]->data[r * in_dim + i] * in[1 + k]->data[o * in_dim + i];
                cr_assert_float_eq(y->data[r * out_dim + o], s, VAL_TOL * (1 + fabs(s)), "group %d y[%lld, %lld]", k,
                                   (long long)r, (long long)o);
            }
}

static void check_gradients(const groups *g, uint64_t seed)
{
    ast_params *p = ast_params_new(seed);
    ast_tensor *in[1 + 2 * MAX_G];
    int n_in = make_inputs(p, g, 5, 4, in);
    ast_ctx *c = ast_ctx_new(0);
    check_values(g, in, fwd_grouped(c, in, (void *)g));
    ast_ctx_free(c);
    gc_result r = gc_check(fwd_grouped, in, n_in, (void *)g, GRAD_H, 1e-2);
    cr_assert_lt(r.max_err, GRAD_TOL, "input %d[%lld]: analytic %g numeric %g", r.worst_input,
                 (long long)r.worst_index, r.analytic, r.numeric);
    /* an empty group's parameters get no gradient at all */
    for (int k = 0; k < g->n; k++)
        if (g->offsets[k] == g->offsets[k + 1])
            for (int64_t i = 0; i < in[1 + k]->size; i++) cr_assert_eq(in[1 + k]->grad[i], 0.0f, "empty group %d", k);
    ast_params_free(p);
}

Test(ops_grouped, uneven_blocks_with_empty_groups)
{
    check_gradients(&(groups){4, {0, 3, 3, 7, 7}, 1}, 1);  /* groups 1 and 3 empty */
    check_gradients(&(groups){4, {0, 0, 2, 3, 7}, 1}, 2);  /* the first empty, blocks of 2, 1, 4 */
}

Test(ops_grouped, one_group_holding_every_row)
{
    check_gradients(&(groups){3, {0, 0, 6, 6}, 1}, 3);
    check_gradients(&(groups){1, {0, 6}, 0}, 4); /* a plain linear, no bias */
}

Test(ops_grouped, no_rows_at_all)
{
    ast_params *p = ast_params_new(5);
    ast_tensor *in[1 + 2 * MAX_G];
    groups g = {2, {0, 0, 0}, 1};
    make_inputs(p, &g, 5, 4, in);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = fwd_grouped(c, in, &g);
    cr_assert_eq(y->shape[0], 0);
    cr_assert_eq(y->shape[1], 4);
    ast_ctx_free(c);
    ast_params_free(p);
}

/* dx adds to what another consumer of x left there (y = grouped(x) + x). */
static ast_tensor *fwd_plus_input(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_add(c, fwd_grouped(c, in, ud), in[0]);
}

Test(ops_grouped, input_gradient_adds_to_another_consumer)
{
    groups g = {3, {0, 2, 2, 5}, 1};
    ast_params *p = ast_params_new(6);
    ast_tensor *in[1 + 2 * MAX_G];
    char name[8];
    in[0] = gc_input(p, "x", 2, (int64_t[]){5, 4}, 1.0f);
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof name, "w%d", k);
        in[1 + k] = gc_input(p, name, 2, (int64_t[]){4, 4}, 1.0f);
        snprintf(name, sizeof name, "b%d", k);
        in[4 + k] = gc_input(p, name, 1, (int64_t[]){4}, 1.0f);
    }
    gc_result r = gc_check(fwd_plus_input, in, 7, &g, GRAD_H, 1e-2);
    cr_assert_lt(r.max_err, GRAD_TOL, "input %d[%lld]: analytic %g numeric %g", r.worst_input,
                 (long long)r.worst_index, r.analytic, r.numeric);
    ast_params_free(p);
}

/* ---- enough rows for every thread of the pool -------------------------- */

enum { ROWS = 600, IN = 64, OUT = 48, NG = 9 };
/* Uneven blocks with empty ones; 600 x 64 x 48 multiply-adds make several
 * parts, so blocks straddle the parts' boundaries. */
static const int64_t OFFSETS[NG + 1] = {0, 0, 1, 151, 158, 158, 458, 460, 600, 600};

/* The same rows through one linear per group, as the MoE ran before: the
 * grouped op runs the same GEMMs on other splits of the rows, so each
 * element is the same dot product of length 64 (the same value up to the
 * order OpenBLAS's kernels sum in). Gradients of sum(y * r) for fixed r:
 * dx and the weight gradients against double loops (sums of 48 and up to
 * 300 products: 1e-5 of their magnitude, 1e-4 for the longest). */
Test(ops_grouped, split_over_threads_matches_a_linear_per_group)
{
    groups g = {NG, {0}, 1};
    memcpy(g.offsets, OFFSETS, sizeof OFFSETS);
    ast_params *p = ast_params_new(7);
    ast_tensor *in[1 + 2 * NG];
    make_inputs(p, &g, IN, OUT, in);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = fwd_grouped(c, in, &g);
    check_values(&g, in, y);
    for (int k = 0; k < NG; k++) {
        int64_t first = OFFSETS[k], n = OFFSETS[k + 1] - first;
        if (!n) continue;
        ast_tensor *xk = ast_tensor_from(c, 2, (int64_t[]){n, IN}, in[0]->data + first * IN);
        ast_tensor *yk = ast_linear(c, xk, in[1 + k], in[1 + NG + k]);
        for (int64_t i = 0; i < n * OUT; i++) {
            float want = yk->data[i], got = y->data[first * OUT + i];
            cr_assert_float_eq(got, want, VAL_TOL * (1 + fabsf(want)), "group %d element %lld", k, (long long)i);
        }
    }
    ast_ctx_free(c);

    for (int k = 0; k < 1 + 2 * NG; k++) memset(in[k]->grad, 0, (size_t)in[k]->size * sizeof(float));
    c = ast_ctx_new(0);
    y = fwd_grouped(c, in, &g);
    float *seed = malloc(ROWS * OUT * sizeof *seed);
    for (int i = 0; i < ROWS * OUT; i++) seed[i] = (float)((i % 17) - 8) / 8.0f;
    ast_backward_seed(c, y, seed);
    for (int k = 0; k < NG; k++) {
        const float *x = in[0]->data, *w = in[1 + k]->data;
        for (int64_t r = OFFSETS[k]; r < OFFSETS[k + 1]; r++)
            for (int i = 0; i < IN; i++) {
                double s = 0.0;
                for (int o = 0; o < OUT; o++) s += (double)seed[r * OUT + o] * w[o * IN + i];
                cr_assert_float_eq(in[0]->grad[r * IN + i], s, 1e-5 * (1 + fabs(s)), "dx[%lld, %d]", (long long)r, i);
            }
        for (int o = 0; o < OUT; o++) {
            double sb = 0.0;
            for (int64_t r = OFFSETS[k]; r < OFFSETS[k + 1]; r++) sb += seed[r * OUT + o];
            cr_assert_float_eq(in[1 + NG + k]->grad[o], sb, 1e-4 * (1 + fabs(sb)), "db%d[%d]", k, o);
            for (int i = 0; i < IN; i++) {
                double s = 0.0;
                for (int64_t r = OFFSETS[k]; r < OFFSETS[k + 1]; r++) s += (double)seed[r * OUT + o] * x[r * IN + i];
                cr_assert_float_eq(in[1 + k]->grad[o * IN + i], s, 1e-4 * (1 + fabs(s)), "dw%d[%d, %d]", k, o, i);
            }
        }
    }
    free(seed);
    ast_ctx_free(c);
    ast_params_free(p);
}

/* Results do not depend on timing: two runs give the same bits. */
Test(ops_grouped, repeated_runs_give_the_same_bits)
{
    groups g = {NG, {0}, 1};
    memcpy(g.offsets, OFFSETS, sizeof OFFSETS);
    ast_params *p = ast_params_new(8);
    ast_tensor *in[1 + 2 * NG];
    make_inputs(p, &g, IN, OUT, in);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *a = fwd_grouped(c, in, &g), *b = fwd_grouped(c, in, &g);
    cr_assert_eq(memcmp(a->data, b->data, (size_t)a->size * sizeof(float)), 0);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_grouped, nothing_is_recorded_without_grad_mode)
{
    groups g = {2, {0, 1, 3}, 0};
    ast_params *p = ast_params_new(9);
    ast_tensor *in[1 + 2 * MAX_G];
    make_inputs(p, &g, 5, 4, in);
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_grad(c, 0);
    cr_assert_not(fwd_grouped(c, in, &g)->flags & AST_REQUIRES_GRAD);
    ast_ctx_free(c);
    ast_params_free(p);
}

/* ---- broken calls are programming errors: abort with file:line ---------- */

static void call_with(const groups *g, int64_t rows, int64_t w1_in)
{
    ast_params *p = ast_params_new(10);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){rows, 5}, 1.0f);
    ast_tensor *w[2] = {gc_input(p, "w0", 2, (int64_t[]){4, 5}, 1.0f), gc_input(p, "w1", 2, (int64_t[]){4, w1_in}, 1.0f)};
    ast_ctx *c = ast_ctx_new(0);
    ast_grouped_linear(c, x, g->offsets, g->n, w, NULL);
}

Test(ops_grouped, offsets_that_miss_rows_abort, .signal = SIGABRT) { call_with(&(groups){2, {0, 2, 3}}, 4, 5); }
Test(ops_grouped, decreasing_offsets_abort, .signal = SIGABRT) { call_with(&(groups){2, {0, 3, 2}}, 2, 5); }
Test(ops_grouped, a_weight_of_another_width_aborts, .signal = SIGABRT) { call_with(&(groups){2, {0, 1, 2}}, 2, 6); }

/* The 2.2 op sits in the host's table and the CPU backend's, after the 2.1 ones. */
Test(ops_grouped, the_2_2_op_is_in_the_tables)
{
    const ast_host *h = ast_host_table();
    cr_assert_eq(h->abi_major, 2);
    cr_assert_geq(h->abi_minor, 2);
    cr_assert_geq(h->ops->n_ops, 35);
    cr_assert_eq(offsetof(ast_ops, grouped_linear), 8 + 8 * 34);
    cr_assert(h->ops->grouped_linear == ast_grouped_linear);
    cr_assert(ast_backend_cpu()->kernels[AST_OP_grouped_linear].forward);
}
