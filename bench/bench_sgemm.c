/* The machine's attainable float32 GEMM rate with the same OpenBLAS and
 * thread count: the yardstick for the model's GFLOP/s. */
#include <cblas.h>
#include <stdlib.h>

#include "bench.h"

double bench_sgemm_peak(int n, int reps)
{
    size_t nn = (size_t)n * n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        return 0.0;
    }
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)(i % 7) * 0.25f - 0.75f;
        b[i] = (float)(i % 5) * 0.5f - 1.0f;
    }
    double best = 0.0;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double dt = bench_now() - t0, rate = 2.0 * (double)n * n * n / dt * 1e-9;
        if (rate > best) best = rate;
    }
    free(a), free(b), free(c);
    return best;
}

void bench_sgemm_child(const void *arg, bench_timing *out)
{
    openblas_set_num_threads(bench_threads());
    out->value = bench_sgemm_peak(2048, 5);
    out->threads = openblas_get_num_threads();
    out->ok = out->value > 0;
    if (!out->ok) snprintf(out->error, sizeof out->error, "out of memory for the 2048^3 sgemm");
}

/* ---- the model's GEMMs, OpenBLAS against oneDNN (--sections gemm) ----- */

/* A linear of in -> out on M = B N tokens runs three GEMMs: the forward
 * Y = X W^T, the input gradient dX = dY W and the weight gradient
 * dW = dY^T X (ops_linalg.c); attention's bmm runs [N x dh] x [dh x N]
 * and [N x N] x [N x dh] per set and head. */
typedef struct gemm_shape {
    const char *what;
    int ta, tb, m, n, k;
} gemm_shape;

#define LINEAR(name, in, out)                                                                                     \
    {name " fwd", 0, 1, M, out, in}, {name " dX", 0, 0, M, in, out}, { name " dW", 1, 0, out, in, M }
enum { M = 2048, N_CELLS = 512 };
static const gemm_shape shapes[] = {
    LINEAR("genes->E256", 2000, 256), LINEAR("genes->E128", 2000, 128), LINEAR("E256->F1024", 256, 1024),
    LINEAR("F1024->E256", 1024, 256), LINEAR("E256->qkv768", 256, 768), LINEAR("E256->E256", 256, 256),
    {"attn QK^T dh32", 0, 1, N_CELLS, N_CELLS, 32}, {"attn PV dh32", 0, 0, N_CELLS, 32, N_CELLS},
    /* small ones: a gated-attention tile (plugins' host->sgemm inside a
     * pool job) and a demo-size linear (200 tokens, E=128, F=512) */
    {"tile QK^T 64", 0, 1, 64, 64, 32}, {"tile PV 64", 0, 0, 64, 32, 64}, {"demo E128->F512 fwd", 0, 1, 200, 512, 128},
};

/* Threads of this process now (/proc/self/status): the pool's, plus any
 * OpenMP team oneDNN would have started. */
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

static float *filled(size_t n, int seed)
{
    float *v = ast_xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = (float)((i * 2654435761u + (size_t)seed) % 17) * 0.125f - 1.0f;
    return v;
}

/* Best rate over reps of the shape through ast_sgemm with library l
 * (after two untimed calls: primitives made, buffers grown). */
static double time_shape(const gemm_shape *s, ast_gemm_library l, int reps)
{
    char why[256];
    if (!ast_gemm_use(l, why, sizeof why)) return 0.0;
    int lda = s->ta ? s->m : s->k, ldb = s->tb ? s->k : s->n;
    float *a = filled((size_t)s->m * s->k, 1), *b = filled((size_t)s->k * s->n, 2), *c = filled((size_t)s->m * s->n, 3);
    double best = 0.0;
    for (int r = -2; r < reps; r++) {
        double t0 = bench_now();
        ast_sgemm(s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, lda, b, ldb, 0.0f, c, s->n);
        double rate = 2.0 * s->m * s->n * s->k / (bench_now() - t0) * 1e-9;
        if (r >= 0 && rate > best) best = rate;
    }
    free(a), free(b), free(c);
    return best;
}

void bench_gemm_table(bench_json *j, int reps)
{
    int pool = ast_parallel_threads(), after_openblas = 0;
    printf("\nfloat32 GEMMs at the reference model's shapes (M = 4 x 512 tokens): best of %d, GFLOP/s, "
           "%d pool threads\n", reps, pool);
    printf("%-22s %2s %2s %6s %6s %6s %10s %10s %7s %8s\n", "GEMM", "tA", "tB", "m", "n", "k", "OpenBLAS", "oneDNN",
           "ratio", "auto");
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const gemm_shape *s = &shapes[i];
        double ob = time_shape(s, AST_GEMM_OPENBLAS, reps);
        if (!i) after_openblas = process_threads();
        double dn = time_shape(s, AST_GEMM_ONEDNN, reps);
        ast_gemm_use(AST_GEMM_AUTO, NULL, 0);
        const char *pick = ast_gemm_library_name(ast_gemm_library_for(s->ta, s->tb, s->m, s->n, s->k));
        printf("%-22s %2d %2d %6d %6d %6d %10.1f %10.1f %7.2f %8s\n", s->what, s->ta, s->tb, s->m, s->n, s->k, ob, dn,
               ob > 0 ? dn / ob : 0.0, pick);
        bench_json_gemm(j, s->what, (int[5]){s->ta, s->tb, s->m, s->n, s->k}, ob, dn, pick);
    }
    printf("threads in this process: %d after the OpenBLAS GEMMs, %d after the oneDNN ones\n", after_openblas,
           process_threads());
}
