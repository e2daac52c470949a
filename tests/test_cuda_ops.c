/* Every op of alphast/ops.def on the CUDA backend against the CPU backend:
 * the same random inputs (several shapes each: broadcasting, sizes that are
 * no multiple of 32, empty tensors, long rows) on a CPU and a CUDA context,
 * the outputs compared, then the same random upstream gradient seeded and
 * every input gradient compared. Each case also runs on CUDA a second time
 * over an arena filled with NaN (an element an op leaves unwritten, or an
 * ast_grad_fresh gradient added to instead of assigned, shows as NaN there,
 * where fresh device memory would have read as zeros) and must give the
 * first run's bits (determinism), and once more with gradients already
 * there before the backward (ast_grad's += against the CPU's). Plus the
 * dropout masks, bf16 GEMMs and finite-difference gradients on the GPU.
 * Without CUDA in the build or without a GPU every test is skipped, saying
 * why (cf_gpu). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fixture.h"
#include "gradcheck.h"

enum { MAX_G = 5 };

static void check_cases(const cf_case *cases, int n)
{
    const ast_backend *gpu = cf_gpu();
    for (int i = 0; i < n; i++) cf_check_case(gpu, &cases[i]);
}

#define CHECK(cases) check_cases(cases, (int)(sizeof cases / sizeof cases[0]))

/* Shapes in case tables: IN(grad, fill, dims...). */
#define IN CF_IN
#define X(...) IN(1, FILL_NORMAL, __VA_ARGS__)

/* Data movement: the same bits on both backends, gradients included (each
 * gradient element receives one value, or is a copy). */
#define EXACT 0.0

/* ---- tensors and views --------------------------------------------------- */

typedef struct shape_arg {
    int ndim;
    int64_t shape[AST_MAX_DIMS];
} shape_arg;

static ast_tensor *run_zeros(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const shape_arg *s = arg;
    return ast_zeros(c, s->ndim, s->shape);
}

static ast_tensor *run_reshape(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const shape_arg *s = arg;
    return ast_reshape(c, in[0], s->ndim, s->shape);
}

/* reshape shares its input's data: a copy after it shows what it reads. */
static ast_tensor *run_reshape_then_copy(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_permute(c, run_reshape(c, in, arg), (int[]){1, 0});
}

static ast_tensor *run_permute(ast_ctx *c, ast_tensor *const *in, const void *arg) { return ast_permute(c, in[0], arg); }

static ast_tensor *run_split_heads(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_split_heads(c, in[0], *(const int *)arg);
}

static ast_tensor *run_merge_heads(ast_ctx *c, ast_tensor *const *in, const void *arg) { return ast_merge_heads(c, in[0]); }

static ast_tensor *run_concat(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_concat(c, in, *(const int *)arg);
}

static ast_tensor *run_slice(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const int64_t *s = arg;
    return ast_slice(c, in[0], s[0], s[1]);
}

Test(cuda_ops, zeros_reshape_permute)
{
    const cf_case cases[] = {
        {"zeros [37, 65]", run_zeros, &(shape_arg){2, {37, 65}}, 0, {{0}}, EXACT},
        {"zeros [3, 0, 5]", run_zeros, &(shape_arg){3, {3, 0, 5}}, 0, {{0}}, EXACT},
        {"zeros [2, 3, 1000, 7]", run_zeros, &(shape_arg){4, {2, 3, 1000, 7}}, 0, {{0}}, EXACT},
        {"reshape [3, 5, 7] -> [7, 15]", run_reshape_then_copy, &(shape_arg){2, {7, 15}}, 1, {X(3, 5, 7)}, EXACT},
        {"reshape [0, 4] -> [4, 0]", run_reshape_then_copy, &(shape_arg){2, {4, 0}}, 1, {X(0, 4)}, EXACT},
        {"reshape [4099] -> [1, 4099]", run_reshape, &(shape_arg){2, {1, 4099}}, 1, {X(4099)}, EXACT},
        {"permute [33, 65] (1, 0)", run_permute, (int[]){1, 0}, 1, {X(33, 65)}, EXACT},
        {"permute [2, 3, 5, 7] (3, 1, 0, 2)", run_permute, (int[]){3, 1, 0, 2}, 1, {X(2, 3, 5, 7)}, EXACT},
        {"permute [4, 1, 37, 3] (2, 0, 3, 1)", run_permute, (int[]){2, 0, 3, 1}, 1, {X(4, 1, 37, 3)}, EXACT},
        {"permute [0, 3, 4] (2, 0, 1)", run_permute, (int[]){2, 0, 1}, 1, {X(0, 3, 4)}, EXACT},
        {"permute [3, 700, 33] (0, 2, 1)", run_permute, (int[]){0, 2, 1}, 1, {X(3, 700, 33)}, EXACT},
    };
    CHECK(cases);
}

Test(cuda_ops, heads_concat_slice)
{
    const cf_case cases[] = {
        {"split_heads [2, 37, 12] / 3", run_split_heads, (int[]){3}, 1, {X(2, 37, 12)}, EXACT},
        {"split_heads [1, 300, 256] / 8", run_split_heads, (int[]){8}, 1, {X(1, 300, 256)}, EXACT},
        {"split_heads [2, 0, 8] / 2", run_split_heads, (int[]){2}, 1, {X(2, 0, 8)}, EXACT},
        {"merge_heads [2, 3, 37, 4]", run_merge_heads, NULL, 1, {X(2, 3, 37, 4)}, EXACT},
        {"merge_heads [1, 8, 300, 32]", run_merge_heads, NULL, 1, {X(1, 8, 300, 32)}, EXACT},
        {"concat [2,5,3] [2,5,1] [2,5,7]", run_concat, (int[]){3}, 3, {X(2, 5, 3), X(2, 5, 1), X(2, 5, 7)}, EXACT},
        {"concat [4097, 33] [4097, 1]", run_concat, (int[]){2}, 2, {X(4097, 33), X(4097, 1)}, EXACT},
        {"concat [0, 3] [0, 4]", run_concat, (int[]){2}, 2, {X(0, 3), X(0, 4)}, EXACT},
        {"concat, one without gradient", run_concat, (int[]){2}, 2, {X(7, 5), IN(0, FILL_NORMAL, 7, 3)}, EXACT},
        {"slice [6, 37] 5..25", run_slice, (int64_t[]){5, 20}, 1, {X(6, 37)}, EXACT},
        {"slice [3, 4, 1000] 999..1000", run_slice, (int64_t[]){999, 1}, 1, {X(3, 4, 1000)}, EXACT},
        {"slice [5, 9] 4..4 (empty)", run_slice, (int64_t[]){4, 0}, 1, {X(5, 9)}, EXACT},
        {"slice [2, 4099] 0..4099", run_slice, (int64_t[]){0, 4099}, 1, {X(2, 4099)}, EXACT},
    };
    CHECK(cases);
}

/* ---- linear algebra ------------------------------------------------------- */

static ast_tensor *run_linear(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_linear(c, in[0], in[1], *(const int *)arg ? in[2] : NULL);
}

static ast_tensor *run_matmul(ast_ctx *c, ast_tensor *const *in, const void *arg) { return ast_matmul(c, in[0], in[1]); }

static ast_tensor *run_bmm(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const int *t = arg;
    return ast_bmm(c, in[0], in[1], t[0], t[1]);
}

/* GEMMs: cuBLAS (float32, no TF32) against OpenBLAS; the longest sum is
 * named in each case: in (forward), rows (weight and bias gradients), out
 * (input gradient). */
Test(cuda_ops, linear_matmul_bmm)
{
    const cf_case cases[] = {
        {"linear [3, 37, 65] x [33, 65] + b", run_linear, (int[]){1}, 3, {X(3, 37, 65), X(33, 65), X(33)}, cf_sum_tol(111)},
        {"linear [37, 65] x [33, 65], no bias", run_linear, (int[]){0}, 2, {X(37, 65), X(33, 65)}, cf_sum_tol(65)},
        {"linear [0, 65] x [33, 65] + b", run_linear, (int[]){1}, 3, {X(0, 65), X(33, 65), X(33)}, cf_sum_tol(1)},
        {"linear [1000, 257] x [129, 257] + b", run_linear, (int[]){1}, 3, {X(1000, 257), X(129, 257), X(129)},
         cf_sum_tol(1000)},
        {"linear, weight without gradient", run_linear, (int[]){1}, 3,
         {X(9, 17), IN(0, FILL_NORMAL, 5, 17), X(5)}, cf_sum_tol(17)},
        {"matmul [37, 65] [65, 33]", run_matmul, NULL, 2, {X(37, 65), X(65, 33)}, cf_sum_tol(65)},
        {"matmul [1, 1] [1, 1]", run_matmul, NULL, 2, {X(1, 1), X(1, 1)}, cf_sum_tol(1)},
        {"matmul [0, 5] [5, 3]", run_matmul, NULL, 2, {X(0, 5), X(5, 3)}, cf_sum_tol(5)},
        {"matmul [300, 513] [513, 200]", run_matmul, NULL, 2, {X(300, 513), X(513, 200)}, cf_sum_tol(513)},
        {"bmm [2,3,37,65] [2,3,65,33]", run_bmm, (int[]){0, 0}, 2, {X(2, 3, 37, 65), X(2, 3, 65, 33)}, cf_sum_tol(65)},
        {"bmm^T_a [2,65,37] [2,65,33]", run_bmm, (int[]){1, 0}, 2, {X(2, 65, 37), X(2, 65, 33)}, cf_sum_tol(65)},
        {"bmm^T_b [5,37,16] [5,33,16]", run_bmm, (int[]){0, 1}, 2, {X(5, 37, 16), X(5, 33, 16)}, cf_sum_tol(37)},
        {"bmm^T_ab [2,16,37] [2,33,16]", run_bmm, (int[]){1, 1}, 2, {X(2, 16, 37), X(2, 33, 16)}, cf_sum_tol(37)},
        {"bmm^T_b [1,8,300,32] x2 (attention scores)", run_bmm, (int[]){0, 1}, 2, {X(1, 8, 300, 32), X(1, 8, 300, 32)},
         cf_sum_tol(300)},
        {"bmm [0,4,5] [0,5,3]", run_bmm, (int[]){0, 0}, 2, {X(0, 4, 5), X(0, 5, 3)}, cf_sum_tol(5)},
    };
    CHECK(cases);
}

/* ---- elementwise ------------------------------------------------------------ */

typedef struct binary_arg {
    ast_tensor *(*fn)(ast_ctx *c, ast_tensor *a, ast_tensor *b);
} binary_arg;

typedef struct unary_arg {
    ast_tensor *(*fn)(ast_ctx *c, ast_tensor *x);
} unary_arg;

static ast_tensor *run_binary(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ((const binary_arg *)arg)->fn(c, in[0], in[1]);
}

static ast_tensor *run_unary(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ((const unary_arg *)arg)->fn(c, in[0]);
}

#define ADD (&(binary_arg){ast_add})
#define SUB (&(binary_arg){ast_sub})
#define MUL (&(binary_arg){ast_mul})
#define DIV (&(binary_arg){ast_div})
#define DIVISOR(...) IN(1, FILL_AWAY, __VA_ARGS__)

/* A broadcast operand's gradient sums the outputs it repeats over: the
 * tolerance counts them ([3,37,65] over [65]: 111). */
Test(cuda_ops, broadcasting_binary_ops)
{
    const cf_case cases[] = {
        {"add [3,37,65] [3,37,65]", run_binary, ADD, 2, {X(3, 37, 65), X(3, 37, 65)}, EXACT},
        {"add [3,37,65] [65]", run_binary, ADD, 2, {X(3, 37, 65), X(65)}, cf_sum_tol(111)},
        {"add [3,1,65] [3,37,1]", run_binary, ADD, 2, {X(3, 1, 65), X(3, 37, 1)}, cf_sum_tol(65)},
        {"add [1] [4,5]", run_binary, ADD, 2, {X(1), X(4, 5)}, cf_sum_tol(20)},
        {"add [0,5] [5]", run_binary, ADD, 2, {X(0, 5), X(5)}, EXACT},
        {"add [64,4099] [4099]", run_binary, ADD, 2, {X(64, 4099), X(4099)}, cf_sum_tol(64)},
        {"add, b without gradient", run_binary, ADD, 2, {X(7, 9), IN(0, FILL_NORMAL, 9)}, EXACT},
        {"sub [3,37,65] [3,37,65]", run_binary, SUB, 2, {X(3, 37, 65), X(3, 37, 65)}, EXACT},
        {"sub [37,1] [1,65]", run_binary, SUB, 2, {X(37, 1), X(1, 65)}, cf_sum_tol(65)},
        {"sub [2,3,5,7] [3,1,7]", run_binary, SUB, 2, {X(2, 3, 5, 7), X(3, 1, 7)}, cf_sum_tol(10)},
        {"mul [3,37,65] [3,37,65]", run_binary, MUL, 2, {X(3, 37, 65), X(3, 37, 65)}, cf_sum_tol(1)},
        {"mul [3,37,65] [3,37,1]", run_binary, MUL, 2, {X(3, 37, 65), X(3, 37, 1)}, cf_sum_tol(65)},
        {"mul [1,65] [300,65]", run_binary, MUL, 2, {X(1, 65), X(300, 65)}, cf_sum_tol(300)},
        {"mul [0,3] [1,3]", run_binary, MUL, 2, {X(0, 3), X(1, 3)}, EXACT},
        {"div [3,37,65] [3,37,65]", run_binary, DIV, 2, {X(3, 37, 65), DIVISOR(3, 37, 65)}, cf_sum_tol(1)},
        {"div [3,37,65] [65]", run_binary, DIV, 2, {X(3, 37, 65), DIVISOR(65)}, cf_sum_tol(111)},
        {"div [5] [4099,5]", run_binary, DIV, 2, {X(5), DIVISOR(4099, 5)}, cf_sum_tol(4099)},
    };
    CHECK(cases);
}

static ast_tensor *run_affine(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const float *a = arg;
    return ast_affine(c, in[0], a[0], a[1]);
}

static ast_tensor *run_dropout(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_dropout(c, in[0], *(const float *)arg);
}

#define WIDE(...) IN(1, FILL_WIDE, __VA_ARGS__)

/* One rounded operation or one transcendental per element (cf_sum_tol(1),
 * a few ulp of the tensor's largest value); dropout multiplies by the same
 * scale where the same hash keeps an element: the same bits. */
Test(cuda_ops, unary_activations)
{
    const double ulp = cf_sum_tol(1);
    const cf_case cases[] = {
        {"affine [3,37,65] 1.7x - 0.3", run_affine, (float[]){1.7f, -0.3f}, 1, {X(3, 37, 65)}, ulp},
        {"affine [0]", run_affine, (float[]){2.0f, 1.0f}, 1, {X(0)}, ulp},
        {"relu [3,37,65]", run_unary, &(unary_arg){ast_relu}, 1, {X(3, 37, 65)}, ulp},
        {"relu [100003]", run_unary, &(unary_arg){ast_relu}, 1, {X(100003)}, ulp},
        {"gelu [3,37,65]", run_unary, &(unary_arg){ast_gelu}, 1, {X(3, 37, 65)}, ulp},
        {"gelu [100003] wide", run_unary, &(unary_arg){ast_gelu}, 1, {WIDE(100003)}, ulp},
        {"sigmoid [3,37,65]", run_unary, &(unary_arg){ast_sigmoid}, 1, {X(3, 37, 65)}, ulp},
        {"sigmoid [4099] wide", run_unary, &(unary_arg){ast_sigmoid}, 1, {WIDE(4099)}, ulp},
        {"softplus [3,37,65]", run_unary, &(unary_arg){ast_softplus}, 1, {X(3, 37, 65)}, ulp},
        {"softplus [4099] wide", run_unary, &(unary_arg){ast_softplus}, 1, {WIDE(4099)}, ulp},
        {"silu [3,37,65]", run_unary, &(unary_arg){ast_silu}, 1, {X(3, 37, 65)}, ulp},
        {"silu [100003] wide", run_unary, &(unary_arg){ast_silu}, 1, {WIDE(100003)}, ulp},
        {"exp [3,37,65]", run_unary, &(unary_arg){ast_exp}, 1, {X(3, 37, 65)}, ulp},
        {"exp [0, 7]", run_unary, &(unary_arg){ast_exp}, 1, {X(0, 7)}, ulp},
        {"dropout 0.3 [3,37,65]", run_dropout, (float[]){0.3f}, 1, {X(3, 37, 65)}, EXACT},
        {"dropout 0.5 [100003]", run_dropout, (float[]){0.5f}, 1, {X(100003)}, EXACT},
        {"dropout 1 [33, 5]", run_dropout, (float[]){1.0f}, 1, {X(33, 5)}, EXACT},
        {"dropout 0 [33, 5] (identity)", run_dropout, (float[]){0.0f}, 1, {X(33, 5)}, EXACT},
        {"dropout 0.1 [0, 5]", run_dropout, (float[]){0.1f}, 1, {X(0, 5)}, EXACT},
    };
    CHECK(cases);
}

/* exp's range ends: +inf above 88.72 on both; below -87.34 the CPU gives 0
 * and CUDA's expf a subnormal (< 1.2e-38), nothing next to the largest
 * finite value. The tolerance is relative to that value (~e^88). */
Test(cuda_ops, exp_overflows_as_on_the_cpu)
{
    const cf_case cases[] = {
        {"exp [4099] wide", run_unary, &(unary_arg){ast_exp}, 1, {WIDE(4099)}, cf_sum_tol(1)},
    };
    CHECK(cases);
}

/* ---- normalisation and reductions ---------------------------------------------- */

static ast_tensor *run_softmax(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_softmax(c, in[0], *(const int *)arg);
}

typedef struct norm_arg {
    int weight, bias;
    float eps;
} norm_arg;

/* in: x, then the weight and the bias when the case has them. */
static ast_tensor *run_layernorm(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const norm_arg *a = arg;
    return ast_layernorm(c, in[0], a->weight ? in[1] : NULL, a->bias ? in[1 + a->weight] : NULL, a->eps);
}

static ast_tensor *run_rmsnorm(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const norm_arg *a = arg;
    return ast_rmsnorm(c, in[0], a->weight ? in[1] : NULL, a->eps);
}

#define LN_WB (&(norm_arg){1, 1, 1e-6f})

/* Softmax sums its axis (forward and backward); the norms sum the last
 * axis, and their weight and bias gradients the rows: each case's
 * tolerance counts the longer. */
Test(cuda_ops, softmax_and_norms)
{
    const cf_case cases[] = {
        {"softmax [3,37,65] axis -1", run_softmax, (int[]){-1}, 1, {WIDE(3, 37, 65)}, cf_sum_tol(65)},
        {"softmax [3,37,65] axis 1", run_softmax, (int[]){1}, 1, {X(3, 37, 65)}, cf_sum_tol(37)},
        {"softmax [5,7] axis 0", run_softmax, (int[]){0}, 1, {X(5, 7)}, cf_sum_tol(5)},
        /* the linear attention's keys over the cells: many lanes per column */
        {"softmax [4,512,256] axis 1", run_softmax, (int[]){1}, 1, {X(4, 512, 256)}, cf_sum_tol(512)},
        {"softmax [4,5000] axis -1", run_softmax, (int[]){-1}, 1, {WIDE(4, 5000)}, cf_sum_tol(5000)},
        {"softmax [3,1] axis -1", run_softmax, (int[]){-1}, 1, {X(3, 1)}, cf_sum_tol(1)},
        {"softmax [0,7] axis -1", run_softmax, (int[]){-1}, 1, {X(0, 7)}, cf_sum_tol(1)},
        {"layernorm [3,37,65] w b", run_layernorm, LN_WB, 3, {X(3, 37, 65), X(65), X(65)}, cf_sum_tol(111)},
        {"layernorm [3,37,65]", run_layernorm, &(norm_arg){0, 0, 1e-5f}, 1, {X(3, 37, 65)}, cf_sum_tol(65)},
        {"layernorm [5,33] w", run_layernorm, &(norm_arg){1, 0, 1e-6f}, 2, {X(5, 33), X(33)}, cf_sum_tol(33)},
        {"layernorm [8,4099] w b", run_layernorm, LN_WB, 3, {X(8, 4099), X(4099), X(4099)}, cf_sum_tol(4099)},
        {"layernorm [2048,256] w b", run_layernorm, LN_WB, 3, {X(2048, 256), X(256), X(256)}, cf_sum_tol(2048)},
        {"layernorm [0,65] w b", run_layernorm, LN_WB, 3, {X(0, 65), X(65), X(65)}, cf_sum_tol(65)},
        {"rmsnorm [3,37,65] w", run_rmsnorm, &(norm_arg){1, 0, 1e-6f}, 2, {X(3, 37, 65), X(65)}, cf_sum_tol(111)},
        {"rmsnorm [2,8,300,32] w (QK norm)", run_rmsnorm, &(norm_arg){1, 0, 1e-6f}, 2, {X(2, 8, 300, 32), X(32)},
         cf_sum_tol(4800)},
        {"rmsnorm [8,4099]", run_rmsnorm, &(norm_arg){0, 0, 1e-6f}, 1, {X(8, 4099)}, cf_sum_tol(4099)},
        /* One column: dL/dx = w eps / (x^2 + eps)^1.5 is the difference of two
         * terms of size w/|x| that cancel to eps/|x|^3, so 2 ulp of the terms
         * are ~1.2e-7 x^2 / eps of the result: ~0.1 for |x| ~ 1, eps 1e-6,
         * on either backend. The case still catches a wrong formula (off by
         * orders of magnitude). */
        {"rmsnorm [5,1] w", run_rmsnorm, &(norm_arg){1, 0, 1e-6f}, 2, {X(5, 1), X(1)}, 0.15},
        {"vecnorm [3,37,3] zero rows", run_unary, &(unary_arg){ast_vecnorm}, 1, {IN(1, FILL_ZERO_ROWS, 3, 37, 3)},
         cf_sum_tol(3)},
        {"vecnorm [4,5000]", run_unary, &(unary_arg){ast_vecnorm}, 1, {X(4, 5000)}, cf_sum_tol(5000)},
        {"vecnorm [0,3]", run_unary, &(unary_arg){ast_vecnorm}, 1, {X(0, 3)}, cf_sum_tol(3)},
    };
    CHECK(cases);
}

static ast_tensor *run_sum_axis(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_sum_axis(c, in[0], *(const int *)arg);
}

/* A sum of terms of mostly one sign (N(1, 1): sum |term| = 1.17 |sum|)
 * has a relative error of at most ~(the longest chain of adds) x u: a GPU
 * tree's log2(n) levels plus each thread's serial part. 1e-4 allows chains of ~1600 adds
 * and still sees one missing block of 256 terms in 10^6 (2.6e-4). The
 * gradients (dy, or dy / n, to every element) are exact. */
#define POS_SUM_TOL 1e-4
#define SHIFTED(...) IN(1, FILL_SHIFTED, __VA_ARGS__)

Test(cuda_ops, reductions)
{
    const cf_case cases[] = {
        {"sum_axis [3,37,65] axis 0", run_sum_axis, (int[]){0}, 1, {X(3, 37, 65)}, cf_sum_tol(3)},
        {"sum_axis [3,37,65] axis 1", run_sum_axis, (int[]){1}, 1, {X(3, 37, 65)}, cf_sum_tol(37)},
        {"sum_axis [3,37,65] axis -1", run_sum_axis, (int[]){-1}, 1, {X(3, 37, 65)}, cf_sum_tol(65)},
        {"sum_axis [4097,3] axis 0", run_sum_axis, (int[]){0}, 1, {X(4097, 3)}, cf_sum_tol(4097)},
        {"sum_axis [0,5] axis 1", run_sum_axis, (int[]){1}, 1, {X(0, 5)}, cf_sum_tol(5)},
        {"sum_axis [5,0] axis 1", run_sum_axis, (int[]){1}, 1, {X(5, 0)}, cf_sum_tol(1)},
        {"sum [3,37,65]", run_unary, &(unary_arg){ast_sum}, 1, {SHIFTED(3, 37, 65)}, POS_SUM_TOL},
        {"sum [100003]", run_unary, &(unary_arg){ast_sum}, 1, {SHIFTED(100003)}, POS_SUM_TOL},
        {"sum [0]", run_unary, &(unary_arg){ast_sum}, 1, {X(0)}, EXACT},
        {"mean [3,37,65]", run_unary, &(unary_arg){ast_mean}, 1, {SHIFTED(3, 37, 65)}, POS_SUM_TOL},
        {"mean [1]", run_unary, &(unary_arg){ast_mean}, 1, {X(1)}, cf_sum_tol(1)},
        {"mean [1000003]", run_unary, &(unary_arg){ast_mean}, 1, {SHIFTED(1000003)}, POS_SUM_TOL},
    };
    CHECK(cases);
}

/* ---- sparse routing ---------------------------------------------------------- */

enum { ROUTE_N = 80, ROUTE_ROWS = 50, ROUTE_BIG_N = 3000, ROUTE_BIG_ROWS = 1000 };

typedef struct route_arg {
    int64_t n, rows;
    const int32_t *idx;
    int weighted;
} route_arg;

/* The ops keep the index array for the backward: it lives in the step's
 * host memory (ast_alloc), as the ops ask. */
static int32_t *step_indices(ast_ctx *c, const route_arg *a)
{
    int32_t *idx = ast_alloc(c, (size_t)(a->n > 0 ? a->n : 1) * sizeof *idx);
    memcpy(idx, a->idx, (size_t)a->n * sizeof *idx);
    return idx;
}

static ast_tensor *run_gather(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const route_arg *a = arg;
    return ast_gather_rows(c, in[0], step_indices(c, a), a->n);
}

static ast_tensor *run_scatter(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const route_arg *a = arg;
    return ast_scatter_add_rows(c, in[0], step_indices(c, a), a->weighted ? in[1] : NULL, a->rows);
}

/* Indices below `rows`, many repeated (n > rows), some rows never named. */
static void random_indices(int32_t *idx, int64_t n, int64_t rows, uint64_t seed)
{
    ast_rng r;
    ast_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)(ast_rng_next(&r) % (uint64_t)(rows - rows / 5));
}

/* Rows repeated in the index add several rows into one (gather's
 * backward, scatter's forward): at most ~n / rows terms, a handful here;
 * scatter's weight gradient is a dot product over the row (37 or 256). */
Test(cuda_ops, gather_and_scatter_rows)
{
    static int32_t idx[ROUTE_N], big[ROUTE_BIG_N];
    random_indices(idx, ROUTE_N, ROUTE_ROWS, 5);
    random_indices(big, ROUTE_BIG_N, ROUTE_BIG_ROWS, 6);
    const route_arg small = {ROUTE_N, ROUTE_ROWS, idx, 1}, large = {ROUTE_BIG_N, ROUTE_BIG_ROWS, big, 1};
    const route_arg unweighted = {ROUTE_N, ROUTE_ROWS, idx, 0}, none = {0, ROUTE_ROWS, idx, 1};
    const cf_case cases[] = {
        {"gather_rows [50,37] x 80", run_gather, &small, 1, {X(ROUTE_ROWS, 37)}, cf_sum_tol(8)},
        {"gather_rows [1000,256] x 3000", run_gather, &large, 1, {X(ROUTE_BIG_ROWS, 256)}, cf_sum_tol(16)},
        {"gather_rows [50,37] x 0", run_gather, &none, 1, {X(ROUTE_ROWS, 37)}, EXACT},
        {"scatter_add_rows 80 x [37] -> 50, weighted", run_scatter, &small, 2, {X(ROUTE_N, 37), X(ROUTE_N)},
         cf_sum_tol(37)},
        {"scatter_add_rows 80 x [37] -> 50", run_scatter, &unweighted, 1, {X(ROUTE_N, 37)}, cf_sum_tol(8)},
        {"scatter_add_rows 3000 x [256] -> 1000, weighted", run_scatter, &large, 2,
         {X(ROUTE_BIG_N, 256), X(ROUTE_BIG_N)}, cf_sum_tol(256)},
        {"scatter_add_rows 0 x [37] -> 50", run_scatter, &none, 2, {X(0, 37), X(0)}, EXACT},
        {"scatter_add_rows, weights without gradient", run_scatter, &small, 2,
         {X(ROUTE_N, 37), IN(0, FILL_NORMAL, ROUTE_N)}, cf_sum_tol(8)},
    };
    CHECK(cases);
}

/* ---- geometry, losses, masks ---------------------------------------------------- */

static ast_tensor *run_mse(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_mse(c, in[0], in[1], *(const int *)arg ? in[2] : NULL);
}

static ast_tensor *run_key_mask_bias(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_key_mask_bias(c, in[0], *(const float *)arg);
}

#define MASK(g, ...) IN(g, FILL_MASK, __VA_ARGS__)

/* pdist: three products per distance, and a point's gradient sums its N
 * distances; the zero rows put several points at the origin, whose
 * distances (and their gradients) are exactly 0 on both. mse sums squares,
 * terms of one sign (POS_SUM_TOL; its gradients are a few products each,
 * the mask's a row's sum). */
Test(cuda_ops, pdist_mse_key_mask_bias)
{
    const cf_case cases[] = {
        {"pdist [2,37,3]", run_unary, &(unary_arg){ast_pdist}, 1, {X(2, 37, 3)}, cf_sum_tol(37)},
        {"pdist [2,37,3] coincident points", run_unary, &(unary_arg){ast_pdist}, 1, {IN(1, FILL_ZERO_ROWS, 2, 37, 3)},
         cf_sum_tol(37)},
        {"pdist [1,300,3]", run_unary, &(unary_arg){ast_pdist}, 1, {X(1, 300, 3)}, cf_sum_tol(300)},
        {"pdist [3,1,3]", run_unary, &(unary_arg){ast_pdist}, 1, {X(3, 1, 3)}, cf_sum_tol(3)},
        {"pdist [2,0,3]", run_unary, &(unary_arg){ast_pdist}, 1, {X(2, 0, 3)}, EXACT},
        {"mse [3,37,65]", run_mse, (int[]){0}, 2, {X(3, 37, 65), X(3, 37, 65)}, POS_SUM_TOL},
        {"mse [3,37,65] mask [3,37]", run_mse, (int[]){1}, 3, {X(3, 37, 65), X(3, 37, 65), MASK(0, 3, 37)},
         POS_SUM_TOL},
        {"mse, mask with gradient", run_mse, (int[]){1}, 3, {X(4, 9, 5), X(4, 9, 5), MASK(1, 4, 9)}, cf_sum_tol(180)},
        {"mse [4,512,2000] mask", run_mse, (int[]){1}, 3, {X(4, 512, 2000), X(4, 512, 2000), MASK(0, 4, 512)},
         POS_SUM_TOL},
        {"mse [0,5]", run_mse, (int[]){0}, 2, {X(0, 5), X(0, 5)}, EXACT},
        {"mse, b without gradient", run_mse, (int[]){0}, 2, {X(7, 3), IN(0, FILL_NORMAL, 7, 3)}, cf_sum_tol(21)},
        {"key_mask_bias [3,37]", run_key_mask_bias, (float[]){1e4f}, 1, {MASK(1, 3, 37)}, cf_sum_tol(1)},
        {"key_mask_bias [2,4099] no gradient", run_key_mask_bias, (float[]){30.0f}, 1, {MASK(0, 2, 4099)},
         cf_sum_tol(1)},
        {"key_mask_bias [0,5]", run_key_mask_bias, (float[]){1.0f}, 1, {MASK(1, 0, 5)}, EXACT},
    };
    CHECK(cases);
}

/* A mask of all zeros: no valid row, the loss divides by max(1, 0). */
Test(cuda_ops, mse_with_nothing_valid)
{
    const cf_case cases[] = {
        {"mse, all-zero mask", run_mse, (int[]){1}, 3, {X(6, 5), X(6, 5), IN(1, FILL_ZEROS, 6)}, cf_sum_tol(30)},
        {"mse, mask of any weights", run_mse, (int[]){1}, 3, {X(6, 5), X(6, 5), X(6)}, cf_sum_tol(30)},
    };
    CHECK(cases);
}

/* ---- the aligned position loss ------------------------------------------- */

/* in: pred, target, then the mask where arg says so. */
static ast_tensor *run_aligned(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_aligned_mse(c, in[0], in[1], *(const int *)arg ? in[2] : NULL);
}

/* Both backends work out each set in double (sums of 3N terms; a 3x3 SVD,
 * LAPACK's on the CPU, one-sided Jacobi on CUDA, both within ~1e-15
 * relative of the exact R) and round the loss and each unit gradient to
 * float once, then multiply by dL/dy: the results differ by a float
 * rounding or two (~1.2e-7 relative to the largest), far inside
 * cf_sum_tol(1) = 2e-6. Where every set has fewer than 2 valid cells all
 * is exactly 0 on both. */
#define ALIGNED_TOL cf_sum_tol(1)

/* Random sets; FILL_MASK pads about a quarter of the cells, so the sets of
 * [6, 2, 3] have 0, 1 or 2 valid cells (two cells: collinear, H of rank 1). */
Test(cuda_ops, aligned_mse)
{
    const int plain = 0, masked = 1;
    const cf_case cases[] = {
        {"aligned_mse [4,37,3]", run_aligned, &plain, 2, {X(4, 37, 3), X(4, 37, 3)}, ALIGNED_TOL},
        {"aligned_mse [5,37,3] mask", run_aligned, &masked, 3, {X(5, 37, 3), X(5, 37, 3), MASK(0, 5, 37)},
         ALIGNED_TOL},
        {"aligned_mse [3,700,3] mask, target without gradient", run_aligned, &masked, 3,
         {X(3, 700, 3), IN(0, FILL_NORMAL, 3, 700, 3), MASK(0, 3, 700)}, ALIGNED_TOL},
        {"aligned_mse [40,64,3] mask", run_aligned, &masked, 3, {X(40, 64, 3), X(40, 64, 3), MASK(0, 40, 64)},
         ALIGNED_TOL},
        {"aligned_mse [6,2,3] mask", run_aligned, &masked, 3, {X(6, 2, 3), X(6, 2, 3), MASK(0, 6, 2)}, ALIGNED_TOL},
        {"aligned_mse [3,1,3] (no set counted)", run_aligned, &plain, 2, {X(3, 1, 3), X(3, 1, 3)}, EXACT},
        {"aligned_mse, all-zero mask", run_aligned, &masked, 3, {X(2, 9, 3), X(2, 9, 3), IN(0, FILL_ZEROS, 2, 9)},
         EXACT},
        {"aligned_mse [0,5,3]", run_aligned, &plain, 2, {X(0, 5, 3), X(0, 5, 3)}, EXACT},
    };
    CHECK(cases);
}

/* Degenerate sets a fill cannot draw, B = 4 of N = 9: set 0 pred and
 * target each on a line, set 1 the target in a plane, set 2 the target at
 * one point (H = 0), set 3 both in planes. A zero singular value's vectors
 * are arbitrary (LAPACK's and Jacobi's choices differ) but never reach
 * the loss or dL/dpred, since the target has no component along them; so
 * pred's gradient is compared (target's, in those directions, is not
 * defined: a kink). Same tolerance as above. */
Test(cuda_ops, aligned_mse_degenerate_sets)
{
    const int plain = 0;
    const cf_case k = {"aligned_mse, degenerate sets", run_aligned, &plain, 2,
                       {X(4, 9, 3), IN(0, FILL_NORMAL, 4, 9, 3)}, ALIGNED_TOL};
    const ast_backend *gpu = cf_gpu();
    cf_data d = cf_make_data(&k);
    float *p = d.x[0], *q = d.x[1];
    for (int i = 0; i < 9; i++) {
        float t = (float)i - 4.0f;
        for (int a = 0; a < 3; a++) {
            p[i * 3 + a] = t * (float)(a + 1) + 0.5f;             /* set 0: a line along (1, 2, 3) */
            q[i * 3 + a] = t * (a == 1 ? -0.5f : 0.25f);          /* ... and one along (1, -2, 1) */
            q[(18 + i) * 3 + a] = 0.125f * (float)a;              /* set 2: one point */
        }
        q[(9 + i) * 3 + 2] = 1.5f;                                /* set 1: the plane z = 1.5 */
        p[(27 + i) * 3 + 1] = 0.0f, q[(27 + i) * 3] = -2.0f;      /* set 3: y = 0 and x = -2 */
    }
    cf_check_data(gpu, &k, &d);
    cf_free_data(&k, &d);
}

/* A non-finite coordinate: in a weighted cell of set 1 the loss and set
 * 1's gradients are NaN on both backends, not an abort; in a padded cell
 * of set 0 it is never read, and set 0's gradients match the CPU's. */
Test(cuda_ops, aligned_mse_nan_input)
{
    const int masked = 1;
    const cf_case k = {"aligned_mse, NaN input", run_aligned, &masked, 3, {X(2, 8, 3), X(2, 8, 3), MASK(0, 2, 8)},
                       ALIGNED_TOL};
    const ast_backend *gpu = cf_gpu();
    cf_data d = cf_make_data(&k);
    d.x[2][0] = 0.0f, d.x[2][8] = d.x[2][9] = 1.0f;
    d.x[0][0] = NAN, d.x[1][9 * 3 + 2] = INFINITY;
    cf_result cpu = cf_run_on(ast_backend_cpu(), &k, &d, 0, 0), dev = cf_run_on(gpu, &k, &d, 0, 0);
    cr_assert(isnan(cpu.y[0]) && isnan(dev.y[0]), "loss: CPU %g, CUDA %g", cpu.y[0], dev.y[0]);
    for (int i = 0; i < 2; i++) {
        cf_assert_close("set 0's gradient", dev.g[i], cpu.g[i], 8 * 3, ALIGNED_TOL);
        for (int e = 8 * 3; e < 16 * 3; e++) cr_assert(isnan(dev.g[i][e]), "input %d [%d]: %g", i, e, dev.g[i][e]);
    }
    cf_free_result(&cpu), cf_free_result(&dev);
    cf_free_data(&k, &d);
}

/* ---- the sampler's alignment ------------------------------------------------------ */

/* in: pred, target, then the mask where arg says so (none wants a gradient). */
static ast_tensor *run_align(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    return ast_kabsch_align(c, in[0], in[1], *(const int *)arg ? in[2] : NULL);
}

#define P(...) IN(0, FILL_NORMAL, __VA_ARGS__)

/* Each output is R p summed in double and rounded to float once on both
 * backends. R: LAPACK's SVD against one-sided Jacobi, both within ~4e-15
 * of the exact R for a generic H (measured for aligned_mse on 20000 3x3
 * cases), H summed in another order (~1e-16 N relative); so the doubles
 * differ by ~1e-14 |p| and the floats by at most one rounding, 1.2e-7 of
 * the largest. Where a zero singular value leaves its vectors to each
 * SVD's choice, only p's component along them, float rounding of its
 * construction (< 1.2e-7 |p|), can turn differently. ALIGN_TOL =
 * cf_sum_tol(1) = 2e-6 covers both with margin. */
#define ALIGN_TOL cf_sum_tol(1)

/* Sets whose valid cells span 3-D (FILL_MASK keeps ~3/4 of 37 or more):
 * R is unique, so padding holding random values turns alike; the
 * sampler's size, 32 sets of 512 cells; empty shapes. */
Test(cuda_ops, kabsch_align)
{
    const int plain = 0, masked = 1;
    const cf_case cases[] = {
        {"kabsch_align [4,37,3]", run_align, &plain, 2, {P(4, 37, 3), P(4, 37, 3)}, ALIGN_TOL},
        {"kabsch_align [5,37,3] mask", run_align, &masked, 3, {P(5, 37, 3), P(5, 37, 3), MASK(0, 5, 37)}, ALIGN_TOL},
        {"kabsch_align [3,700,3] mask", run_align, &masked, 3, {P(3, 700, 3), P(3, 700, 3), MASK(0, 3, 700)},
         ALIGN_TOL},
        {"kabsch_align [32,512,3] mask", run_align, &masked, 3, {P(32, 512, 3), P(32, 512, 3), MASK(0, 32, 512)},
         ALIGN_TOL},
        {"kabsch_align [0,5,3]", run_align, &plain, 2, {P(0, 5, 3), P(0, 5, 3)}, EXACT},
        {"kabsch_align [4,0,3]", run_align, &plain, 2, {P(4, 0, 3), P(4, 0, 3)}, EXACT},
    };
    CHECK(cases);
}

/* Sets of 0, 1 or 2 valid cells ([8, 2, 3] with FILL_MASK) and of one
 * cell: H of rank 0, 1 or 2, R unique only on the valid cells' span, so
 * padding is 0 as the sampler's is (R 0 = 0 on both; no mask: every set
 * has its one cell). H = 0 gives R = I on both (LAPACK's U = V = I, and
 * Jacobi's). */
Test(cuda_ops, kabsch_align_small_sets)
{
    const int plain = 0, masked = 1;
    const cf_case k = {"kabsch_align [8,2,3] mask, padding 0", run_align, &masked, 3,
                       {P(8, 2, 3), P(8, 2, 3), MASK(0, 8, 2)}, ALIGN_TOL};
    cf_data d = cf_make_data(&k);
    for (int i = 0; i < 8 * 2; i++)
        for (int a = 0; a < 3; a++) d.x[0][i * 3 + a] *= d.x[2][i];
    cf_check_data(cf_gpu(), &k, &d);
    cf_free_data(&k, &d);
    const cf_case one[] = {{"kabsch_align [9,1,3]", run_align, &plain, 2, {P(9, 1, 3), P(9, 1, 3)}, ALIGN_TOL}};
    CHECK(one);
}

/* Degenerate sets a fill cannot draw, B = 4 of N = 9, about the origin:
 * set 0 pred and target each on a line through it, set 1 each in a plane
 * through it, set 2 the target at the origin (H = 0: R = I), set 3 pred at
 * the origin. R p is unique in each (p has no component along a zero
 * singular value's vectors, or R = I); same tolerance. */
Test(cuda_ops, kabsch_align_degenerate_sets)
{
    const int plain = 0;
    const cf_case k = {"kabsch_align, degenerate sets", run_align, &plain, 2, {P(4, 9, 3), P(4, 9, 3)}, ALIGN_TOL};
    cf_data d = cf_make_data(&k);
    float *p = d.x[0], *q = d.x[1];
    for (int i = 0; i < 9; i++) {
        float t = (float)i - 4.0f, u = p[(9 + i) * 3], v = q[(9 + i) * 3];
        for (int a = 0; a < 3; a++) {
            p[i * 3 + a] = t * (float)(a + 1), q[i * 3 + a] = t * (a == 1 ? -0.5f : 0.25f);
            p[(9 + i) * 3 + a] = a == 1 ? 0.0f : (a == 0 ? u : v);  /* the plane y = 0 */
            q[(9 + i) * 3 + a] = a == 2 ? 0.0f : (a == 0 ? v : -u); /* the plane z = 0 */
            q[(18 + i) * 3 + a] = 0.0f, p[(27 + i) * 3 + a] = 0.0f;
        }
    }
    cf_check_data(cf_gpu(), &k, &d);
    cf_free_data(&k, &d);
}

/* A non-finite coordinate: in a weighted cell of set 1 the whole set is
 * NaN on both backends, not an abort; in a padded cell of set 0 it never
 * reaches R, only that cell (turned) is NaN, and the rest matches. */
Test(cuda_ops, kabsch_align_nan_input)
{
    const int masked = 1;
    const cf_case k = {"kabsch_align, NaN input", run_align, &masked, 3, {P(2, 8, 3), P(2, 8, 3), MASK(0, 2, 8)},
                       ALIGN_TOL};
    cf_data d = cf_make_data(&k);
    for (int i = 1; i < 16; i++) d.x[2][i] = 1.0f;
    d.x[2][0] = 0.0f;
    d.x[0][0] = NAN, d.x[1][9 * 3 + 2] = INFINITY;
    cf_result cpu = cf_run_on(ast_backend_cpu(), &k, &d, 0, 0), dev = cf_run_on(cf_gpu(), &k, &d, 0, 0);
    for (int e = 0; e < 16 * 3; e++)
        cr_assert(isnan(dev.y[e]) == isnan(cpu.y[e]) && (e >= 3 || isnan(dev.y[e])) && (e < 8 * 3 || isnan(dev.y[e])),
                  "[%d]: CUDA %g, CPU %g", e, dev.y[e], cpu.y[e]);
    cf_assert_close("set 0 past its padded cell", dev.y + 3, cpu.y + 3, 7 * 3, ALIGN_TOL);
    cf_free_result(&cpu), cf_free_result(&dev);
    cf_free_data(&k, &d);
}

/* ---- grouped linear -------------------------------------------------------------- */

typedef struct groups_arg {
    int n;
    int64_t offsets[MAX_G + 1];
    int bias;
} groups_arg;

/* in: x, then n weights, then n biases (when the case has them). */
static ast_tensor *run_grouped(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const groups_arg *g = arg;
    return ast_grouped_linear(c, in[0], g->offsets, g->n, in + 1, g->bias ? in + 1 + g->n : NULL);
}

/* As linear per group: the weight gradients sum the group's rows. */
Test(cuda_ops, grouped_linear)
{
    const groups_arg uneven = {4, {0, 3, 3, 7, 7}, 1}, one = {3, {0, 0, 37, 37}, 0};
    const groups_arg big = {4, {0, 700, 700, 1500, 2048}, 1}, none = {2, {0, 0, 0}, 1};
    const cf_case cases[] = {
        {"grouped 4 groups (2 empty), 7 x 17 -> 9", run_grouped, &uneven, 9,
         {X(7, 17), X(9, 17), X(9, 17), X(9, 17), X(9, 17), X(9), X(9), X(9), X(9)}, cf_sum_tol(17)},
        {"grouped one group of 37 rows, no bias", run_grouped, &one, 4, {X(37, 33), X(5, 33), X(5, 33), X(5, 33)},
         cf_sum_tol(37)},
        {"grouped 2048 x 256 -> 512 in 4 groups", run_grouped, &big, 9,
         {X(2048, 256), X(512, 256), X(512, 256), X(512, 256), X(512, 256), X(512), X(512), X(512), X(512)},
         cf_sum_tol(800)},
        {"grouped no rows", run_grouped, &none, 5, {X(0, 5), X(4, 5), X(4, 5), X(4), X(4)}, EXACT},
    };
    CHECK(cases);
}

/* ---- routing in device memory (moe_route and its consumers) ---------------------- */

typedef struct moe_arg {
    int k, experts, masked;
    float capacity_factor;
    int64_t per_set;
} moe_arg;

/* in: logits [T, E], then the mask [T] when the case has one. */
static ast_tensor *plan_of(ast_ctx *c, ast_tensor *const *in, const moe_arg *a)
{
    return ast_moe_route(c, in[0], a->masked ? in[1] : NULL, a->k, a->capacity_factor, a->per_set);
}

static ast_tensor *run_route(ast_ctx *c, ast_tensor *const *in, const void *arg) { return plan_of(c, in, arg); }

/* in: logits, the mask (when the case has one), x [T, D], E weights, E
 * biases: the whole routed layer, the routing weights a softmax over the
 * picked logits. */
static ast_tensor *run_routed_experts(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const moe_arg *a = arg;
    ast_tensor *plan = plan_of(c, in, a), *const *x = in + (a->masked ? 2 : 1);
    ast_tensor *weights = ast_softmax(c, ast_moe_pick(c, in[0], plan, a->k), -1);
    ast_tensor *rows = ast_moe_gather(c, x[0], plan, a->k);
    ast_tensor *y = ast_moe_grouped_linear(c, rows, plan, a->k, a->experts, x + 1, x + 1 + a->experts);
    return ast_moe_combine(c, y, weights, plan);
}

static ast_tensor *run_noise(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const int64_t *shape = arg;
    return ast_noise_normal(c, 2, shape, shape[2] ? in[0] : NULL, 0.3f);
}

#define LOGITS(...) IN(0, FILL_NORMAL, __VA_ARGS__)

/* The plan is integer work (top-k, ranks, offsets, counts): the same bits.
 * The noise: logf, sqrtf, cosf within 2 ulp each of glibc's (cf_sum_tol(1)). */
Test(cuda_ops, moe_route_and_noise)
{
    const moe_arg dropless = {2, 8, 1, 0.0f, 37}, tight = {2, 8, 1, 1.0f, 37}, top1 = {1, 4, 0, 0.0f, 37};
    const moe_arg big = {2, 64, 1, 1.25f, 1000}, one_set = {3, 5, 1, 0.5f, 300};
    const cf_case cases[] = {
        {"moe_route [74, 8] top-2 dropless, mask", run_route, &dropless, 2, {LOGITS(74, 8), MASK(0, 74)}, EXACT},
        {"moe_route [74, 8] top-2 capacity 1, mask", run_route, &tight, 2, {LOGITS(74, 8), MASK(0, 74)}, EXACT},
        {"moe_route [37, 4] top-1, no mask", run_route, &top1, 1, {LOGITS(37, 4)}, EXACT},
        {"moe_route [3000, 64] top-2 capacity 1.25", run_route, &big, 2, {LOGITS(3000, 64), MASK(0, 3000)}, EXACT},
        {"moe_route [300, 5] top-3 capacity 0.5", run_route, &one_set, 2, {LOGITS(300, 5), MASK(0, 300)}, EXACT},
        {"moe_route [0, 4]", run_route, &top1, 1, {LOGITS(0, 4)}, EXACT},
        {"noise_normal [74, 8]", run_noise, (int64_t[]){74, 8, 0}, 0, {{0}}, cf_sum_tol(1)},
        {"noise_normal [300, 65] rows masked", run_noise, (int64_t[]){300, 65, 1}, 1, {MASK(0, 300)}, cf_sum_tol(1)},
    };
    CHECK(cases);
}

#define EXPERTS4(out, in) X(out, in), X(out, in), X(out, in), X(out, in), X(out), X(out), X(out), X(out)

/* Routed through the plan: the GEMMs sum `in` terms (forward), `out`
 * (dx) or an expert's rows (weight and bias gradients, at most T k); the
 * gather's and combine's sums add in the CPU's order; the weights'
 * gradient is a dot product of D terms. Each case's tolerance counts the
 * longest. */
Test(cuda_ops, moe_routed_experts)
{
    const moe_arg dropless = {2, 4, 1, 0.0f, 37}, tight = {2, 4, 1, 0.8f, 37}, big = {2, 4, 1, 1.1f, 1000};
    const moe_arg top1 = {1, 4, 0, 0.0f, 33};
    const cf_case cases[] = {
        {"routed [74, 24] -> 20, 4 experts top-2 dropless", run_routed_experts, &dropless, 11,
         {X(74, 4), MASK(0, 74), X(74, 24), EXPERTS4(20, 24)}, cf_sum_tol(148)},
        {"routed [74, 24] -> 20, 4 experts top-2 capacity 0.8", run_routed_experts, &tight, 11,
         {X(74, 4), MASK(0, 74), X(74, 24), EXPERTS4(20, 24)}, cf_sum_tol(148)},
        {"routed [2000, 65] -> 130, 4 experts top-2 capacity 1.1", run_routed_experts, &big, 11,
         {X(2000, 4), MASK(0, 2000), X(2000, 65), EXPERTS4(130, 65)}, cf_sum_tol(4000)},
        {"routed [33, 7] -> 5, top-1, no mask", run_routed_experts, &top1, 10,
         {X(33, 4), X(33, 7), EXPERTS4(5, 7)}, cf_sum_tol(33)},
    };
    CHECK(cases);
}

/* More experts than one launch of the grouped GEMM takes (32): 40 experts,
 * top-2, 600 tokens, each expert's weights its own tensor. */
enum { MANY_E = 40, MANY_T = 600, MANY_IN = 48, MANY_OUT = 36 };

typedef struct many_out {
    float *y, *gx, *gw[MANY_E], *gb[MANY_E];
} many_out;

static ast_tensor *many_input(ast_ctx *c, int ndim, const int64_t *shape, uint64_t seed)
{
    ast_tensor *t = ast_empty(c, ndim, shape);
    float *v = ast_xmalloc((size_t)t->size * sizeof *v);
    cf_normal(seed, v, t->size, 1.0f);
    ast_tensor_write(c, t, 0, t->size, v);
    free(v);
    t->flags |= AST_REQUIRES_GRAD;
    return t;
}

static many_out many_experts_on(const ast_backend *b)
{
    ast_ctx *c = ast_ctx_new_on(b, CF_CTX_SEED);
    ast_tensor *logits = many_input(c, 2, (int64_t[]){MANY_T, MANY_E}, 1);
    ast_tensor *x = many_input(c, 2, (int64_t[]){MANY_T, MANY_IN}, 2), *w[MANY_E], *bias[MANY_E];
    for (int e = 0; e < MANY_E; e++) {
        w[e] = many_input(c, 2, (int64_t[]){MANY_OUT, MANY_IN}, 10 + e);
        bias[e] = many_input(c, 1, (int64_t[]){MANY_OUT}, 100 + e);
    }
    ast_tensor *plan = ast_moe_route(c, logits, NULL, 2, 1.5f, MANY_T);
    ast_tensor *y = ast_moe_grouped_linear(c, ast_moe_gather(c, x, plan, 2), plan, 2, MANY_E, w, bias);
    float *dy = ast_xmalloc((size_t)y->size * sizeof *dy);
    cf_normal(7, dy, y->size, 1.0f);
    ast_backward_seed(c, y, dy);
    free(dy);
    many_out o = {.y = cf_read(c, y), .gx = cf_read_grad(c, x)};
    for (int e = 0; e < MANY_E; e++) o.gw[e] = cf_read_grad(c, w[e]), o.gb[e] = cf_read_grad(c, bias[e]);
    ast_ctx_free(c);
    return o;
}

/* Sums of MANY_IN terms (forward), MANY_OUT (dx) and an expert's rows (at
 * most its capacity, ceil(1200 * 1.5 / 40) = 45): cf_sum_tol(48). */
Test(cuda_ops, moe_grouped_linear_over_many_experts)
{
    const ast_backend *gpu = cf_gpu();
    many_out cpu = many_experts_on(ast_backend_cpu()), cuda = many_experts_on(gpu);
    int64_t rows = (int64_t)MANY_T * 2;
    cf_assert_close("many experts: output", cuda.y, cpu.y, rows * MANY_OUT, cf_sum_tol(48));
    cf_assert_close("many experts: input gradient", cuda.gx, cpu.gx, (int64_t)MANY_T * MANY_IN, cf_sum_tol(48));
    for (int e = 0; e < MANY_E; e++) {
        char what[64];
        snprintf(what, sizeof what, "many experts: expert %d's weight gradient", e);
        cf_assert_close(what, cuda.gw[e], cpu.gw[e], MANY_OUT * MANY_IN, cf_sum_tol(48));
        snprintf(what, sizeof what, "many experts: expert %d's bias gradient", e);
        cf_assert_close(what, cuda.gb[e], cpu.gb[e], MANY_OUT, cf_sum_tol(48));
        free(cpu.gw[e]), free(cuda.gw[e]), free(cpu.gb[e]), free(cuda.gb[e]);
    }
    free(cpu.y), free(cuda.y), free(cpu.gx), free(cuda.gx);
}

/* ---- dropout masks, bf16, gradients on the GPU ----------------------------------- */

/* Two dropout calls in one step: each draws its key from the context's RNG
 * and hashes it with the element's index, on the CPU and on the GPU alike,
 * so the masks (and the kept values, one product each) are identical. */
static float *two_dropouts(const ast_backend *b, const float *x, int64_t n, int64_t *dropped)
{
    ast_ctx *c = ast_ctx_new_on(b, 2024);
    ast_ctx_set_training(c, 1);
    ast_tensor *t = ast_empty(c, 1, &n);
    ast_tensor_write(c, t, 0, n, x);
    ast_tensor *y = ast_dropout(c, ast_dropout(c, t, 0.25f), 0.4f);
    float *v = cf_read(c, y);
    *dropped = 0;
    for (int64_t i = 0; i < n; i++) *dropped += v[i] == 0.0f;
    ast_ctx_free(c);
    return v;
}

Test(cuda_ops, dropout_masks_are_the_cpus)
{
    const ast_backend *gpu = cf_gpu();
    enum { N = 1 << 20 };
    float *x = cf_make_values(&(cf_input){1, {N}, FILL_AWAY, 0}, 99); /* no zeros: a zero output is a dropped element */
    int64_t dc, dg;
    float *cpu = two_dropouts(ast_backend_cpu(), x, N, &dc), *cuda = two_dropouts(gpu, x, N, &dg);
    cf_assert_close("two dropouts, 2^20 elements", cuda, cpu, N, EXACT);
    /* kept with probability 0.75 * 0.6 = 0.45: 576716.8 dropped, sd 509; 6 sd */
    cr_assert_lt(llabs(dg - 576717), 3100, "dropped %lld of 2^20", (long long)dg);
    free(x), free(cpu), free(cuda);
}

/* bf16 GEMMs (training.precision: bf16-mixed) against the CPU's float32:
 * each operand rounded to 8 significant bits (u = 2^-9 = 2e-3), so each
 * product is off by up to ~4e-3 of itself and a sum of K random-signed
 * products by ~4e-3 of its scale (the errors are independent: they grow
 * as sqrt(K), like the sum); normwise 1e-2 leaves 2.5x margin. A float32
 * GEMM taken for bf16 passes too (its error is 1e-6), so the test also
 * asks for some bf16 error: more than 1e-4. */
static double reduced_error(const ast_backend *gpu, const cf_case *k, ast_precision p)
{
    cf_data d = cf_make_data(k);
    cf_result cpu = cf_run_on(ast_backend_cpu(), k, &d, 0, 0);
    ast_ctx *c = ast_ctx_new_on(gpu, CF_CTX_SEED);
    ast_ctx_set_precision(c, p);
    ast_tensor *in[CF_MAX_IN];
    for (int i = 0; i < k->n_in; i++) in[i] = cf_make_input(c, &k->in[i], d.x[i], NULL);
    float *y = cf_read(c, k->run(c, in, k->arg));
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < cpu.size; i++) {
        num += ((double)y[i] - cpu.y[i]) * ((double)y[i] - cpu.y[i]);
        den += (double)cpu.y[i] * cpu.y[i];
    }
    ast_ctx_free(c);
    free(y), cf_free_result(&cpu), cf_free_data(k, &d);
    return sqrt(num / den);
}

Test(cuda_ops, bf16_linear_matmul_bmm)
{
    const ast_backend *gpu = cf_gpu();
    char why[256];
    if (!ast_bf16_supported(why, sizeof why)) cr_skip_test("ast_ctx_set_precision refuses bf16 here: %s", why);
    const cf_case cases[] = {
        {"bf16 linear [512, 256] x [384, 256] + b", run_linear, (int[]){1}, 3, {X(512, 256), X(384, 256), X(384)}, 0},
        {"bf16 matmul [300, 513] [513, 200]", run_matmul, NULL, 2, {X(300, 513), X(513, 200)}, 0},
        {"bf16 bmm^T_b [1,8,300,32] x2", run_bmm, (int[]){0, 1}, 2, {X(1, 8, 300, 32), X(1, 8, 300, 32)}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double err = reduced_error(gpu, &cases[i], AST_PRECISION_BF16);
        cr_assert_lt(err, 1e-2, "%s: normwise error %.3g against float32", cases[i].name, err);
        cr_assert_gt(err, 1e-4, "%s: normwise error %.3g: float32, not bf16?", cases[i].name, err);
    }
}

/* TF32 GEMMs (training.precision: tf32) against the CPU's float32: the
 * tensor cores keep 10 of an operand's 23 mantissa bits (truncated: up to
 * 2^-10 = 1e-3 of itself, rms 5.6e-4), so a product is off by rms ~8e-4 of
 * itself and a sum of random-signed products by ~8e-4 of its scale;
 * normwise 4e-3 leaves 5x margin. Float32's own error here is ~1e-6, so
 * more than 1e-4 says TF32 was used. */
Test(cuda_ops, tf32_linear_matmul_bmm)
{
    const ast_backend *gpu = cf_gpu();
    const cf_case cases[] = {
        {"tf32 linear [512, 256] x [384, 256] + b", run_linear, (int[]){1}, 3, {X(512, 256), X(384, 256), X(384)}, 0},
        {"tf32 matmul [300, 513] [513, 200]", run_matmul, NULL, 2, {X(300, 513), X(513, 200)}, 0},
        {"tf32 bmm^T_b [1,8,300,32] x2", run_bmm, (int[]){0, 1}, 2, {X(1, 8, 300, 32), X(1, 8, 300, 32)}, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double err = reduced_error(gpu, &cases[i], AST_PRECISION_TF32);
        cr_log_info("%s: normwise error %.3g against float32", cases[i].name, err);
        cr_assert_lt(err, 4e-3, "%s: normwise error %.3g against float32", cases[i].name, err);
        cr_assert_gt(err, 1e-4, "%s: normwise error %.3g: float32, not TF32?", cases[i].name, err);
    }
}

/* Finite differences on the GPU itself (gc_check_on), as the CPU op tests
 * do on the CPU: central differences in float32 at h = 1e-2 against the
 * tape's gradients. Linear ops have no truncation error, only rounding of
 * L / h (~1e-5); the smooth nonlinear ones (softmax, layernorm, gelu) an
 * O(h^2) truncation below 1e-3 at O(1) inputs. 1e-2 with a floor of 1e-2
 * for tiny gradients, as tests/test_ops_*.c. */
typedef struct fd_case {
    const char *name;
    gc_forward f;
    int n_in;
    int ndim[3];
    int64_t shape[3][3];
} fd_case;

static ast_tensor *fd_linear(ast_ctx *c, ast_tensor *const *in, void *ud) { return ast_linear(c, in[0], in[1], in[2]); }
static ast_tensor *fd_softmax(ast_ctx *c, ast_tensor *const *in, void *ud) { return ast_softmax(c, in[0], -1); }
static ast_tensor *fd_layernorm(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_layernorm(c, in[0], in[1], in[2], 1e-5f);
}
static ast_tensor *fd_gelu_mul(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_mul(c, ast_gelu(c, in[0]), in[1]);
}
static ast_tensor *fd_pdist(ast_ctx *c, ast_tensor *const *in, void *ud) { return ast_pdist(c, in[0]); }
static ast_tensor *fd_bmm(ast_ctx *c, ast_tensor *const *in, void *ud) { return ast_bmm(c, in[0], in[1], 0, 1); }

Test(cuda_ops, finite_differences_on_the_gpu)
{
    const ast_backend *gpu = cf_gpu();
    const fd_case cases[] = {
        {"linear", fd_linear, 3, {2, 2, 1}, {{5, 7}, {3, 7}, {3}}},
        {"softmax", fd_softmax, 1, {2}, {{3, 9}}},
        {"layernorm", fd_layernorm, 3, {2, 1, 1}, {{4, 6}, {6}, {6}}},
        {"gelu * b (broadcast)", fd_gelu_mul, 2, {2, 1}, {{4, 5}, {5}}},
        {"pdist", fd_pdist, 1, {3}, {{2, 5, 3}}},
        {"bmm^T_b", fd_bmm, 2, {3, 3}, {{2, 3, 4}, {2, 5, 4}}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fd_case *k = &cases[i];
        ast_params *p = ast_params_new(40 + i);
        ast_tensor *in[3];
        for (int j = 0; j < k->n_in; j++) {
            char name[8] = {'x', (char)('0' + j), 0};
            in[j] = gc_input(p, name, k->ndim[j], k->shape[j], 1.0f);
        }
        ast_params_to_backend(p, gpu);
        gc_result r = gc_check_on(gpu, k->f, in, k->n_in, NULL, 1e-2f, 1e-2);
        cr_assert_lt(r.max_err, 1e-2, "%s on CUDA: input %d[%lld]: analytic %g numeric %g", k->name, r.worst_input,
                     (long long)r.worst_index, r.analytic, r.numeric);
        ast_params_free(p);
    }
}
