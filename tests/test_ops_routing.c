/* gather_rows / scatter_add_rows: values against direct loops, the MoE
 * dispatch-combine round trip, and gradients to the source rows and to
 * the routing weights. */
#include <criterion/criterion.h>

#include "gradcheck.h"

/* Copies are exact; weighted sums of <= 2 float32 products against double
 * differ by an ulp or two. */
#define VAL_TOL 1e-6
/* Both ops are linear in each input: central differences carry only
 * float32 rounding of L / h (~1e-5 at h = 1e-2). */
#define GRAD_TOL 1e-3

#define ASSERT_GRADS(r, what)                                                                              \
    cr_assert_lt((r).max_err, GRAD_TOL, "%s: input %d[%lld] analytic %g numeric %g", what, (r).worst_input, \
                 (long long)(r).worst_index, (r).analytic, (r).numeric)

enum { T = 5, D = 3, N = 7 };
/* Top-2 style routing: some tokens twice, token 4 never. */
static const int32_t IDX[N] = {2, 0, 2, 1, 3, 0, 1};

Test(ops_routing, gather_copies_the_indexed_rows)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){T, D}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ast_gather_rows(c, x, IDX, N);
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], N);
    cr_assert_eq(y->shape[1], D);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < D; k++) cr_assert_eq(y->data[i * D + k], x->data[IDX[i] * D + k], "row %d col %d", i, k);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_routing, scatter_adds_weighted_rows)
{
    ast_params *p = ast_params_new(2);
    ast_tensor *src = gc_input(p, "src", 2, (int64_t[]){N, D}, 1.0f);
    ast_tensor *w = gc_input(p, "w", 1, (int64_t[]){N}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    for (int weighted = 0; weighted < 2; weighted++) {
        ast_tensor *y = ast_scatter_add_rows(c, src, IDX, weighted ? w : NULL, T);
        cr_assert_eq(y->shape[0], T);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < D; k++) {
                double want = 0.0;
                for (int i = 0; i < N; i++)
                    if (IDX[i] == t) want += (weighted ? w->data[i] : 1.0) * src->data[i * D + k];
                cr_assert_float_eq(y->data[t * D + k], want, VAL_TOL, "weighted=%d row %d col %d", weighted, t, k);
            }
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

/* Dispatch every token to two slots, combine with weights summing to 1:
 * the tokens come back unchanged (the MoE identity when experts are identity). */
Test(ops_routing, gather_then_scatter_round_trip)
{
    enum { K = 2 };
    ast_params *p = ast_params_new(3);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){T, D}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    int32_t *idx = ast_alloc(c, T * K * sizeof *idx);
    ast_tensor *w = ast_zeros(c, 1, (int64_t[]){T * K});
    for (int i = 0; i < T * K; i++) {
        idx[i] = (int32_t)((i * 3) % T); /* each token twice, interleaved */
        w->data[i] = i < T ? 0.25f : 0.75f;
    }
    ast_tensor *back = ast_scatter_add_rows(c, ast_gather_rows(c, x, idx, T * K), idx, w, T);
    for (int i = 0; i < T * D; i++) cr_assert_float_eq(back->data[i], x->data[i], VAL_TOL, "element %d", i);
    ast_ctx_free(c);
    ast_params_free(p);
}

static ast_tensor *fwd_gather(ast_ctx *c, ast_tensor *const *in, void *ud) { return ast_gather_rows(c, in[0], IDX, N); }

static ast_tensor *fwd_scatter(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_scatter_add_rows(c, in[0], IDX, ud ? in[1] : NULL, T);
}

Test(ops_routing, gradients_to_rows_and_weights)
{
    ast_params *p = ast_params_new(4);
    ast_tensor *in[2] = {gc_input(p, "src", 2, (int64_t[]){N, D}, 1.0f), gc_input(p, "w", 1, (int64_t[]){N}, 1.0f)};
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){T, D}, 1.0f);
    gc_result r = gc_check(fwd_gather, &x, 1, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "gather_rows");
    for (int k = 0; k < D; k++) cr_assert_eq(x->grad[4 * D + k], 0.0f, "token 4 is never gathered");
    r = gc_check(fwd_scatter, in, 2, (void *)1, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "scatter_add_rows weighted");
    r = gc_check(fwd_scatter, in, 1, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "scatter_add_rows unweighted");
    ast_params_free(p);
}
