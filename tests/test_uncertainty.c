/* The uncertainty measures on synthetic samples whose answers are known
 * (alphast/uncertainty.h): identical samples have no spread; samples and a
 * truth drawn alike around the same arrangement are calibrated; the energy
 * score prefers the truth to a distorted one. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "eval/uncertainty.h"

enum { S = 8, B = 4, N = 300 };

/* An arrangement of the B sets: cells uniform in a 10-unit cube. */
static void arrangement(ast_rng *rng, float *centre)
{
    for (int i = 0; i < B * N * 3; i++) centre[i] = 10.0f * ast_rng_uniform01(rng);
}

/* x = centre + N(0, sigma^2) per coordinate, then per set turned by a
 * rotation about z and moved: the measures must not see either. */
static void draw(ast_rng *rng, const float *centre, float sigma, float *x)
{
    for (int b = 0; b < B; b++) {
        double angle = 6.2831853 * ast_rng_uniform01(rng), c = cos(angle), s = sin(angle), shift = 5.0 * ast_rng_gauss(rng);
        for (int i = 0; i < N; i++) {
            const float *p = centre + (b * N + i) * 3;
            float v[3];
            for (int k = 0; k < 3; k++) v[k] = p[k] + sigma * ast_rng_gauss(rng);
            float *o = x + (b * N + i) * 3;
            o[0] = (float)(c * v[0] - s * v[1] + shift), o[1] = (float)(s * v[0] + c * v[1]), o[2] = v[2];
        }
    }
}

Test(uncertainty, identical_samples_have_no_spread)
{
    ast_rng rng;
    ast_rng_seed(&rng, 1);
    float *centre = malloc(sizeof(float) * B * N * 3), *truth = malloc(sizeof(float) * B * N * 3);
    float *samples = malloc(sizeof(float) * S * B * N * 3);
    arrangement(&rng, centre);
    draw(&rng, centre, 0.5f, truth);
    for (int s = 0; s < S; s++)
        for (int i = 0; i < B * N * 3; i++) samples[s * B * N * 3 + i] = centre[i];
    ast_uncertainty u;
    ast_uncertainty_compute(S, B, N, samples, truth, NULL, &u);
    /* float coordinates of size 10: alignment leaves ~1e-6 */
    cr_assert(u.spread < 1e-4 && u.spread_skill < 1e-4, "spread %g, ratio %g", u.spread, u.spread_skill);
    /* the truth is off by 0.5 * sqrt(3) per cell: never within zero reach */
    cr_assert(fabs(u.skill - 0.5 * sqrt(3.0)) < 0.05, "skill %g", u.skill);
    cr_assert(u.coverage < 0.01, "coverage %g", u.coverage);
    cr_assert(fabs(u.coverage_nominal - 8.0 / 9.0) < 1e-12);
    cr_assert_str_eq(ast_uncertainty_judgement(&u), "overconfident");
    free(centre), free(truth), free(samples);
}

Test(uncertainty, calibrated_samples_have_ratio_one_and_nominal_coverage)
{
    ast_rng rng;
    ast_rng_seed(&rng, 2);
    const float sigma = 0.5f;
    float *centre = malloc(sizeof(float) * B * N * 3), *truth = malloc(sizeof(float) * B * N * 3);
    float *samples = malloc(sizeof(float) * S * B * N * 3);
    arrangement(&rng, centre);
    draw(&rng, centre, sigma, truth); /* the truth: one more draw of the sampler */
    for (int s = 0; s < S; s++) draw(&rng, centre, sigma, samples + s * B * N * 3);
    ast_uncertainty u;
    ast_uncertainty_compute(S, B, N, samples, truth, NULL, &u);
    /* 1,200 cells: the variance estimates have relative standard errors of
     * ~0.6 % (spread, 8,400 draws of 3 coordinates) and ~2.4 % (skill),
     * the alignments take 6 of 900 degrees of freedom per set; 0.1 on the
     * ratio is several standard errors. Coverage: a binomial standard
     * error of 0.009; 0.04 is over four. */
    cr_assert(fabs(u.spread - sigma * sqrt(3.0)) < 0.02 * sigma * sqrt(3.0), "spread %g", u.spread);
    cr_assert(fabs(u.spread_skill - 1.0) < 0.1, "spread/skill %g", u.spread_skill);
    cr_assert(fabs(u.coverage - u.coverage_nominal) < 0.04, "coverage %g of %g", u.coverage, u.coverage_nominal);
    cr_assert_str_eq(ast_uncertainty_judgement(&u), "calibrated");
    /* half the spread: overconfident, and the coverage shows it */
    for (int s = 0; s < S; s++) draw(&rng, centre, sigma / 2, samples + s * B * N * 3);
    ast_uncertainty_compute(S, B, N, samples, truth, NULL, &u);
    cr_assert(u.spread_skill < 0.75 && u.coverage < u.coverage_nominal - 0.1, "ratio %g, coverage %g", u.spread_skill,
              u.coverage);
    /* three times the spread: underconfident */
    for (int s = 0; s < S; s++) draw(&rng, centre, 3 * sigma, samples + s * B * N * 3);
    ast_uncertainty_compute(S, B, N, samples, truth, NULL, &u);
    cr_assert_str_eq(ast_uncertainty_judgement(&u), "underconfident", "ratio %g", u.spread_skill);
    ast_uncertainty one;
    ast_uncertainty_compute(1, B, N, samples, truth, NULL, &one);
    cr_assert(isnan(one.spread) && isnan(one.coverage) && isfinite(one.skill) && !ast_uncertainty_judgement(&one),
              "one sample: skill and the energy score only");
    free(centre), free(truth), free(samples);
}

Test(uncertainty, energy_score_prefers_the_truth)
{
    ast_rng rng;
    ast_rng_seed(&rng, 3);
    float *centre = malloc(sizeof(float) * B * N * 3), *stretched = malloc(sizeof(float) * B * N * 3);
    float *samples = malloc(sizeof(float) * S * B * N * 3);
    arrangement(&rng, centre);
    for (int s = 0; s < S; s++) draw(&rng, centre, 0.3f, samples + s * B * N * 3);
    for (int i = 0; i < B * N * 3; i++) stretched[i] = i % 3 ? centre[i] : 1.2f * centre[i];
    ast_uncertainty truth, other;
    ast_uncertainty_compute(S, B, N, samples, centre, NULL, &truth);
    ast_uncertainty_compute(S, B, N, samples, stretched, NULL, &other);
    cr_assert(isfinite(truth.energy) && truth.energy < other.energy, "%g vs %g", truth.energy, other.energy);
    /* padding (mask 0, after the valid cells) is left out */
    float *mask = malloc(sizeof(float) * B * N);
    for (int i = 0; i < B * N; i++) mask[i] = i % N < N - 10;
    ast_uncertainty masked;
    ast_uncertainty_compute(S, B, N, samples, centre, mask, &masked);
    cr_assert(isfinite(masked.energy) && fabs(masked.energy - truth.energy) < 0.2 * truth.energy);
    free(centre), free(stretched), free(samples), free(mask);
}
