/* The float32 GEMM on oneDNN (ALPHAST_GEMM=onednn, gemm_onednn.c) against
 * exact sums and against OpenBLAS, for every transpose the engine uses,
 * odd shapes, strided operands, alpha, beta and a bias; its bits the same
 * on every run; and the choice of library (auto, the override, a bad
 * ALPHAST_GEMM). Skipped where this build has no oneDNN.
 *
 * The bound. Each element of C = alpha op(A) op(B) + beta C is k products
 * summed (k - 1 additions), scaled by alpha and added to beta C: at most
 * k + 3 roundings on any path, so in float32, in any order of summation
 * either library picks, |c~ - c| <= gamma_{k+3} S with gamma_n =
 * n u / (1 - n u), u = 2^-24, and S = sum_p |alpha a_ip b_pj| + |beta c_ij|
 * (or |bias_j|): rigorous for any input. The two libraries then differ by
 * at most twice that. A wrong transpose, a lost alpha or beta or a part
 * written twice is off by ~S, ~2^20 times the bound. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gemm_reference.h"
#include "gradcheck.h"

#define U_F32 0x1p-24

static double gamma_f32(int n) { return n * U_F32 / (1.0 - n * U_F32); }

static void need_onednn(void)
{
    char why[256];
    if (!ast_gemm_use(AST_GEMM_ONEDNN, why, sizeof why)) cr_skip_test("no oneDNN here: %s", why);
}

typedef struct gemm_case {
    int ta, tb, m, n, k, pad; /* pad: extra columns of every leading dimension */
    float alpha, beta;
    int bias;
} gemm_case;

/* C after the case's GEMM on library l, from the same c0. */
static float *run(ast_gemm_library l, const gemm_case *t, const float *a, const float *b, const float *c0,
                  const float *bias, int lda, int ldb, int ldc)
{
    cr_assert(ast_gemm_use(l, NULL, 0));
    float *c = malloc((size_t)t->m * ldc * sizeof *c);
    memcpy(c, c0, (size_t)t->m * ldc * sizeof *c);
    ast_sgemm_bias(t->ta, t->tb, t->m, t->n, t->k, t->alpha, a, lda, b, ldb, t->beta, c, ldc, bias);
    return c;
}

static void check_case(const gemm_case *t, ast_rng *r)
{
    int ra = t->ta ? t->k : t->m, ca = t->ta ? t->m : t->k, rb = t->tb ? t->n : t->k, cb = t->tb ? t->k : t->n;
    int lda = ca + t->pad, ldb = cb + t->pad, ldc = t->n + t->pad;
    float *a = gauss(r, (int64_t)ra * lda), *b = gauss(r, (int64_t)rb * ldb), *c0 = gauss(r, (int64_t)t->m * ldc);
    float *bias = t->bias ? gauss(r, t->n) : NULL;
    float *dn = run(AST_GEMM_ONEDNN, t, a, b, c0, bias, lda, ldb, ldc);
    float *again = run(AST_GEMM_ONEDNN, t, a, b, c0, bias, lda, ldb, ldc);
    float *ob = run(AST_GEMM_OPENBLAS, t, a, b, c0, bias, lda, ldb, ldc);
    cr_assert(!memcmp(dn, again, (size_t)t->m * ldc * sizeof *dn), "oneDNN gave other bits the second time");
    double g = gamma_f32(t->k + 3);
    for (int i = 0; i < t->m; i++)
        for (int j = 0; j < t->n; j++) {
            int64_t at = (int64_t)i * ldc + j;
            double exact = bias ? bias[j] : (double)t->beta * c0[at], s = fabs(exact);
            for (int p = 0; p < t->k; p++) {
                double prod = (double)t->alpha * op_a(a, t->ta, lda, i, p) * op_b(b, t->tb, ldb, p, j);
                exact += prod, s += fabs(prod);
            }
            cr_assert_leq(fabs(dn[at] - exact), g * s, "ta %d tb %d [%d x %d x %d] ld+%d: c[%d,%d] = %.9g, exact %.9g",
                          t->ta, t->tb, t->m, t->n, t->k, t->pad, i, j, dn[at], exact);
            cr_assert_leq(fabs(dn[at] - ob[at]), 2 * g * s, "c[%d,%d]: oneDNN %.9g, OpenBLAS %.9g", i, j, dn[at],
                          ob[at]);
        }
    for (int i = 0; i < t->m; i++) /* the padding of C is not C's */
        for (int j = t->n; j < ldc; j++) cr_assert_eq(dn[(int64_t)i * ldc + j], c0[(int64_t)i * ldc + j]);
    free(a), free(b), free(c0), free(bias), free(dn), free(again), free(ob);
}

/* Every transpose; one row, one column, k = 1, sizes that are no multiple
 * of 16; C in one part and split over the pool by rows (m >= n) and by
 * columns; strided operands; alpha, beta and a bias. */
Test(gemm_onednn, equals_openblas_within_the_rounding_bound)
{
    need_onednn();
    ast_rng r;
    ast_rng_seed(&r, 11);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            const gemm_case cases[] = {
                {ta, tb, 1, 37, 53, 0, 1.0f, 0.0f, 0},    {ta, tb, 29, 1, 17, 0, 1.0f, 0.0f, 0},
                {ta, tb, 19, 23, 1, 0, 1.0f, 0.0f, 0},    {ta, tb, 37, 45, 61, 3, 1.0f, 0.0f, 0},
                {ta, tb, 301, 70, 45, 0, 1.0f, 1.0f, 0},  {ta, tb, 40, 259, 33, 5, 1.0f, 0.5f, 0},
                {ta, tb, 130, 96, 200, 1, 0.37f, 0.0f, 0}, {ta, tb, 257, 33, 65, 2, 1.0f, 0.0f, 1},
                {ta, tb, 64, 300, 128, 0, 0.125f, 1.0f, 0},
            };
            for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], &r);
        }
}

/* The override names the library of every shape; auto picks one of them. */
Test(gemm_onednn, the_override_decides)
{
    need_onednn();
    cr_assert_eq(ast_gemm_library_for(0, 1, 2048, 256, 2000), AST_GEMM_ONEDNN);
    cr_assert(ast_gemm_use(AST_GEMM_OPENBLAS, NULL, 0));
    cr_assert_eq(ast_gemm_library_for(0, 1, 2048, 256, 2000), AST_GEMM_OPENBLAS);
    cr_assert(ast_gemm_use(AST_GEMM_AUTO, NULL, 0));
    ast_gemm_library l = ast_gemm_library_for(1, 0, 256, 2000, 2048);
    cr_assert(l == AST_GEMM_OPENBLAS || l == AST_GEMM_ONEDNN);
    cr_assert_str_eq(ast_gemm_library_name(AST_GEMM_ONEDNN), "onednn");
}

/* ALPHAST_GEMM, read at the first GEMM of a child: a bad value ends it
 * with status 2 (and one line on stderr); a good one is obeyed. */
static int child_status(const char *value)
{
    pid_t pid = fork();
    if (pid == 0) {
        setenv("ALPHAST_GEMM", value, 1);
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        float a = 2.0f, b = 3.0f, c = 0.0f;
        ast_sgemm(0, 0, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1);
        _exit(c == 6.0f && ast_gemm_library_for(0, 0, 1, 1, 1) == AST_GEMM_OPENBLAS ? 0 : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(gemm_onednn, alphast_gemm_from_the_environment)
{
    cr_assert_eq(child_status("mkl"), 2);
    cr_assert_eq(child_status("openblas"), 0);
}

/* Threads of this process (/proc/self/status). */
static int process_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    if (f) fclose(f);
    return n;
}

/* oneDNN runs each part on the pool thread that holds it: a GEMM split
 * over the pool starts no OpenMP team (which would oversubscribe the
 * cores the pool already fills). */
Test(gemm_onednn, starts_no_threads_of_its_own)
{
    need_onednn();
    ast_rng r;
    ast_rng_seed(&r, 5);
    const gemm_case t = {0, 1, 512, 256, 300, 0, 1.0f, 0.0f, 0};
    float *a = gauss(&r, 512 * 300), *b = gauss(&r, 256 * 300), *c = gauss(&r, 512 * 256);
    free(run(AST_GEMM_OPENBLAS, &t, a, b, c, NULL, 300, 300, 256));
    int before = process_threads();
    free(run(AST_GEMM_ONEDNN, &t, a, b, c, NULL, 300, 300, 256));
    cr_assert_eq(process_threads(), before, "%d threads with OpenBLAS, %d after oneDNN (pool of %d)", before,
                 process_threads(), ast_parallel_threads());
    free(a), free(b), free(c);
}
