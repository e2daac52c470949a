/* The bf16 mode (ast_ctx_set_precision): the GEMMs of linear, matmul and
 * bmm, forward and backward, with operands rounded to bf16 and float32
 * accumulation (oneDNN), against exact sums and against float32, within
 * the rounding bound derived below; and its refusal where the CPU cannot.
 * Skipped where this build has no oneDNN or the CPU no AVX512-BF16 / AMX.
 *
 * The bound. bf16 keeps 8 significant bits, so rounding to nearest gives
 * x~ = x (1 + d), |d| <= u = 2^-8. A product of two rounded operands is
 * then off by at most (1 + u)^2 - 1 = 2u + u^2 of |a b|, and float32
 * summation of those K products (and of C, or the bias, when added) adds
 * at most gamma_{K+1} = (K+1) 2^-24 / (1 - (K+1) 2^-24) of the sum of their
 * magnitudes, in any order oneDNN sums them. So each element obeys
 *     |c~ - c| <= beta_K S,  beta_K = 2u + u^2 + gamma_{K+1} (1 + u)^2,
 * with S = sum_k |a_ik| |b_kj| (+ |C| or |bias|): rigorous for any input.
 * With random signs c itself is ~sqrt(K) |a||b| while S ~ K |a||b|, so
 * relative to c the bound grows as 2^-7 sqrt(K): the "2^-8 sqrt(K)" of a
 * length-K dot product. Against float32 (OpenBLAS, within gamma_{K+1} S)
 * the difference is within beta_K S + gamma_{K+1} S.
 *
 * The bound alone would pass a GEMM that never rounded (float32 is within
 * it too), so the size of the error is checked as well: scaled by
 * sqrt(sum_k (a_ik b_kj)^2), errors of independent roundings have an RMS
 * of sqrt(E d1^2 + E d2^2). Rounding to nearest leaves |d| uniform up to
 * 2^-8 / m for a mantissa m in [1, 2): E d^2 = 2^-16 / 3 E[1/m^2] = 0.18 x
 * 2^-16 for the near log-uniform mantissas of Gaussian data, so the RMS is
 * 0.60 x 2^-8. Float32 gives ~1e-5 of that; truncation toward zero (a
 * wrong conversion) 1.6 x 2^-8 (4x the variance, plus a bias). The test
 * wants 0.45 to 0.80 x 2^-8 over 16,384 elements, where the RMS is known
 * to ~1%. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gemm_reference.h"
#include "gradcheck.h"

#define U_BF16 0x1p-8
#define U_F32 0x1p-24

static double gamma_f32(int n) { return n * U_F32 / (1.0 - n * U_F32); }
static double bf16_bound(int k)
{
    return 2 * U_BF16 + U_BF16 * U_BF16 + gamma_f32(k + 1) * (1 + U_BF16) * (1 + U_BF16);
}

static void need_bf16(void)
{
    char why[256];
    if (!ast_bf16_supported(why, sizeof why)) cr_skip_test("no bf16 mode here: %s", why);
}

typedef struct gemm_case {
    int ta, tb, m, n, k, pad; /* pad: extra columns of every leading dimension */
    float beta;
    int bias;
} gemm_case;

typedef struct error_stats {
    double sum_z2; /* squared errors over sqrt(sum (a b)^2), summed */
    int64_t count;
} error_stats;

/* One bf16 GEMM through ast_gemm against double sums: every element within
 * the bound; the scaled errors added to st. */
static void check_gemm(const gemm_case *t, ast_rng *r, error_stats *st)
{
    int ra = t->ta ? t->k : t->m, ca = t->ta ? t->m : t->k, rb = t->tb ? t->n : t->k, cb = t->tb ? t->k : t->n;
    int lda = ca + t->pad, ldb = cb + t->pad, ldc = t->n + t->pad;
    float *a = gauss(r, (int64_t)ra * lda), *b = gauss(r, (int64_t)rb * ldb), *c = gauss(r, (int64_t)t->m * ldc);
    float *bias = t->bias ? gauss(r, t->n) : NULL, *c0 = malloc((size_t)t->m * ldc * sizeof *c0);
    memcpy(c0, c, (size_t)t->m * ldc * sizeof *c);
    ast_gemm(AST_PRECISION_BF16, t->ta, t->tb, t->m, t->n, t->k, a, lda, b, ldb, t->beta, c, ldc, bias);
    double beta_k = bf16_bound(t->k);
    for (int i = 0; i < t->m; i++)
        for (int j = 0; j < t->n; j++) {
            double exact = bias ? bias[j] : t->beta * c0[(int64_t)i * ldc + j], s = fabs(exact), s2 = 0.0;
            for (int p = 0; p < t->k; p++) {
                double prod = op_a(a, t->ta, lda, i, p) * op_b(b, t->tb, ldb, p, j);
                exact += prod, s += fabs(prod), s2 += prod * prod;
            }
            double err = c[(int64_t)i * ldc + j] - exact;
            cr_assert_leq(fabs(err), beta_k * s, "ta %d tb %d [%d x %d x %d]: c[%d,%d] = %.9g, exact %.9g, bound %.3g",
                          t->ta, t->tb, t->m, t->n, t->k, i, j, c[(int64_t)i * ldc + j], exact, beta_k * s);
            st->sum_z2 += err * err / s2, st->count++;
        }
    for (int i = 0; i < t->m; i++) /* the padding of C is not C's */
        for (int j = t->n; j < ldc; j++) cr_assert_eq(c[(int64_t)i * ldc + j], c0[(int64_t)i * ldc + j]);
    free(a), free(b), free(c), free(c0), free(bias);
}

/* Every transpose; C in one part, and split over the pool by its rows
 * (m >= n) and by its columns (n > m); strided operands, accumulation into
 * C, a bias. */
Test(bf16, gemm_within_the_rounding_bound)
{
    need_bf16();
    ast_rng r;
    ast_rng_seed(&r, 7);
    error_stats st = {0};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const gemm_case cases[] = {
                {ta, tb, 3, 5, 4, 0, 0.0f, 0},      {ta, tb, 300, 40, 256, 0, 0.0f, 1},
                {ta, tb, 20, 500, 64, 3, 1.0f, 0},  {ta, tb, 129, 33, 1255, 1, 0.5f, 0},
                {ta, tb, 40, 600, 256, 2, 0.0f, 1}, {ta, tb, 96, 520, 128, 0, 1.0f, 0},
                {ta, tb, 1, 1, 1, 0, 0.0f, 1},
            };
            for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_gemm(&cases[i], &r, &st);
        }
    cr_assert_gt(st.count, 0);
}

/* The errors have the size of bf16 rounding to nearest (see the top). */
Test(bf16, errors_are_those_of_rounding_to_nearest)
{
    need_bf16();
    ast_rng r;
    ast_rng_seed(&r, 8);
    error_stats st = {0};
    check_gemm(&(gemm_case){0, 1, 128, 128, 256, 0, 0.0f, 0}, &r, &st);
    double rms = sqrt(st.sum_z2 / (double)st.count) / U_BF16;
    cr_log_info("RMS scaled error %.3f x 2^-8 over %lld elements", rms, (long long)st.count);
    cr_assert(rms > 0.45 && rms < 0.80, "RMS scaled error %.3f x 2^-8: not bf16 rounding to nearest", rms);
}

/* ---- the ops: forward and gradients against float32 ------------------------ */

typedef struct op_run {
    float *out[4]; /* y, then each input's gradient */
    int64_t size[4];
} op_run;

/* f's output and input gradients in precision p, for the upstream gradient
 * r ~ N(0, 1) drawn from a fixed seed. With `magnitudes`, of |inputs| and
 * |r| in float32 instead: f is linear in each GEMM operand, so that gives
 * S = sum |a| |b| of every element of the output and of each gradient. */
static op_run run_op(gc_forward f, void *ud, ast_params *p, ast_tensor *const *in, int n_in, ast_precision prec,
                     int magnitudes)
{
    op_run o = {{0}, {0}};
    float *saved[3] = {0};
    for (int i = 0; magnitudes && i < n_in; i++) {
        saved[i] = malloc((size_t)in[i]->size * sizeof(float));
        memcpy(saved[i], in[i]->data, (size_t)in[i]->size * sizeof(float));
        for (int64_t j = 0; j < in[i]->size; j++) in[i]->data[j] = fabsf(in[i]->data[j]);
    }
    ast_params_zero_grad(p);
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_precision(c, prec);
    ast_tensor *y = f(c, in, ud);
    ast_rng r;
    ast_rng_seed(&r, 99);
    float *seed = gauss(&r, y->size);
    for (int64_t j = 0; magnitudes && j < y->size; j++) seed[j] = fabsf(seed[j]);
    ast_backward_seed(c, y, seed);
    for (int i = 0; i <= n_in; i++) {
        const float *src = i ? in[i - 1]->grad : y->data;
        o.size[i] = i ? in[i - 1]->size : y->size;
        o.out[i] = malloc((size_t)o.size[i] * sizeof(float));
        memcpy(o.out[i], src, (size_t)o.size[i] * sizeof(float));
    }
    ast_ctx_free(c);
    free(seed);
    for (int i = 0; magnitudes && i < n_in; i++) {
        memcpy(in[i]->data, saved[i], (size_t)in[i]->size * sizeof(float));
        free(saved[i]);
    }
    return o;
}

static void op_run_free(op_run *o)
{
    for (int i = 0; i < 4; i++) free(o->out[i]);
}

/* bf16 against float32 for the output and the gradients of the first
 * n_gemm inputs (the GEMM operands), within (beta_K + gamma_{K+1}) S, K the
 * longest sum of any of the op's GEMMs; and not equal to float32 anywhere
 * (else that GEMM did not run in bf16). Inputs after those (a bias) get
 * their gradient from a column sum in float32 in both modes: equal. S is
 * summed in float32, of positive terms: within gamma_{K+1} of itself. */
static void compare_op(const char *name, gc_forward f, void *ud, ast_params *p, ast_tensor *const *in, int n_in,
                       int n_gemm, int k)
{
    op_run f32 = run_op(f, ud, p, in, n_in, AST_PRECISION_FP32, 0);
    op_run b16 = run_op(f, ud, p, in, n_in, AST_PRECISION_BF16, 0);
    op_run s = run_op(f, ud, p, in, n_in, AST_PRECISION_FP32, 1);
    double bound = (bf16_bound(k) + gamma_f32(k + 1)) * (1.0 + gamma_f32(k + 1));
    for (int i = 0; i <= n_in; i++) {
        double differs = 0.0;
        for (int64_t j = 0; j < f32.size[i]; j++) {
            double d = fabs((double)b16.out[i][j] - f32.out[i][j]);
            differs = fmax(differs, d);
            if (i > n_gemm)
                cr_assert_eq(b16.out[i][j], f32.out[i][j], "%s: input %d's gradient [%lld]", name, i - 1, (long long)j);
            else
                cr_assert_leq(d, bound * s.out[i][j], "%s: %s%d [%lld]: bf16 %.9g, float32 %.9g, bound %.3g", name,
                              i ? "gradient of input " : "output", i - 1, (long long)j, b16.out[i][j], f32.out[i][j],
                              bound * s.out[i][j]);
        }
        if (i <= n_gemm)
            cr_assert_gt(differs, 0.0, "%s: %s%d is float32's exactly", name, i ? "gradient of input " : "output", i - 1);
    }
    op_run_free(&f32), op_run_free(&b16), op_run_free(&s);
}

static ast_tensor *fwd_linear(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    return ast_linear(c, in[0], in[1], ud ? NULL : in[2]);
}

Test(bf16, linear_and_its_gradients_follow_float32)
{
    need_bf16();
    ast_params *p = ast_params_new(11);
    ast_tensor *in[3] = {gc_input(p, "x", 3, (int64_t[]){2, 50, 96}, 1.0f),
                         gc_input(p, "w", 2, (int64_t[]){40, 96}, 1.0f), gc_input(p, "b", 1, (int64_t[]){40}, 1.0f)};
    compare_op("linear", fwd_linear, NULL, p, in, 3, 2, 100);
    compare_op("linear without bias", fwd_linear, "no bias", p, in, 2, 2, 100);
    ast_params_free(p);
}

typedef struct {
    int ta, tb;
} bmm_flags;

static ast_tensor *fwd_bmm(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const bmm_flags *fl = ud;
    return fl ? ast_bmm(c, in[0], in[1], fl->ta, fl->tb) : ast_matmul(c, in[0], in[1]);
}

Test(bf16, matmul_bmm_and_their_gradients_follow_float32)
{
    need_bf16();
    const int B = 3, M = 24, K = 40, N = 56;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            ast_params *p = ast_params_new(12 + 2 * ta + tb);
            ast_tensor *in[2] = {gc_input(p, "a", 3, ta ? (int64_t[]){B, K, M} : (int64_t[]){B, M, K}, 1.0f),
                                 gc_input(p, "b", 3, tb ? (int64_t[]){B, N, K} : (int64_t[]){B, K, N}, 1.0f)};
            char name[32];
            snprintf(name, sizeof name, "bmm ta %d tb %d", ta, tb);
            compare_op(name, fwd_bmm, &(bmm_flags){ta, tb}, p, in, 2, 2, N);
            ast_params_free(p);
        }
    ast_params *p = ast_params_new(20);
    ast_tensor *in[2] = {gc_input(p, "a", 2, (int64_t[]){64, 80}, 1.0f),
                         gc_input(p, "b", 2, (int64_t[]){80, 48}, 1.0f)};
    compare_op("matmul", fwd_bmm, NULL, p, in, 2, 2, 80);
    ast_params_free(p);
}

/* ---- threads and refusal ------------------------------------------------ */

static int threads_now(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8)) n = atoi(line + 8);
    if (f) fclose(f);
    return n;
}

/* oneDNN runs on the pool's threads, one part each: it starts none of its
 * own (an OpenMP team per pool thread would, were it not held to one). */
Test(bf16, runs_on_the_pool_threads_alone)
{
    need_bf16();
    ast_rng r;
    ast_rng_seed(&r, 9);
    error_stats st = {0};
    check_gemm(&(gemm_case){0, 0, 64, 64, 64, 0, 0.0f, 0}, &r, &st); /* starts the pool */
    int before = threads_now();
    cr_assert_geq(before, ast_parallel_threads());
    check_gemm(&(gemm_case){0, 1, 512, 64, 256, 0, 0.0f, 1}, &r, &st);
    check_gemm(&(gemm_case){1, 0, 64, 512, 256, 0, 1.0f, 0}, &r, &st);
    cr_assert_eq(threads_now(), before, "oneDNN started threads of its own (%d threads, %d before; pool of %d)",
                 threads_now(), before, ast_parallel_threads());
}

#if AST_HAVE_ONEDNN
/* ONEDNN_MAX_CPU_ISA holds oneDNN below AVX512-BF16, as a CPU without it
 * would: the mode is refused, saying why, rather than emulated. */
Test(bf16, refused_on_a_cpu_without_bf16_instructions)
{
    setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE", 1);
    char why[256];
    cr_assert_eq(ast_bf16_supported(why, sizeof why), 0, "accepted: %s", why);
    cr_assert(strstr(why, "this CPU has neither AVX512-BF16 nor AMX (oneDNN 2."), "%s", why);
    /* The ISA named is avx512_core under the cap, or less on a CPU
     * without AVX-512 (avx2 on an AMD Zen 3): either way the cap's or below. */
    const char *isa = strstr(why, "'s best instruction set here is ");
    cr_assert(isa && (!strncmp(isa + 32, "avx512_core;", 12) || !strncmp(isa + 32, "avx2", 4) ||
                      !strncmp(isa + 32, "avx;", 4) || !strncmp(isa + 32, "sse41;", 6)),
              "%s", why);
    cr_assert(strstr(why, "; ONEDNN_MAX_CPU_ISA can lower it), and bf16 would only be emulated"), "%s", why);
}
#else
Test(bf16, refused_by_a_build_without_onednn)
{
    char why[256];
    cr_assert_eq(ast_bf16_supported(why, sizeof why), 0);
    cr_assert_str_eq(why, "this alphast was built without oneDNN (install it with apt-get install libdnnl-dev, then "
                          "run configure and make again)");
}
#endif
