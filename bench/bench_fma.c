/* bench_fma: one core's float32 FMA peak, the hard ceiling under any GEMM
 * (docs/benchmarks.md, "What the arithmetic allows"): 12 independent
 * vector FMA chains, enough to fill two FMA ports of 4-cycle latency, for
 * about a second. Run one per core at once for a machine's peak. Built for
 * the vector width the compiler targets (AVX-512 or AVX2 with FMA);
 * `make bench-fma`. */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

#define CHAINS 12
#define ROUNDS 200000000L

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define STORE _mm512_storeu_ps
#elif defined(__FMA__) && defined(__AVX__)
typedef __m256 vec;
#define LANES 8
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define STORE _mm256_storeu_ps
#endif

int main(void)
{
#ifdef LANES
    vec acc[CHAINS], m = SET1(0.999999f), c = SET1(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = SET1((float)i);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* spelled out, so that the chains stay in registers */
    for (long r = 0; r < ROUNDS; r++) {
        acc[0] = FMA(acc[0], m, c), acc[1] = FMA(acc[1], m, c), acc[2] = FMA(acc[2], m, c);
        acc[3] = FMA(acc[3], m, c), acc[4] = FMA(acc[4], m, c), acc[5] = FMA(acc[5], m, c);
        acc[6] = FMA(acc[6], m, c), acc[7] = FMA(acc[7], m, c), acc[8] = FMA(acc[8], m, c);
        acc[9] = FMA(acc[9], m, c), acc[10] = FMA(acc[10], m, c), acc[11] = FMA(acc[11], m, c);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    float out[LANES], check = 0.0f;
    for (int i = 0; i < CHAINS; i++) {
        STORE(out, acc[i]);
        check += out[0];
    }
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    double flops = 2.0 * LANES * CHAINS * (double)ROUNDS;
    printf("%.1f GFLOP/s float32 FMA on one core, %d lanes (%.2f s; %g)\n", flops / s * 1e-9, LANES, s, check);
    return 0;
#else
    fputs("bench_fma: built without AVX-512 or AVX2+FMA (configure with -march=native on such a CPU)\n", stderr);
    return 1;
#endif
}
