/* add / sub / mul / div under every broadcast pattern the model uses, and
 * affine / relu / gelu / sigmoid / softplus / dropout / silu / exp and
 * key_mask_bias: values against naive loops and known values, gradients
 * against finite differences. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <signal.h>
#include <string.h>

#include "engine/backend.h"
#include "gradcheck.h"

/* Finite differences with h = 1e-2: add/sub/mul are linear in each input
 * element (truncation error 0); div and the activations have smooth third
 * derivatives of O(1) on the inputs used, so the truncation error is about
 * h^2 = 1e-4, and float32 rounding of L / h adds about 1e-5. 1e-2 leaves a
 * wide margin while a wrong derivative term is off by O(1). */
#define GRAD_TOL 1e-2
/* Transcendental float functions (erff, expf, log1pf) are within a few ulp
 * of the double-precision reference: 1e-6 relative (8 ulp). gelu's
 * 1 + erf(x / sqrt 2) cancels for negative x, leaving an absolute error of
 * about |x| ulp(1) / 2 = |x| 6e-8, hence 1e-7 (1 + |x|) absolute. */
#define FN_REL 1e-6
#define FN_ABS 1e-7

#define ASSERT_GRADS(r, ...)                                                                     \
    cr_assert_lt((r).max_err, GRAD_TOL, __VA_ARGS__)

static void assert_close(double got, double want, const char *what, double x)
{
    cr_assert_leq(fabs(got - want), FN_ABS * (1.0 + fabs(x)) + FN_REL * fabs(want), "%s(%g) = %.9g, want %.9g", what, x, got, want);
}

/* ---- broadcasting binary ops ------------------------------------------ */

typedef ast_tensor *(*binary_fn)(ast_ctx *, ast_tensor *, ast_tensor *);

typedef struct binary_case {
    const char *name;
    binary_fn op;
    char sym;
} binary_case;

static const binary_case OPS[4] = {{"add", ast_add, '+'}, {"sub", ast_sub, '-'}, {"mul", ast_mul, '*'}, {"div", ast_div, '/'}};

typedef struct pattern {
    const char *name;
    int na, nb;
    int64_t a[AST_MAX_DIMS], b[AST_MAX_DIMS];
} pattern;

/* The model's patterns, their mirror images, and the edge cases. */
static const pattern PATTERNS[] = {
    {"equal shapes", 3, 3, {2, 3, 4}, {2, 3, 4}},
    {"[B,N,E] with [E]", 3, 1, {2, 3, 5}, {5}},
    {"[E] with [B,N,E]", 1, 3, {5}, {2, 3, 5}},
    {"[B,N,G] with [B,N,1]", 3, 3, {2, 3, 4}, {2, 3, 1}},
    {"[B,N,3] with [B,1,3]", 3, 3, {2, 4, 3}, {2, 1, 3}},
    {"[B,N,3] with [B,N,1]", 3, 3, {2, 4, 3}, {2, 4, 1}},
    {"[B,1,N,1] with [B,H,N,dh]", 4, 4, {2, 1, 3, 1}, {2, 2, 3, 4}},
    {"[B,H,N,dh] with [B,1,N,1]", 4, 4, {2, 2, 3, 4}, {2, 1, 3, 1}},
    {"both sides [2,1,4] with [3,1]", 3, 2, {2, 1, 4}, {3, 1}},
    {"scalar [1] with [2,3]", 1, 2, {1}, {2, 3}},
};
#define N_PATTERNS (int)(sizeof PATTERNS / sizeof PATTERNS[0])

static float apply(char sym, float a, float b)
{
    switch (sym) {
    case '+': return a + b;
    case '-': return a - b;
    case '*': return a * b;
    default: return a / b;
    }
}

/* Inputs for a pattern; b is kept at least 0.5 away from 0 so div is smooth. */
static void make_inputs(ast_params *p, const pattern *pt, ast_tensor **a, ast_tensor **b)
{
    *a = gc_input(p, "a", pt->na, pt->a, 1.0f);
    *b = gc_input(p, "b", pt->nb, pt->b, 1.0f);
    for (int64_t i = 0; i < (*b)->size; i++) (*b)->data[i] = copysignf(0.5f + fabsf((*b)->data[i]), (*b)->data[i]);
}

static void padded(int nd, const int64_t *shape, int64_t *out)
{
    for (int i = 0; i < AST_MAX_DIMS; i++) out[i] = i < AST_MAX_DIMS - nd ? 1 : shape[i - (AST_MAX_DIMS - nd)];
}

/* The definition of broadcasting, element by element: each operand's index
 * along a dim is the output's, or 0 where the operand has size 1. A single
 * float32 operation on the same operands must match bit for bit. */
static void check_binary_values(const binary_case *op, const pattern *pt, const ast_tensor *a,
                                 const ast_tensor *b, const ast_tensor *y)
{
    int64_t as[4], bs[4], ys[4];
    padded(pt->na, pt->a, as);
    padded(pt->nb, pt->b, bs);
    for (int i = 0; i < 4; i++) ys[i] = as[i] > bs[i] ? as[i] : bs[i];
    int nd = pt->na > pt->nb ? pt->na : pt->nb;
    cr_assert_eq(y->ndim, nd, "%s %s: rank", op->name, pt->name);
    for (int i = 0; i < nd; i++) cr_assert_eq(y->shape[i], ys[4 - nd + i], "%s %s: dim %d", op->name, pt->name, i);
    int64_t o = 0;
    for (int64_t i0 = 0; i0 < ys[0]; i0++)
        for (int64_t i1 = 0; i1 < ys[1]; i1++)
            for (int64_t i2 = 0; i2 < ys[2]; i2++)
                for (int64_t i3 = 0; i3 < ys[3]; i3++, o++) {
                    int64_t ia = (((as[0] > 1 ? i0 : 0) * as[1] + (as[1] > 1 ? i1 : 0)) * as[2] +
                                  (as[2] > 1 ? i2 : 0)) * as[3] + (as[3] > 1 ? i3 : 0);
                    int64_t ib = (((bs[0] > 1 ? i0 : 0) * bs[1] + (bs[1] > 1 ? i1 : 0)) * bs[2] +
                                  (bs[2] > 1 ? i2 : 0)) * bs[3] + (bs[3] > 1 ? i3 : 0);
                    float want = apply(op->sym, a->data[ia], b->data[ib]);
                    cr_assert_eq(y->data[o], want, "%s %s: element %lld", op->name, pt->name, (long long)o);
                }
}

Test(ops_elementwise, binary_values_for_every_pattern)
{
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < N_PATTERNS; t++) {
            ast_params *p = ast_params_new(100 + t);
            ast_tensor *a, *b;
            make_inputs(p, &PATTERNS[t], &a, &b);
            ast_ctx *c = ast_ctx_new(0);
            check_binary_values(&OPS[k], &PATTERNS[t], a, b, OPS[k].op(c, a, b));
            ast_ctx_free(c);
            ast_params_free(p);
        }
}

static ast_tensor *fwd_binary(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const binary_case *op = ud;
    return op->op(c, in[0], in[1]);
}

/* The broadcast operand's gradient must sum over the dims it repeats. */
Test(ops_elementwise, binary_gradients_for_every_pattern)
{
    for (int k = 0; k < 4; k++)
        for (int t = 0; t < N_PATTERNS; t++) {
            ast_params *p = ast_params_new(200 + t);
            ast_tensor *in[2];
            make_inputs(p, &PATTERNS[t], &in[0], &in[1]);
            gc_result r = gc_check(fwd_binary, in, 2, (void *)&OPS[k], 1e-2f, 1e-2);
            ASSERT_GRADS(r, "%s %s: input %d[%lld] analytic %g numeric %g", OPS[k].name, PATTERNS[t].name,
                         r.worst_input, (long long)r.worst_index, r.analytic, r.numeric);
            ast_params_free(p);
        }
}

/* Hand-computed anchors for the broadcasting rule itself. */
Test(ops_elementwise, broadcasting_by_hand)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *m = ast_tensor_from(c, 2, (int64_t[]){2, 3}, (float[]){1, 2, 3, 4, 5, 6});
    ast_tensor *v = ast_tensor_from(c, 1, (int64_t[]){3}, (float[]){10, 20, 30});
    ast_tensor *col = ast_tensor_from(c, 2, (int64_t[]){2, 1}, (float[]){2, 3});
    ast_tensor *row = ast_tensor_from(c, 2, (int64_t[]){1, 3}, (float[]){1, 10, 100});
    const float sum[6] = {11, 22, 33, 14, 25, 36}, outer[6] = {2, 20, 200, 3, 30, 300};
    ast_tensor *s = ast_add(c, m, v), *o = ast_mul(c, col, row);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(s->data[i], sum[i], "[2,3]+[3] element %d", i);
        cr_assert_eq(o->data[i], outer[i], "[2,1]*[1,3] element %d", i);
    }
    ast_ctx_free(c);
}

Test(ops_elementwise, incompatible_shapes_abort, .signal = SIGABRT)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_add(c, ast_zeros(c, 2, (int64_t[]){2, 3}), ast_zeros(c, 1, (int64_t[]){2}));
}

/* ---- unary ops ---------------------------------------------------------- */

typedef ast_tensor *(*unary_fn)(ast_ctx *, ast_tensor *);

static ast_tensor *fwd_unary(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    unary_fn f = *(unary_fn *)ud;
    return f(c, in[0]);
}

/* Runs f on the given values and returns the output (lives in c). */
static ast_tensor *run_on(ast_ctx *c, unary_fn f, const float *x, int n)
{
    return f(c, ast_tensor_from(c, 1, (int64_t[]){n}, x));
}

static ast_tensor *fwd_affine(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    (void)ud;
    return ast_affine(c, in[0], -1.5f, 0.25f);
}

Test(ops_elementwise, affine_values_and_gradients)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){3, 4}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = fwd_affine(c, &x, NULL);
    for (int i = 0; i < 12; i++) assert_close(y->data[i], x->data[i] * -1.5 + 0.25, "affine", x->data[i]);
    ast_ctx_free(c);
    gc_result r = gc_check(fwd_affine, &x, 1, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "affine: analytic %g numeric %g", r.analytic, r.numeric);
    ast_params_free(p);
}

Test(ops_elementwise, relu_values)
{
    const float x[5] = {-2.0f, -1e-3f, 0.0f, 1e-3f, 3.5f}, want[5] = {0, 0, 0, 1e-3f, 3.5f};
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = run_on(c, ast_relu, x, 5);
    for (int i = 0; i < 5; i++) cr_assert_eq(y->data[i], want[i], "relu(%g)", x[i]);
    const float bad[1] = {NAN};
    cr_assert(isnan(run_on(c, ast_relu, bad, 1)->data[0]), "relu must pass NaN through, as torch does");
    ast_ctx_free(c);
}

/* Known values: gelu(x) = x Phi(x), Phi(1) = 0.8413447460685429 etc. */
Test(ops_elementwise, gelu_known_values)
{
    const float x[6] = {1.0f, -0.5f, 0.0f, 2.0f, -3.0f, 3.0f};
    const double want[6] = {0.8413447460685429, -0.15426876936299344, 0.0,
                            1.9544997361036416, -0.00404969409489031, 2.99595030590511};
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = run_on(c, ast_gelu, x, 6);
    for (int i = 0; i < 6; i++) assert_close(y->data[i], want[i], "gelu", x[i]);
    ast_ctx_free(c);
}

Test(ops_elementwise, sigmoid_values_without_overflow)
{
    const float x[7] = {-100.0f, -20.0f, -1.0f, 0.0f, 0.5f, 20.0f, 100.0f};
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = run_on(c, ast_sigmoid, x, 7);
    for (int i = 0; i < 7; i++) assert_close(y->data[i], 1.0 / (1.0 + exp(-(double)x[i])), "sigmoid", x[i]);
    ast_ctx_free(c);
}

/* torch.nn.functional.softplus: log1p(exp(x)), identity above 20. */
Test(ops_elementwise, softplus_values_match_torch)
{
    const float x[12] = {-100.0f, -30.0f, -5.0f, -1.0f, 0.0f, 0.5f, 3.0f, 19.5f, 20.0f, 20.5f, 25.0f, 1000.0f};
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = run_on(c, ast_softplus, x, 12);
    for (int i = 0; i < 12; i++) {
        double want = x[i] > 20.0f ? x[i] : log1p(exp((double)x[i]));
        assert_close(y->data[i], want, "softplus", x[i]);
    }
    cr_assert_eq(y->data[11], 1000.0f, "no overflow for large inputs");
    ast_ctx_free(c);
}

/* Random inputs against the double-precision formulas. */
Test(ops_elementwise, activations_match_double_formulas)
{
    ast_params *p = ast_params_new(2);
    ast_tensor *x = gc_input(p, "x", 1, (int64_t[]){64}, 3.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *g = ast_gelu(c, x), *s = ast_sigmoid(c, x), *sp = ast_softplus(c, x), *r = ast_relu(c, x);
    for (int i = 0; i < 64; i++) {
        double v = x->data[i];
        assert_close(g->data[i], 0.5 * v * (1.0 + erf(v / sqrt(2.0))), "gelu", v);
        assert_close(s->data[i], 1.0 / (1.0 + exp(-v)), "sigmoid", v);
        assert_close(sp->data[i], log1p(exp(v)), "softplus", v);
        cr_assert_eq(r->data[i], v > 0 ? v : 0.0, "relu(%g)", v);
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

/* Inputs spread over [-9, 9] (scale 3); relu's are moved at least 0.05
 * away from its kink, farther than the step h = 1e-2. */
Test(ops_elementwise, activation_gradients)
{
    const struct { const char *name; unary_fn f; } fns[4] = {
        {"relu", ast_relu}, {"gelu", ast_gelu}, {"sigmoid", ast_sigmoid}, {"softplus", ast_softplus}};
    for (int k = 0; k < 4; k++) {
        ast_params *p = ast_params_new(300 + k);
        ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){4, 8}, 3.0f);
        for (int64_t i = 0; i < x->size; i++)
            if (fabsf(x->data[i]) < 0.05f) x->data[i] = copysignf(0.05f, x->data[i]);
        gc_result r = gc_check(fwd_unary, &x, 1, (void *)&fns[k].f, 1e-2f, 1e-2);
        ASSERT_GRADS(r, "%s at x=%g: analytic %g numeric %g", fns[k].name, x->data[r.worst_index], r.analytic,
                     r.numeric);
        ast_params_free(p);
    }
}

/* Both sides of the threshold: derivative sigmoid(x) below, 1 above. */
Test(ops_elementwise, softplus_gradient_across_the_threshold)
{
    ast_params *p = ast_params_new(5);
    ast_tensor *x = gc_input(p, "x", 1, (int64_t[]){6}, 1.0f);
    const float at[6] = {-25.0f, -2.0f, 0.3f, 15.0f, 19.0f, 24.0f};
    for (int i = 0; i < 6; i++) x->data[i] = at[i];
    unary_fn f = ast_softplus;
    gc_result r = gc_check(fwd_unary, &x, 1, &f, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "softplus at x=%g: analytic %g numeric %g", at[r.worst_index], r.analytic, r.numeric);
    ast_params_free(p);
}

/* ---- dropout --------------------------------------------------------------- */

static ast_tensor *ones(ast_ctx *c, int64_t n)
{
    ast_tensor *t = ast_zeros(c, 1, &n);
    for (int64_t i = 0; i < n; i++) t->data[i] = 1.0f;
    return t;
}

/* The dropped count is Binomial(n, p); 5 standard deviations
 * (sqrt(n p (1-p))) give a false alarm chance below 6e-7 for any seed,
 * while a wrong keep probability (e.g. p instead of 1-p) misses by far more. */
Test(ops_elementwise, dropout_drops_a_binomial_fraction_and_rescales)
{
    const int64_t n = 200000;
    const float ps[3] = {0.1f, 0.5f, 0.9f};
    for (int k = 0; k < 3; k++) {
        ast_ctx *c = ast_ctx_new(42 + k);
        ast_ctx_set_training(c, 1);
        ast_tensor *y = ast_dropout(c, ones(c, n), ps[k]);
        int64_t dropped = 0;
        for (int64_t i = 0; i < n; i++) {
            if (y->data[i] == 0.0f) dropped++;
            else cr_assert_float_eq(y->data[i], 1.0 / (1.0 - ps[k]), 1e-6 / (1.0 - ps[k]), "kept value, p=%g", ps[k]);
        }
        double mean = n * ps[k], sd = sqrt(n * ps[k] * (1.0 - ps[k]));
        cr_assert_leq(fabs(dropped - mean), 5.0 * sd, "p=%g dropped %lld of %lld", ps[k], (long long)dropped,
                      (long long)n);
        ast_ctx_free(c);
    }
}

static uint64_t next_draw(ast_ctx *c) { return ast_rng_next(ast_ctx_rng(c)); }

/* Identity without an RNG draw: in eval mode, and with p = 0 in training. */
Test(ops_elementwise, dropout_is_the_identity_in_eval_and_at_zero)
{
    for (int training = 0; training < 2; training++) {
        ast_ctx *c = ast_ctx_new(7), *ref = ast_ctx_new(7);
        ast_ctx_set_training(c, training);
        ast_tensor *x = ast_tensor_from(c, 1, (int64_t[]){4}, (float[]){1, -2, 3, -4});
        ast_tensor *y = ast_dropout(c, x, training ? 0.0f : 0.5f);
        for (int i = 0; i < 4; i++) cr_assert_eq(y->data[i], x->data[i], "training=%d element %d", training, i);
        cr_assert_eq(next_draw(c), next_draw(ref), "training=%d: the RNG must not advance", training);
        ast_ctx_free(c);
        ast_ctx_free(ref);
    }
}

static ast_tensor *masked_run(uint64_t seed, ast_ctx **out_ctx)
{
    ast_ctx *c = ast_ctx_new(seed);
    ast_ctx_set_training(c, 1);
    *out_ctx = c;
    return ast_dropout(c, ones(c, 256), 0.5f);
}

Test(ops_elementwise, dropout_masks_follow_the_seed)
{
    ast_ctx *c1, *c2, *c3;
    ast_tensor *a = masked_run(11, &c1), *b = masked_run(11, &c2), *d = masked_run(12, &c3);
    int differ = 0;
    for (int i = 0; i < 256; i++) {
        cr_assert_eq(a->data[i], b->data[i], "same seed, element %d", i);
        differ += a->data[i] != d->data[i];
    }
    cr_assert_gt(differ, 0, "another seed must give another mask");
    ast_ctx_free(c1);
    ast_ctx_free(c2);
    ast_ctx_free(c3);
}

/* With x = 1 the gradient of sum(y) is the mask times the scale, i.e. y
 * itself: the backward hashes the forward's mask again from its key, and
 * RNG draws between forward and backward must not change it. 100,000
 * elements: both passes split over the thread pool. */
Test(ops_elementwise, dropout_backward_uses_the_forwards_mask)
{
    enum { N = 100000 };
    ast_params *p = ast_params_new(6);
    ast_scope *s = ast_scope_new(p, "");
    ast_tensor *x = ast_param(s, "x", 1, (int64_t[]){N}, AST_INIT_ONE, 0.0f);
    ast_ctx *c = ast_ctx_new(3);
    ast_ctx_set_training(c, 1);
    ast_tensor *y = ast_dropout(c, x, 0.3f);
    for (int i = 0; i < 10; i++) next_draw(c);
    float *seed = ast_alloc(c, N * sizeof(float));
    for (int i = 0; i < N; i++) seed[i] = 1.0f;
    ast_backward_seed(c, y, seed);
    for (int i = 0; i < N; i++) cr_assert_eq(x->grad[i], y->data[i], "x.grad[%d]", i);
    ast_ctx_free(c);
    ast_params_free(p);
}

static ast_tensor *fwd_dropout(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    (void)ud;
    ast_ctx_set_training(c, 1);
    return ast_dropout(c, in[0], 0.25f);
}

/* gc_check reseeds the RNG before every evaluation, so the mask is fixed. */
Test(ops_elementwise, dropout_gradients)
{
    ast_params *p = ast_params_new(7);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){5, 6}, 1.0f);
    gc_result r = gc_check(fwd_dropout, &x, 1, NULL, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "dropout [%lld]: analytic %g numeric %g", (long long)r.worst_index, r.analytic, r.numeric);
    ast_params_free(p);
}

/* ---- silu, exp (ABI 2.1) ------------------------------------------------ */

/* ast_expf is within 2 ulp of exp where the result is a normal float
 * (tests/test_fastmath.c measures 1.4 ulp): 2.4e-7 relative. Below x =
 * -87.34 it returns 0 where expf's result is subnormal, an absolute error
 * under FLT_MIN. A wrong op (expf of the wrong argument, a missing term)
 * is off by far more. */
#define EXP_REL 2.4e-7

static void assert_exp_close(double got, double x)
{
    double want = exp(x);
    cr_assert_leq(fabs(got - want), EXP_REL * want + FLT_MIN, "exp(%g) = %.9g, want %.9g", x, got, want);
}

Test(ops_elementwise, exp_known_values)
{
    const float x[9] = {0.0f, 1.0f, -1.0f, 0.69314718f, 10.0f, -10.0f, 50.0f, -50.0f, -87.0f};
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = run_on(c, ast_exp, x, 9);
    cr_assert_eq(y->data[0], 1.0f, "exp(0) is exactly 1");
    for (int i = 0; i < 9; i++) assert_exp_close(y->data[i], x[i]);
    ast_ctx_free(c);
}

/* silu(x) = x / (1 + e^-x) in double. Its float error is sigmoid's (a few
 * ulp, within FN_REL) times |x| plus one rounding of the product, so the
 * relative FN_REL bound holds; where the sigmoid underflows (x < -87) the
 * absolute error is below |x| FLT_MIN, inside FN_ABS (1 + |x|). */
static double silu_ref(double x) { return x / (1.0 + exp(-x)); }

Test(ops_elementwise, silu_known_values)
{
    const float x[9] = {0.0f, 1.0f, -1.0f, 2.5f, -2.5f, 10.0f, -10.0f, 40.0f, -40.0f};
    /* x / (1 + e^-x): silu(1) = 0.7310585786300049, silu(-1) = -0.2689414213699951 */
    const double want[3] = {0.0, 0.7310585786300049, -0.2689414213699951};
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = run_on(c, ast_silu, x, 9);
    for (int i = 0; i < 3; i++) assert_close(y->data[i], want[i], "silu", x[i]);
    for (int i = 0; i < 9; i++) assert_close(y->data[i], silu_ref(x[i]), "silu", x[i]);
    ast_ctx_free(c);
}

/* Random inputs over [-9, 9] against double libm, and silu against the
 * composition it replaces, bit for bit. */
Test(ops_elementwise, silu_and_exp_match_double_formulas)
{
    ast_params *p = ast_params_new(8);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){4, 16}, 3.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *s = ast_silu(c, x), *e = ast_exp(c, x), *ref = ast_mul(c, x, ast_sigmoid(c, x));
    for (int i = 0; i < 64; i++) {
        double v = x->data[i];
        assert_close(s->data[i], silu_ref(v), "silu", v);
        assert_exp_close(e->data[i], v);
        cr_assert_eq(s->data[i], ref->data[i], "silu(%g) differs from x * sigmoid(x)", v);
    }
    cr_assert_eq(s->ndim, 2);
    cr_assert_eq(e->shape[0], 4);
    cr_assert_eq(e->shape[1], 16);
    ast_ctx_free(c);
    ast_params_free(p);
}

/* Large inputs run through the thread pool too (more than 2 grains). */
Test(ops_elementwise, silu_and_exp_match_on_a_parallel_size)
{
    const int64_t n = 5 * AST_PAR_GRAIN + 7;
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *x = ast_zeros(c, 1, &n);
    for (int64_t i = 0; i < n; i++) x->data[i] = -20.0f + 40.0f * (float)i / (float)n;
    ast_tensor *s = ast_silu(c, x), *e = ast_exp(c, x);
    for (int64_t i = 0; i < n; i += 97) {
        assert_close(s->data[i], silu_ref(x->data[i]), "silu", x->data[i]);
        assert_exp_close(e->data[i], x->data[i]);
    }
    assert_exp_close(e->data[n - 1], x->data[n - 1]);
    ast_ctx_free(c);
}

static ast_tensor *seeded_backward(ast_ctx *c, unary_fn f, ast_tensor *x, float gy)
{
    ast_tensor *y = f(c, x);
    float *seed = ast_alloc(c, (size_t)y->size * sizeof *seed);
    for (int64_t i = 0; i < y->size; i++) seed[i] = gy;
    ast_backward_seed(c, y, seed);
    return y;
}

/* Where the math is finite, so are the values and the gradients:
 * silu(x) -> x and silu'(x) -> 1 above, silu(x) -> -0 and silu'(x) -> 0
 * below; exp is finite up to 88.72283 (expf overflows just above it,
 * ln FLT_MAX = 88.7228391) and its gradient is the value. */
Test(ops_elementwise, silu_and_exp_stay_finite_for_large_inputs)
{
    const float big[12] = {-FLT_MAX, -1e30f, -1e4f, -200.0f, -100.0f, -88.0f,
                           88.0f, 100.0f, 200.0f, 1e4f, 1e30f, FLT_MAX};
    ast_params *p = ast_params_new(9);
    ast_tensor *x = gc_input(p, "x", 1, (int64_t[]){12}, 1.0f);
    memcpy(x->data, big, sizeof big);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = seeded_backward(c, ast_silu, x, 1.0f);
    for (int i = 0; i < 12; i++) {
        cr_assert(isfinite(y->data[i]) && isfinite(x->grad[i]), "silu(%g) = %g, grad %g", big[i], y->data[i],
                  x->grad[i]);
        if (big[i] > 0) {
            cr_assert_eq(y->data[i], big[i], "silu(%g) = %g", big[i], y->data[i]);
            cr_assert_eq(x->grad[i], 1.0f, "silu'(%g) = %g", big[i], x->grad[i]);
        } else {
            /* |x| e^x: 88 e^-88 = 5.6e-37 is the largest of these */
            cr_assert_leq(fabsf(y->data[i]), 1e-36f, "silu(%g) = %g", big[i], y->data[i]);
            cr_assert_leq(fabsf(x->grad[i]), 1e-36f, "silu'(%g) = %g", big[i], x->grad[i]);
        }
    }
    ast_ctx_free(c);

    const float ex[8] = {-FLT_MAX, -1e30f, -200.0f, -100.0f, -87.0f, 80.0f, 88.7f, 88.72283f};
    ast_tensor *x2 = gc_input(p, "x2", 1, (int64_t[]){8}, 1.0f);
    memcpy(x2->data, ex, sizeof ex);
    c = ast_ctx_new(0);
    y = seeded_backward(c, ast_exp, x2, 0.5f);
    for (int i = 0; i < 8; i++) {
        cr_assert(isfinite(y->data[i]) && isfinite(x2->grad[i]), "exp(%g) = %g, grad %g", ex[i], y->data[i],
                  x2->grad[i]);
        assert_exp_close(y->data[i], ex[i]);
        cr_assert_eq(x2->grad[i], 0.5f * y->data[i], "exp'(%g)", ex[i]);
    }
    cr_assert_eq(y->data[0], 0.0f, "exp(-FLT_MAX) underflows to 0");
    ast_ctx_free(c);
    c = ast_ctx_new(0);
    const float over[2] = {88.73f, 1000.0f};
    y = run_on(c, ast_exp, over, 2);
    cr_assert(isinf(y->data[0]) && isinf(y->data[1]), "exp overflows to +inf where expf does");
    ast_ctx_free(c);
    ast_params_free(p);
}

/* Same step and bound as the other activations (GRAD_TOL): silu and exp
 * are smooth, their third derivatives over the derivative are O(1) on
 * [-9, 9] (exp: exactly 1, so the truncation error is h^2 / 6 = 2e-5). */
Test(ops_elementwise, silu_and_exp_gradients)
{
    const struct { const char *name; unary_fn f; } fns[2] = {{"silu", ast_silu}, {"exp", ast_exp}};
    for (int k = 0; k < 2; k++) {
        ast_params *p = ast_params_new(310 + k);
        ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){4, 8}, 3.0f);
        gc_result r = gc_check(fwd_unary, &x, 1, (void *)&fns[k].f, 1e-2f, 1e-2);
        ASSERT_GRADS(r, "%s at x=%g: analytic %g numeric %g", fns[k].name, x->data[r.worst_index], r.analytic,
                     r.numeric);
        ast_params_free(p);
    }
}

/* silu at fixed points across both tails and its minimum (x = -1.2785). */
Test(ops_elementwise, silu_gradient_across_its_range)
{
    ast_params *p = ast_params_new(10);
    ast_tensor *x = gc_input(p, "x", 1, (int64_t[]){10}, 1.0f);
    const float at[10] = {-30.0f, -12.0f, -4.0f, -1.2785f, -0.3f, 0.0f, 0.7f, 4.0f, 12.0f, 30.0f};
    memcpy(x->data, at, sizeof at);
    unary_fn f = ast_silu;
    gc_result r = gc_check(fwd_unary, &x, 1, &f, 1e-2f, 1e-2);
    ASSERT_GRADS(r, "silu at x=%g: analytic %g numeric %g", at[r.worst_index], r.analytic, r.numeric);
    ast_params_free(p);
}

/* ---- key_mask_bias (ABI 2.1) ---------------------------------------------- */

#define MASKED_LOGIT 1e9f

/* What the plugins wrote by hand before the op existed. */
static ast_tensor *hand_written_bias(ast_ctx *c, ast_tensor *mask, float l)
{
    ast_tensor *m = ast_reshape(c, mask, 4, (int64_t[]){mask->shape[0], 1, 1, mask->shape[1]});
    return ast_affine(c, m, l, -l);
}

/* 0 is +0 for valid keys, so the logits they are added to keep their bits. */
Test(ops_elementwise, key_mask_bias_values)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *mask = ast_tensor_from(c, 2, (int64_t[]){2, 3}, (float[]){1, 0, 1, 0, 0, 1});
    ast_tensor *y = ast_key_mask_bias(c, mask, MASKED_LOGIT);
    const float want[6] = {0.0f, -1e9f, 0.0f, -1e9f, -1e9f, 0.0f};
    cr_assert_eq(y->ndim, 4);
    const int64_t shape[4] = {2, 1, 1, 3};
    for (int i = 0; i < 4; i++) cr_assert_eq(y->shape[i], shape[i], "dim %d", i);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(y->data[i], want[i], "element %d: %g", i, y->data[i]);
        cr_assert(!signbit(y->data[i]) || want[i] < 0, "element %d is -0", i);
    }
    cr_assert(!(y->flags & AST_REQUIRES_GRAD), "a plain mask records nothing");
    ast_ctx_free(c);
}

/* A drop-in replacement: the same bits as reshape + affine for binary
 * masks and for any other values, with several masked_logit values. */
Test(ops_elementwise, key_mask_bias_equals_the_hand_written_version_bit_for_bit)
{
    const float logits[4] = {1e9f, 1e4f, 3.5f, 0.1f};
    ast_params *p = ast_params_new(11);
    ast_tensor *soft = gc_input(p, "m", 2, (int64_t[]){3, 7}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *binary = ast_zeros(c, 2, (int64_t[]){3, 7});
    for (int i = 0; i < 21; i++) binary->data[i] = (float)((i * 5) % 3 != 0);
    for (int k = 0; k < 4; k++)
        for (int which = 0; which < 2; which++) {
            ast_tensor *m = which ? soft : binary;
            ast_tensor *y = ast_key_mask_bias(c, m, logits[k]), *ref = hand_written_bias(c, m, logits[k]);
            cr_assert_eq(y->size, ref->size);
            cr_assert(!memcmp(y->data, ref->data, (size_t)y->size * sizeof(float)),
                      "masked_logit %g, %s mask: bits differ", logits[k], which ? "real-valued" : "binary");
        }
    ast_ctx_free(c);
    ast_params_free(p);
}

/* As used: a padded key gets exactly zero attention, valid logits keep theirs. */
Test(ops_elementwise, key_mask_bias_zeroes_padded_keys_in_softmax)
{
    ast_params *p = ast_params_new(12);
    ast_tensor *logits = gc_input(p, "l", 4, (int64_t[]){2, 2, 3, 3}, 3.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *mask = ast_tensor_from(c, 2, (int64_t[]){2, 3}, (float[]){1, 1, 0, 1, 0, 1});
    ast_tensor *biased = ast_add(c, logits, ast_key_mask_bias(c, mask, MASKED_LOGIT));
    ast_tensor *pr = ast_softmax(c, biased, -1);
    for (int64_t i = 0; i < pr->size; i++) {
        int64_t b = i / 18, j = i % 3;
        if (mask->data[b * 3 + j] == 0.0f) cr_assert_eq(pr->data[i], 0.0f, "padded key %lld", (long long)i);
        else cr_assert_eq(biased->data[i], logits->data[i], "valid logit %lld changed", (long long)i);
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

typedef struct kmb_case {
    float l;
    int twice; /* also add the reshaped mask itself: the gradient accumulates */
} kmb_case;

static ast_tensor *fwd_kmb(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const kmb_case *k = ud;
    ast_tensor *y = ast_key_mask_bias(c, in[0], k->l);
    if (k->twice) y = ast_add(c, y, ast_reshape(c, in[0], 4, y->shape));
    return y;
}

/* d bias / d mask = masked_logit, exactly: gy * L is one rounding, as is
 * the sum with the other path's gy. The bias is linear in the mask, so the
 * finite differences have no truncation error (L = 3.5 keeps the outputs
 * small enough that their float rounding stays below 1e-5 relative). */
Test(ops_elementwise, key_mask_bias_gradients)
{
    for (int twice = 0; twice < 2; twice++) {
        ast_params *p = ast_params_new(13 + twice);
        ast_tensor *m = gc_input(p, "mask", 2, (int64_t[]){2, 5}, 1.0f);
        kmb_case k = {3.5f, twice};
        gc_result r = gc_check(fwd_kmb, &m, 1, &k, 1e-2f, 1e-2);
        ASSERT_GRADS(r, "twice=%d [%lld]: analytic %g numeric %g", twice, (long long)r.worst_index, r.analytic,
                     r.numeric);

        k.l = MASKED_LOGIT;
        memset(m->grad, 0, 10 * sizeof(float));
        ast_ctx *c = ast_ctx_new(0);
        ast_tensor *y = fwd_kmb(c, &m, &k);
        float seed[10];
        for (int i = 0; i < 10; i++) seed[i] = 0.25f * (float)(i - 4);
        ast_backward_seed(c, y, seed);
        for (int i = 0; i < 10; i++) {
            float want = twice ? seed[i] * MASKED_LOGIT + seed[i] : seed[i] * MASKED_LOGIT;
            cr_assert_eq(m->grad[i], want, "twice=%d mask.grad[%d] = %g, want %g", twice, i, m->grad[i], want);
        }
        ast_ctx_free(c);
        ast_params_free(p);
    }
}

/* A mask that needs no gradient gets none, while the logits still do. */
Test(ops_elementwise, key_mask_bias_leaves_a_plain_mask_alone)
{
    ast_params *p = ast_params_new(15);
    ast_tensor *logits = gc_input(p, "l", 4, (int64_t[]){1, 2, 2, 2}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *mask = ast_tensor_from(c, 2, (int64_t[]){1, 2}, (float[]){1, 0});
    ast_tensor *y = ast_add(c, logits, ast_key_mask_bias(c, mask, MASKED_LOGIT));
    float seed[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    ast_backward_seed(c, y, seed);
    cr_assert_null(mask->grad, "the mask got a gradient buffer");
    for (int i = 0; i < 8; i++) cr_assert_eq(logits->grad[i], seed[i], "logits.grad[%d]", i);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ops_elementwise, key_mask_bias_rejects_a_mask_that_is_not_2d, .signal = SIGABRT)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_key_mask_bias(c, ast_zeros(c, 3, (int64_t[]){2, 3, 1}), MASKED_LOGIT);
}

Test(ops_elementwise, key_mask_bias_rejects_an_infinite_logit, .signal = SIGABRT)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_key_mask_bias(c, ast_zeros(c, 2, (int64_t[]){2, 3}), INFINITY);
}

/* The 2.1 ops sit in the host's table after the 2.0 ones, and the CPU
 * backend has kernels for them. */
Test(ops_elementwise, the_2_1_ops_are_in_the_tables)
{
    const ast_host *h = ast_host_table();
    cr_assert_eq(h->abi_major, 2);
    cr_assert_geq(h->abi_minor, 1);
    cr_assert_geq(h->ops->n_ops, 34);
    cr_assert_eq(offsetof(ast_ops, key_mask_bias), 8 + 8 * 33);
    cr_assert(h->ops->silu == ast_silu && h->ops->exp == ast_exp && h->ops->key_mask_bias == ast_key_mask_bias);
    const ast_op_kernel *cpu = ast_backend_cpu()->kernels;
    cr_assert_eq(AST_N_OPS, h->ops->n_ops);
    cr_assert(cpu[AST_OP_silu].forward && cpu[AST_OP_exp].forward && cpu[AST_OP_key_mask_bias].forward);
}
