/* The structural prior's cost per set (docs/model.md §2.12): training
 * computes it for every set of every step, so it must stay small beside
 * the step. `make bench-prior`: per N, the mean milliseconds of one
 * set's Isomap and MDS prior over a few sets of synthetic expression the
 * size of Visium's (1,255 genes): a smooth function of a 2-D position (so
 * the k-NN graph has a manifold to follow) plus noise. Wall time, and the
 * process's CPU time, which a machine shared with other jobs inflates
 * less (with OPENBLAS_NUM_THREADS=1, one core's time). Last, a training
 * step's batch of Visium's size, its sets computed on the thread pool. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "engine/engine.h"
#include "model/prior.h"

#define GENES 1255
#define K 10

static void synthetic_set(ast_rng *rng, int n, float *expr)
{
    for (int i = 0; i < n; i++) {
        double x = ast_rng_uniform01(rng) * 6.0, y = ast_rng_uniform01(rng) * 6.0;
        for (int g = 0; g < GENES; g++) {
            double f = sin(x * (1 + g % 3) + g) + cos(y * (1 + g % 5) - g);
            expr[(size_t)i * GENES + g] = (float)(fmax(f, 0.0) + 0.3 * ast_rng_gauss(rng));
        }
    }
}

/* Mean wall and CPU seconds per set into out[0], out[1]. */
static void seconds_per_set(ast_prior_kind kind, int n, int sets, ast_rng *rng, double out[2])
{
    float *expr = ast_xmalloc((size_t)n * GENES * sizeof *expr), *pos = ast_xmalloc((size_t)n * 3 * sizeof *pos);
    ast_prior_config pc = {kind, 2, K, 0};
    out[0] = out[1] = 0.0;
    for (int s = 0; s < sets; s++) {
        synthetic_set(rng, n, expr);
        double wall = bench_now(), cpu = bench_cpu_now();
        ast_prior_set(&pc, n, GENES, expr, NULL, pos, NULL);
        out[0] += (bench_now() - wall) / sets, out[1] += (bench_cpu_now() - cpu) / sets;
    }
    free(expr), free(pos);
}

/* A training step's batch through ast_prior_batch (no cache, as every
 * step's sets are new): the sets computed a set per thread of the pool.
 * Mean wall milliseconds per batch of `sets` sets of n cells. */
static double batch_ms(int n, int sets, int reps, ast_rng *rng)
{
    float *expr = ast_xmalloc((size_t)sets * n * GENES * sizeof *expr), *pos = ast_xmalloc((size_t)sets * n * 3 * sizeof *pos);
    ast_prior_config pc = {AST_PRIOR_ISOMAP, 2, K, 0};
    for (int s = 0; s < sets; s++) synthetic_set(rng, n, expr + (size_t)s * n * GENES);
    double wall = bench_now();
    for (int r = 0; r < reps; r++) ast_prior_batch(NULL, &pc, sets, n, GENES, expr, NULL, pos, NULL);
    free(expr), free(pos);
    return 1e3 * (bench_now() - wall) / reps;
}

int main(void)
{
    static const int sizes[] = {64, 256, 512, 1024, 2048};
    ast_rng rng;
    ast_rng_seed(&rng, 1);
    printf("%6s %12s %12s %12s %12s\n", "N", "isomap_ms", "isomap_cpu", "mds_ms", "mds_cpu");
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        int n = sizes[i], sets = n <= 256 ? 16 : n <= 1024 ? 4 : 2;
        double iso[2], mds[2];
        seconds_per_set(AST_PRIOR_ISOMAP, n, sets, &rng, iso), seconds_per_set(AST_PRIOR_MDS, n, sets, &rng, mds);
        printf("%6d %12.2f %12.2f %12.2f %12.2f\n", n, 1e3 * iso[0], 1e3 * iso[1], 1e3 * mds[0], 1e3 * mds[1]);
    }
    /* configs/visium.yaml's step: 8 sets of 128 spots */
    printf("isomap batch of 8 sets of 128 cells: %.2f ms wall on %d threads\n", batch_ms(128, 8, 8, &rng),
           ast_parallel_threads());
    return 0;
}
