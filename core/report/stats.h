/* alphast/stats.h: the statistics an ablation report needs to compare
 * configs over a handful of seeds: mean and sample standard deviation,
 * Welch's unequal-variance t-test with its Student t distribution, the
 * minimum detectable difference, a bootstrap interval of a difference of
 * means and Holm's correction for testing many differences at once. */
#ifndef ALPHAST_STATS_H
#define ALPHAST_STATS_H

#include <stdint.h>

/* Mean and sample standard deviation (n - 1 in the denominator; 0 for n < 2).
 * n must be at least 1. */
void ast_mean_sd(const double *x, int n, double *mean, double *sd);

/* The regularised incomplete beta function I_x(a, b) for a, b > 0 and
 * 0 <= x <= 1 (NaN outside). */
double ast_betai(double a, double b, double x);

/* P(T <= t) for Student's t distribution with df > 0 degrees of freedom
 * (df need not be an integer). */
double ast_student_t_cdf(double t, double df);

typedef struct ast_welch {
    double t;  /* (mean a - mean b) / standard error */
    double df; /* Welch-Satterthwaite degrees of freedom */
    double p;  /* two-sided p-value */
} ast_welch;

/* Welch's t-test of a against b. Returns 0, or -1 when either sample has
 * fewer than 2 values (no variance to estimate). When both samples are
 * constant the test is degenerate: p = 1 for equal means, else 0. */
int ast_welch_test(const double *a, int na, const double *b, int nb, ast_welch *w);

/* The p-quantile of Student's t with df > 0 degrees of freedom: the t with
 * ast_student_t_cdf(t, df) = p (bisection to double precision); -inf and
 * +inf at p = 0 and 1, NaN outside [0, 1]. */
double ast_student_t_quantile(double p, double df);

/* The minimum detectable difference of a two-sided two-sample comparison:
 * (t_{1-alpha/2, df} + t_{power, df}) * sqrt(sd_a^2/na + sd_b^2/nb) with
 * Welch's df — the true difference of means that Welch's test at level
 * alpha would find with probability `power` (the usual normal-shift
 * approximation to the noncentral t), if the seeds' spread is the one seen.
 * NaN with fewer than 2 values on either side; 0 when both sds are 0. */
double ast_mdd(double sd_a, int na, double sd_b, int nb, double alpha, double power);

/* A percentile bootstrap confidence interval of mean(a) - mean(b): each
 * resample draws na values of a and nb of b with replacement (the groups
 * apart: they are independent runs), from ast_rng seeded with `seed`, so
 * the same inputs always give the same interval; [lo, hi] are the
 * (1 -/+ level)/2 quantiles of the `resamples` differences (interpolated
 * between order statistics, R's type 7). Returns 0, or -1 for an empty
 * group, fewer than 2 resamples or a level outside (0, 1).
 *
 * With a handful of seeds read it as a description, not a guarantee: n
 * values have only ast_bootstrap_distinct(n) different resamples (10 for
 * n = 3); the interval never leaves [min a - max b, max a - min b], and
 * against a constant b with n = 3 it is that whole range (each extreme
 * resample has chance 1/27 > 2.5%); and the bootstrap's spread of a mean
 * is sqrt((n-1)/n) of the usual standard error (0.82 for n = 3) with
 * normal rather than t tails, so the interval is narrower than Welch's t
 * interval (about 0.6 of its width for 3 seeds a side) and covers the
 * true difference less often than `level`. */
int ast_bootstrap_diff_ci(const double *a, int na, const double *b, int nb, int resamples, double level,
                          uint64_t seed, double *lo, double *hi);

/* How many different resamples (multisets) n values have: C(2n-1, n). */
double ast_bootstrap_distinct(int n);

/* Holm's step-down correction of a family of p-values: the j-th smallest
 * of the m tested (j = 1..m) becomes max over i <= j of (m - i + 1) p_(i),
 * capped at 1, so the adjusted values keep the raw order and a difference
 * "survives" when its adjusted p is below alpha — the family-wise error
 * rate then stays at alpha, whatever the dependence between the tests.
 * NaN entries are no tests: they stay NaN and do not count in m. Writes
 * adj[0..n-1] (may not alias p) and returns m. */
int ast_holm(const double *p, int n, double *adj);

#endif
