/* alphast/stats.h: the statistics an ablation report needs to compare
 * configs over a handful of seeds: mean and sample standard deviation, and
 * Welch's unequal-variance t-test with its Student t distribution. */
#ifndef ALPHAST_STATS_H
#define ALPHAST_STATS_H

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

#endif
