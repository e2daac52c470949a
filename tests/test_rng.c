/* The xoshiro256** generator: reproducible streams and the moments of its
 * uniform and Gaussian draws. */
#include <criterion/criterion.h>
#include <math.h>

#include "engine/engine.h"

enum { DRAWS = 100000 };

Test(rng, same_seed_same_stream)
{
    ast_rng a, b;
    ast_rng_seed(&a, 42);
    ast_rng_seed(&b, 42);
    for (int i = 0; i < 1000; i++) cr_assert_eq(ast_rng_next(&a), ast_rng_next(&b), "draw %d", i);
    for (int i = 0; i < 1000; i++) cr_assert_eq(ast_rng_gauss(&a), ast_rng_gauss(&b), "gauss %d", i);
}

/* Two 64-bit streams agreeing by chance at any of 1000 places has
 * probability ~1000 * 2^-64. Seeds 0 and 1 are the likeliest to collide
 * in a weak seeding. */
Test(rng, different_seeds_differ)
{
    ast_rng a, b;
    ast_rng_seed(&a, 0);
    ast_rng_seed(&b, 1);
    for (int i = 0; i < 1000; i++) cr_assert_neq(ast_rng_next(&a), ast_rng_next(&b), "draw %d", i);
}

/* Reseeding drops a pending Box-Muller spare, so a restored seed replays. */
Test(rng, reseed_discards_the_gaussian_spare)
{
    ast_rng a, b;
    ast_rng_seed(&a, 7);
    ast_rng_gauss(&a);
    ast_rng_seed(&a, 7);
    ast_rng_seed(&b, 7);
    for (int i = 0; i < 10; i++) cr_assert_eq(ast_rng_gauss(&a), ast_rng_gauss(&b), "gauss %d", i);
}

/* U[0,1): mean 1/2, variance 1/12, so the sample mean has sd
 * sqrt(1/12 / 1e5) = 9.1e-4 and 5e-3 is 5.5 sd. Every draw misses
 * [0, 1e-3) with probability (1 - 1e-3)^1e5 = e^-100. */
Test(rng, uniform_in_unit_interval_with_mean_one_half)
{
    ast_rng r;
    ast_rng_seed(&r, 3);
    double sum = 0.0, lo = 1.0, hi = 0.0;
    for (int i = 0; i < DRAWS; i++) {
        float u = ast_rng_uniform01(&r);
        cr_assert(u >= 0.0f && u < 1.0f, "draw %d = %.9g", i, u);
        sum += u;
        lo = fmin(lo, u);
        hi = fmax(hi, u);
    }
    cr_assert_float_eq(sum / DRAWS, 0.5, 5e-3);
    cr_assert_lt(lo, 1e-3, "smallest draw %g", lo);
    cr_assert_gt(hi, 1.0 - 1e-3, "largest draw %g", hi);
}

/* N(0,1) over 1e5 draws: the mean has sd 1/sqrt(1e5) = 3.2e-3, the sample
 * variance sd sqrt(2/1e5) = 4.5e-3; bounds of 0.02 and 0.03 are > 6 sd. */
Test(rng, gaussian_mean_and_variance)
{
    ast_rng r;
    ast_rng_seed(&r, 5);
    double s = 0.0, s2 = 0.0;
    for (int i = 0; i < DRAWS; i++) {
        double g = ast_rng_gauss(&r);
        cr_assert(isfinite(g), "draw %d", i);
        s += g;
        s2 += g * g;
    }
    double mean = s / DRAWS, var = s2 / DRAWS - mean * mean;
    cr_assert_float_eq(mean, 0.0, 0.02, "mean %g", mean);
    cr_assert_float_eq(var, 1.0, 0.03, "variance %g", var);
}
