/* reshape / permute / split_heads / merge_heads / concat / slice: values
 * against naive index loops, gradients against finite differences. */
#include <criterion/criterion.h>
#include <signal.h>

#include "gradcheck.h"

/* Shape ops only move floats, so values must match bit for bit. Every op
 * here is linear in its input, so with h = 1e-2 the central difference has
 * no truncation error; what is left is float32 rounding of L / h, far
 * below 1e-2. */
#define GRAD_TOL 1e-2

#define ASSERT_GRADS(r)                                                                                 \
    cr_assert_lt((r).max_err, GRAD_TOL, "input %d[%lld]: analytic %g numeric %g", (r).worst_input,    \
                 (long long)(r).worst_index, (r).analytic, (r).numeric)

/* Row-major flat index of idx in shape (nd dims). */
static int64_t flat(int nd, const int64_t *shape, const int64_t *idx)
{
    int64_t f = 0;
    for (int i = 0; i < nd; i++) f = f * shape[i] + idx[i];
    return f;
}

/* ---- reshape ------------------------------------------------------------ */

static ast_tensor *fwd_reshape(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    (void)ud;
    return ast_reshape(c, in[0], 2, (int64_t[]){4, 6});
}

Test(ops_shape, reshape_is_a_view_with_the_new_shape)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 4}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = fwd_reshape(c, &x, NULL);
    cr_assert_eq(y->data, x->data, "reshape must not copy");
    cr_assert_eq(y->ndim, 2);
    cr_assert_eq(y->shape[0], 4);
    cr_assert_eq(y->shape[1], 6);
    cr_assert_eq(y->size, 24);
    cr_assert_eq(y->flags & AST_PARAM, 0u, "a view of a parameter is not a parameter");
    ast_ctx_free(c);
    ast_params_free(p);
}

/* Through two reshapes: x's grad must receive exactly the seed. */
Test(ops_shape, reshape_gradient_reaches_the_input)
{
    ast_params *p = ast_params_new(2);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 4}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ast_reshape(c, fwd_reshape(c, &x, NULL), 1, (int64_t[]){24});
    float seed[24];
    for (int i = 0; i < 24; i++) seed[i] = (float)(i - 7);
    ast_backward_seed(c, y, seed);
    for (int i = 0; i < 24; i++) cr_assert_eq(x->grad[i], seed[i], "x.grad[%d]", i);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_shape, reshape_gradients)
{
    ast_params *p = ast_params_new(3);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 4}, 1.0f);
    gc_result r = gc_check(fwd_reshape, &x, 1, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r);
    ast_params_free(p);
}

Test(ops_shape, reshape_with_a_different_size_aborts, .signal = SIGABRT)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *x = ast_zeros(c, 2, (int64_t[]){2, 3});
    ast_reshape(c, x, 1, (int64_t[]){5});
}

/* ---- permute -------------------------------------------------------------- */

static ast_tensor *fwd_permute(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_permute(c, in[0], ud);
}

/* y[i_0..i_{n-1}] = x[j] with j[perm[k]] = i_k. */
static void check_permute(const ast_tensor *x, const int *perm, const ast_tensor *y)
{
    int nd = x->ndim;
    for (int k = 0; k < nd; k++) cr_assert_eq(y->shape[k], x->shape[perm[k]], "shape[%d]", k);
    for (int64_t o = 0; o < y->size; o++) {
        int64_t oi[AST_MAX_DIMS], xi[AST_MAX_DIMS], rest = o;
        for (int k = nd - 1; k >= 0; k--) {
            oi[k] = rest % y->shape[k];
            rest /= y->shape[k];
        }
        for (int k = 0; k < nd; k++) xi[perm[k]] = oi[k];
        cr_assert_eq(y->data[o], x->data[flat(nd, x->shape, xi)], "element %lld", (long long)o);
    }
}

/* Every permutation of 4 dims (lexicographic order via the 24 indices). */
Test(ops_shape, permute_every_4d_permutation)
{
    ast_params *p = ast_params_new(4);
    ast_tensor *x = gc_input(p, "x", 4, (int64_t[]){2, 3, 4, 5}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    for (int code = 0; code < 24; code++) {
        int pool[4] = {0, 1, 2, 3}, perm[4], rest = code;
        for (int k = 0, left = 4; k < 4; k++, left--) {
            int pick = rest % left;
            rest /= left;
            perm[k] = pool[pick];
            for (int m = pick; m < left - 1; m++) pool[m] = pool[m + 1];
        }
        check_permute(x, perm, fwd_permute(c, &x, perm));
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_shape, permute_lower_ranks)
{
    ast_params *p = ast_params_new(5);
    ast_tensor *x1 = gc_input(p, "x1", 1, (int64_t[]){5}, 1.0f);
    ast_tensor *x2 = gc_input(p, "x2", 2, (int64_t[]){3, 5}, 1.0f);
    ast_tensor *x3 = gc_input(p, "x3", 3, (int64_t[]){2, 3, 4}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    check_permute(x1, (int[]){0}, fwd_permute(c, &x1, (int[]){0}));
    check_permute(x2, (int[]){1, 0}, fwd_permute(c, &x2, (int[]){1, 0}));
    check_permute(x3, (int[]){2, 0, 1}, fwd_permute(c, &x3, (int[]){2, 0, 1}));
    check_permute(x3, (int[]){0, 2, 1}, fwd_permute(c, &x3, (int[]){0, 2, 1}));
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_shape, permute_gradients)
{
    ast_params *p = ast_params_new(6);
    ast_tensor *x2 = gc_input(p, "x2", 2, (int64_t[]){3, 5}, 1.0f);
    ast_tensor *x3 = gc_input(p, "x3", 3, (int64_t[]){2, 3, 4}, 1.0f);
    ast_tensor *x4 = gc_input(p, "x4", 4, (int64_t[]){2, 3, 2, 3}, 1.0f);
    gc_result r = gc_check(fwd_permute, &x2, 1, (int[]){1, 0}, 1e-2f, 1e-2);
    ASSERT_GRADS(r);
    r = gc_check(fwd_permute, &x3, 1, (int[]){2, 0, 1}, 1e-2f, 1e-2);
    ASSERT_GRADS(r);
    r = gc_check(fwd_permute, &x4, 1, (int[]){1, 3, 0, 2}, 1e-2f, 1e-2);
    ASSERT_GRADS(r);
    ast_params_free(p);
}

/* x used twice: the permutation's backward must add to the gradient the
 * other use already left, not overwrite it. */
static ast_tensor *fwd_transpose_plus_self(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    (void)ud;
    return ast_add(c, ast_permute(c, in[0], (int[]){1, 0}), in[0]);
}

/* Large enough for the pool's rows (2,048 rows of 32 > 2 grains): each
 * row lands where it should, and the backward (a fresh gradient, assigned)
 * sends every element back: seeded with y itself, x's gradient is x. */
Test(ops_shape, permute_on_the_pool)
{
    ast_params *p = ast_params_new(8);
    ast_tensor *x = gc_input(p, "x", 4, (int64_t[]){4, 64, 8, 32}, 1.0f);
    const int perm[4] = {0, 2, 1, 3};
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = fwd_permute(c, &x, (void *)perm);
    check_permute(x, perm, y);
    ast_backward_seed(c, y, y->data);
    cr_assert_arr_eq(x->grad, x->data, (size_t)x->size * sizeof(float));
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_shape, permute_gradient_accumulates)
{
    ast_params *p = ast_params_new(14);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){4, 4}, 1.0f);
    gc_result r = gc_check(fwd_transpose_plus_self, &x, 1, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r);
    ast_params_free(p);
}

Test(ops_shape, permute_with_a_repeated_axis_aborts, .signal = SIGABRT)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_permute(c, ast_zeros(c, 2, (int64_t[]){2, 3}), (int[]){0, 0});
}

/* ---- heads ----------------------------------------------------------------- */

enum { B = 2, N = 3, H = 2, DH = 3 };

static ast_tensor *fwd_split(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    (void)ud;
    return ast_split_heads(c, in[0], H);
}

static ast_tensor *fwd_merge(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    (void)ud;
    return ast_merge_heads(c, in[0]);
}

Test(ops_shape, split_heads_uses_head_major_features)
{
    ast_params *p = ast_params_new(7);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){B, N, H * DH}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = fwd_split(c, &x, NULL);
    cr_assert_eq(y->ndim, 4);
    cr_assert(y->shape[0] == B && y->shape[1] == H && y->shape[2] == N && y->shape[3] == DH);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int n = 0; n < N; n++)
                for (int j = 0; j < DH; j++)
                    cr_assert_eq(y->data[((b * H + h) * N + n) * DH + j], x->data[(b * N + n) * H * DH + h * DH + j],
                                 "[%d,%d,%d,%d]", b, h, n, j);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_shape, merge_heads_inverts_split_heads)
{
    ast_params *p = ast_params_new(8);
    ast_tensor *x = gc_input(p, "x", 4, (int64_t[]){B, H, N, DH}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = fwd_merge(c, &x, NULL);
    cr_assert(y->ndim == 3 && y->shape[0] == B && y->shape[1] == N && y->shape[2] == H * DH);
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++)
                for (int j = 0; j < DH; j++)
                    cr_assert_eq(y->data[(b * N + n) * H * DH + h * DH + j], x->data[((b * H + h) * N + n) * DH + j]);
    ast_tensor *back = fwd_split(c, &y, NULL);
    for (int64_t i = 0; i < x->size; i++) cr_assert_eq(back->data[i], x->data[i], "round trip [%lld]", (long long)i);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_shape, head_gradients)
{
    ast_params *p = ast_params_new(9);
    ast_tensor *x3 = gc_input(p, "x3", 3, (int64_t[]){B, N, H * DH}, 1.0f);
    ast_tensor *x4 = gc_input(p, "x4", 4, (int64_t[]){B, H, N, DH}, 1.0f);
    gc_result r = gc_check(fwd_split, &x3, 1, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r);
    r = gc_check(fwd_merge, &x4, 1, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r);
    ast_params_free(p);
}

Test(ops_shape, split_heads_needs_divisible_features, .signal = SIGABRT)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_split_heads(c, ast_zeros(c, 3, (int64_t[]){1, 2, 5}), 2);
}

/* ---- concat and slice ------------------------------------------------------ */

static ast_tensor *fwd_concat(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    (void)ud;
    return ast_concat(c, in, 3);
}

Test(ops_shape, concat_joins_the_last_axis_in_order)
{
    ast_params *p = ast_params_new(10);
    const int64_t w[3] = {1, 4, 2};
    ast_tensor *in[3] = {gc_input(p, "a", 3, (int64_t[]){2, 3, w[0]}, 1.0f),
                         gc_input(p, "b", 3, (int64_t[]){2, 3, w[1]}, 1.0f),
                         gc_input(p, "c", 3, (int64_t[]){2, 3, w[2]}, 1.0f)};
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = fwd_concat(c, in, NULL);
    cr_assert(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == 7);
    for (int r = 0; r < 6; r++) {
        int col = 0;
        for (int k = 0; k < 3; k++)
            for (int j = 0; j < w[k]; j++, col++)
                cr_assert_eq(y->data[r * 7 + col], in[k]->data[r * w[k] + j], "row %d col %d", r, col);
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_shape, concat_gradients)
{
    ast_params *p = ast_params_new(11);
    ast_tensor *in[3] = {gc_input(p, "a", 2, (int64_t[]){3, 1}, 1.0f), gc_input(p, "b", 2, (int64_t[]){3, 4}, 1.0f),
                         gc_input(p, "c", 2, (int64_t[]){3, 2}, 1.0f)};
    gc_result r = gc_check(fwd_concat, in, 3, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r);
    ast_params_free(p);
}

Test(ops_shape, concat_of_mismatched_rows_aborts, .signal = SIGABRT)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *xs[2] = {ast_zeros(c, 2, (int64_t[]){2, 3}), ast_zeros(c, 2, (int64_t[]){3, 3})};
    ast_concat(c, xs, 2);
}

typedef struct { int64_t start, len; } cols;

static ast_tensor *fwd_slice(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const cols *s = ud;
    return ast_slice(c, in[0], s->start, s->len);
}

/* The first, a middle and the last columns. */
static const cols SLICES[3] = {{0, 2}, {2, 3}, {4, 2}};

Test(ops_shape, slice_takes_columns)
{
    ast_params *p = ast_params_new(12);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 6}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    for (int k = 0; k < 3; k++) {
        ast_tensor *y = fwd_slice(c, &x, (void *)&SLICES[k]);
        cr_assert(y->ndim == 3 && y->shape[0] == 2 && y->shape[1] == 3 && y->shape[2] == SLICES[k].len);
        for (int r = 0; r < 6; r++)
            for (int j = 0; j < SLICES[k].len; j++)
                cr_assert_eq(y->data[r * SLICES[k].len + j], x->data[r * 6 + SLICES[k].start + j]);
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_shape, slice_gradients)
{
    ast_params *p = ast_params_new(13);
    ast_tensor *x = gc_input(p, "x", 3, (int64_t[]){2, 3, 6}, 1.0f);
    for (int k = 0; k < 3; k++) {
        gc_result r = gc_check(fwd_slice, &x, 1, (void *)&SLICES[k], 1e-2f, 1e-2);
        ASSERT_GRADS(r);
    }
    ast_params_free(p);
}

Test(ops_shape, slice_past_the_end_aborts, .signal = SIGABRT)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_slice(c, ast_zeros(c, 2, (int64_t[]){2, 3}), 2, 2);
}
