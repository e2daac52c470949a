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
