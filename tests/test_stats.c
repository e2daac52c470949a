/* Mean/sd, the regularised incomplete beta, the Student t CDF and its
 * inverse, Welch's t-test, the minimum detectable difference, the bootstrap
 * interval and Holm's correction against closed forms, textbook table
 * values, R's p.adjust, exact enumeration and an independent numerical
 * integration of the t density. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "report/stats.h"

/* P(T <= t) by Simpson's rule on the t density: independent of the
 * continued fraction ast_student_t_cdf uses. */
static double t_cdf_by_integration(double t, double df)
{
    const int n = 20000;
    double c = exp(lgamma((df + 1) / 2) - lgamma(df / 2)) / sqrt(df * M_PI), h = fabs(t) / n, sum = 0.0;
    for (int i = 0; i <= n; i++) {
        double x = i * h, w = (i == 0 || i == n) ? 1 : (i % 2 ? 4 : 2);
        sum += w * c * pow(1 + x * x / df, -(df + 1) / 2);
    }
    double half = sum * h / 3;
    return t >= 0 ? 0.5 + half : 0.5 - half;
}

Test(stats, mean_and_sample_sd)
{
    const double x[8] = {2, 4, 4, 4, 5, 5, 7, 9};
    double m, sd;
    ast_mean_sd(x, 8, &m, &sd);
    cr_assert_float_eq(m, 5.0, 1e-15);
    cr_assert_float_eq(sd, sqrt(32.0 / 7.0), 1e-15); /* squares sum to 32, n - 1 = 7 */
    ast_mean_sd(x, 1, &m, &sd);
    cr_assert(m == 2.0 && sd == 0.0);
}

Test(stats, incomplete_beta_closed_forms)
{
    const double xs[] = {0.01, 0.2, 0.5, 0.77, 0.99};
    for (int i = 0; i < 5; i++) {
        double x = xs[i];
        /* 1e-12: the continued fraction stops at double precision; lgamma adds a few ulps */
        cr_assert_float_eq(ast_betai(3.5, 1, x), pow(x, 3.5), 1e-12, "I_x(a,1) = x^a at %g", x);
        cr_assert_float_eq(ast_betai(1, 2.5, x), 1 - pow(1 - x, 2.5), 1e-12, "I_x(1,b) at %g", x);
        cr_assert_float_eq(ast_betai(2.7, 0.4, x), 1 - ast_betai(0.4, 2.7, 1 - x), 1e-12, "symmetry at %g", x);
    }
    cr_assert_float_eq(ast_betai(7.3, 7.3, 0.5), 0.5, 1e-12);
    cr_assert(ast_betai(2, 3, 0) == 0 && ast_betai(2, 3, 1) == 1);
    cr_assert(isnan(ast_betai(-1, 3, 0.5)) && isnan(ast_betai(2, 3, 1.5)));
}

Test(stats, incomplete_beta_is_the_binomial_tail)
{
    /* I_p(k, n-k+1) = P(X >= k) for X ~ Binomial(n, p) */
    const int n = 10;
    const double p = 0.3;
    for (int k = 1; k <= n; k++) {
        double tail = 0.0;
        for (int j = k; j <= n; j++) tail += exp(lgamma(n + 1) - lgamma(j + 1) - lgamma(n - j + 1)) * pow(p, j) * pow(1 - p, n - j);
        cr_assert_float_eq(ast_betai(k, n - k + 1, p), tail, 1e-12, "k = %d", k);
    }
}

Test(stats, t_cdf_closed_forms_for_1_2_and_4_degrees_of_freedom)
{
    const double ts[] = {-7.0, -2.5, -0.3, 0.0, 0.4, 1.0, 3.0, 40.0};
    for (int i = 0; i < 8; i++) {
        double t = ts[i], u = t / sqrt(1 + t * t / 4);
        cr_assert_float_eq(ast_student_t_cdf(t, 1), 0.5 + atan(t) / M_PI, 1e-12, "df 1 (Cauchy), t %g", t);
        cr_assert_float_eq(ast_student_t_cdf(t, 2), 0.5 + t / (2 * sqrt(2 + t * t)), 1e-12, "df 2, t %g", t);
        cr_assert_float_eq(ast_student_t_cdf(t, 4), 0.5 + 0.375 * u * (1 - t * t / (12 * (1 + t * t / 4))), 1e-12,
                           "df 4, t %g", t);
    }
}

Test(stats, t_cdf_matches_tables)
{
    /* scipy.stats.t.sf(2.0, 10) * 2 = 0.0733880 (quoted to 5 digits in the issue) */
    cr_assert_float_eq(2 * (1 - ast_student_t_cdf(2.0, 10)), 0.07339, 5e-6);
    /* two-sided 5% critical values of Student's t tables, given to 6-7 digits:
     * the CDF moves by at most pdf * 5e-7 < 1e-7 over the rounding */
    const double df[] = {1, 5, 10, 30}, crit[] = {12.706205, 2.570582, 2.228139, 2.042272};
    for (int i = 0; i < 4; i++) cr_assert_float_eq(ast_student_t_cdf(crit[i], df[i]), 0.975, 1e-6, "df %g", df[i]);
    /* the normal limit: z_0.975 = 1.959964; the t CDF differs by O(1/df) */
    cr_assert_float_eq(ast_student_t_cdf(1.959964, 1e8), 0.975, 1e-6);
    cr_assert(ast_student_t_cdf(INFINITY, 3) == 1.0 && ast_student_t_cdf(-INFINITY, 3) == 0.0);
}

Test(stats, t_cdf_at_fractional_df_matches_integrated_density)
{
    const double df[] = {2.37, 4.959184, 17.5}, ts[] = {-3.1, 0.7, 1.9, 4.04};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            /* Simpson with 20000 panels: error far below 1e-9 for this smooth density */
            cr_assert_float_eq(ast_student_t_cdf(ts[j], df[i]), t_cdf_by_integration(ts[j], df[i]), 1e-9,
                               "df %g t %g", df[i], ts[j]);
}

Test(stats, welch_equal_sizes_and_variances_has_integer_df)
{
    /* means 2 and 4, variances 1 and 1: se^2 = 2/3, t = -2/sqrt(2/3), df = 4 */
    const double a[3] = {1, 2, 3}, b[3] = {3, 4, 5};
    ast_welch w;
    cr_assert(ast_welch_test(a, 3, b, 3, &w) == 0);
    cr_assert_float_eq(w.t, -2.449489742783178, 1e-12);
    cr_assert_float_eq(w.df, 4.0, 1e-12);
    /* df 4 closed form: F(t) = 1/2 + 3/8 u (1 - t^2 / (12 (1 + t^2/4))), u = t / sqrt(1 + t^2/4);
     * at |t| = sqrt(6): u = 1.5491933, F = 0.9647580, p = 0.0704840 */
    cr_assert_float_eq(w.p, 0.07048400, 1e-7);
}

Test(stats, welch_unequal_sizes_by_hand)
{
    /* a: mean 2, var 1, n 3; b: mean 5.5, var 5/3, n 4. va/na = 1/3, vb/nb = 5/12, se^2 = 3/4;
     * t = -3.5 / sqrt(0.75); df = 0.75^2 / ((1/3)^2/2 + (5/12)^2/3) = 0.5625 / 0.11342593 */
    const double a[3] = {1, 2, 3}, b[4] = {4, 5, 6, 7};
    ast_welch w;
    cr_assert(ast_welch_test(a, 3, b, 4, &w) == 0);
    cr_assert_float_eq(w.t, -3.5 / sqrt(0.75), 1e-12);
    cr_assert_float_eq(w.df, 0.5625 / (1.0 / 18 + 25.0 / 432), 1e-12);
    cr_assert_float_eq(w.df, 4.959184, 1e-6);
    cr_assert_float_eq(w.p, 2 * t_cdf_by_integration(w.t, w.df), 1e-9);
    /* symmetric in the order of the samples, up to the sign of t */
    ast_welch r;
    ast_welch_test(b, 4, a, 3, &r);
    cr_assert(r.t == -w.t && r.df == w.df && r.p == w.p);
}

Test(stats, welch_degenerate_cases)
{
    const double one[1] = {1}, c1[3] = {2, 2, 2}, c2[3] = {3, 3, 3}, a[3] = {1, 2, 3};
    ast_welch w;
    cr_assert(ast_welch_test(one, 1, a, 3, &w) == -1, "one seed has no variance to test");
    cr_assert(ast_welch_test(c1, 3, c1, 3, &w) == 0 && w.p == 1.0);
    cr_assert(ast_welch_test(c1, 3, c2, 3, &w) == 0 && w.p == 0.0 && w.t < 0);
}

/* Closed-form quantiles: df 1 is the Cauchy, df 2 and df 4 invert their
 * CDFs exactly (df 4: Hill 1970, Comm. ACM 13(10), algorithm 396). */
static double q_df1(double p) { return tan(M_PI * (p - 0.5)); }
static double q_df2(double p) { return (2 * p - 1) / sqrt(2 * p * (1 - p)); }
static double q_df4(double p)
{
    double a = 4 * p * (1 - p), q = cos(acos(sqrt(a)) / 3) / sqrt(a);
    return copysign(2 * sqrt(q - 1), p - 0.5);
}

Test(stats, t_quantile_matches_tables)
{
    /* Student t tables (and R's qt) to 6 decimals: the rounding is at most 5e-7 */
    cr_assert_float_eq(ast_student_t_quantile(0.975, 2), 4.302653, 5e-7);
    cr_assert_float_eq(ast_student_t_quantile(0.975, 4), 2.776445, 5e-7);
    cr_assert_float_eq(ast_student_t_quantile(0.8, 4), 0.940965, 5e-7);
    cr_assert_float_eq(ast_student_t_quantile(0.975, 1), 12.706205, 5e-7);
    cr_assert_float_eq(ast_student_t_quantile(0.975, 30), 2.042272, 5e-7);
    cr_assert_float_eq(ast_student_t_quantile(0.025, 4), -2.776445, 5e-7, "symmetric about 0");
    cr_assert(ast_student_t_quantile(0.5, 3.7) == 0.0);
    cr_assert(ast_student_t_quantile(1, 3) == INFINITY && ast_student_t_quantile(0, 3) == -INFINITY);
    cr_assert(isnan(ast_student_t_quantile(1.5, 3)) && isnan(ast_student_t_quantile(0.5, 0)));
}

Test(stats, t_quantile_inverts_the_closed_forms)
{
    const double ps[] = {1e-6, 0.01, 0.2, 0.45, 0.6, 0.8, 0.975, 0.999};
    for (int i = 0; i < 8; i++) {
        double p = ps[i];
        /* relative 1e-9: bisection stops at 4 ulps of t, but the CDF it inverts is
         * good to ~1e-16 absolute only, i.e. 1e-16 / pdf(t) in t; the worst case,
         * p = 1e-6 at df 1 (t = -3.2e5, pdf 3e-12), leaves 3e-5 in t, 1e-10 relative */
        double tol1 = 1e-9 * fabs(q_df1(p)), tol2 = 1e-9 * fabs(q_df2(p)), tol4 = 1e-9 * fabs(q_df4(p));
        cr_assert_float_eq(ast_student_t_quantile(p, 1), q_df1(p), tol1, "df 1, p %g", p);
        cr_assert_float_eq(ast_student_t_quantile(p, 2), q_df2(p), tol2, "df 2, p %g", p);
        cr_assert_float_eq(ast_student_t_quantile(p, 4), q_df4(p), tol4, "df 4, p %g", p);
    }
}

Test(stats, t_quantile_round_trips_at_fractional_df)
{
    const double df[] = {2.37, 4.959184, 17.5}, ps[] = {0.03, 0.5, 0.8, 0.975};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            /* the CDF is checked against the integrated density above; 1e-12 is a few
             * hundred ulps of p, far above the bisection's last step times the pdf */
            cr_assert_float_eq(ast_student_t_cdf(ast_student_t_quantile(ps[j], df[i]), df[i]), ps[j], 1e-12,
                               "df %g p %g", df[i], ps[j]);
}

Test(stats, minimum_detectable_difference_by_hand)
{
    /* sd 1 and 1, 3 seeds each: se = sqrt(2/3), df 4; (t_0.975,4 + t_0.8,4) * se =
     * (2.776445 + 0.940965) * 0.8164966 = 3.035253; table rounding (<= 5e-7 each)
     * moves it by at most 1e-6 * 0.82 */
    cr_assert_float_eq(ast_mdd(1, 3, 1, 3, 0.05, 0.8), 3.035253, 1e-6);
    /* the unequal case of welch_unequal_sizes_by_hand: se^2 = 3/4, df = 4.959184 */
    double df = 0.5625 / (1.0 / 18 + 25.0 / 432);
    double want = (ast_student_t_quantile(0.975, df) + ast_student_t_quantile(0.8, df)) * sqrt(0.75);
    /* the same quantile calls, so only df and se's arithmetic can differ: a few ulps of 3.4 */
    cr_assert_float_eq(ast_mdd(1, 3, sqrt(5.0 / 3), 4, 0.05, 0.8), want, 1e-12);
    /* more seeds, smaller MDD: 10 a side, df 18, se = sqrt(0.2); t tables give
     * t_0.975,18 = 2.1009 and t_0.8,18 = 0.8620 to 4 decimals: the two roundings
     * (<= 5e-5 each) move the MDD by at most 1e-4 * 0.447 */
    cr_assert_float_eq(ast_mdd(1, 10, 1, 10, 0.05, 0.8), (2.1009 + 0.8620) * sqrt(0.2), 4.5e-5);
    cr_assert(ast_mdd(0, 3, 0, 3, 0.05, 0.8) == 0.0, "no spread: every difference shows");
    cr_assert(isnan(ast_mdd(1, 1, 1, 3, 0.05, 0.8)), "one seed has no spread to go by");
}

/* P(D < x) and P(D <= x) for D = mean(a*) - mean(b*) over every resample of
 * a and of b: na^na * nb^nb equally likely index sequences, enumerated. */
static void exact_bootstrap_cdf(const double *a, int na, const double *b, int nb, double x, double *below, double *at)
{
    long total = 0, lt = 0, le = 0, ka = 1, kb = 1;
    for (int i = 0; i < na; i++) ka *= na;
    for (int i = 0; i < nb; i++) kb *= nb;
    for (long i = 0; i < ka; i++)
        for (long j = 0; j < kb; j++) {
            double sa = 0, sb = 0;
            for (long k = 0, c = i; k < na; k++, c /= na) sa += a[c % na];
            for (long k = 0, c = j; k < nb; k++, c /= nb) sb += b[c % nb];
            double d = sa / na - sb / nb;
            total++, lt += d < x - 1e-12, le += d <= x + 1e-12; /* 1e-12: equal sums added in another order */
        }
    *below = (double)lt / total, *at = (double)le / total;
}

Test(stats, bootstrap_interval_matches_the_exact_bootstrap_distribution)
{
    const double a[4] = {0.31, 0.42, 0.38, 0.55}, b[4] = {0.30, 0.36, 0.33, 0.29};
    double lo, hi, below, at;
    cr_assert(ast_bootstrap_diff_ci(a, 4, b, 4, 10000, 0.95, 1, &lo, &hi) == 0);
    /* The sample quantile of 10,000 draws sits where the exact CDF is q give or take
     * sqrt(q (1 - q) / 10000) = 0.0016 for q = 0.025; allow 4 of those (0.0062). */
    exact_bootstrap_cdf(a, 4, b, 4, lo, &below, &at);
    cr_assert(below <= 0.025 + 0.0062 && at >= 0.025 - 0.0062, "lo %g: P(<) %g, P(<=) %g", lo, below, at);
    exact_bootstrap_cdf(a, 4, b, 4, hi, &below, &at);
    cr_assert(below <= 0.975 + 0.0062 && at >= 0.975 - 0.0062, "hi %g: P(<) %g, P(<=) %g", hi, below, at);
    cr_assert(lo < 0.0975 && 0.0975 < hi, "the observed difference of means lies inside");
}

Test(stats, bootstrap_interval_is_reproducible)
{
    const double a[3] = {0.41, 0.43, 0.39}, b[3] = {0.38, 0.37, 0.40};
    double lo1, hi1, lo2, hi2, lo3, hi3;
    ast_bootstrap_diff_ci(a, 3, b, 3, 10000, 0.95, 7, &lo1, &hi1);
    ast_bootstrap_diff_ci(a, 3, b, 3, 10000, 0.95, 7, &lo2, &hi2);
    cr_assert(lo1 == lo2 && hi1 == hi2, "the same seed, the same interval");
    ast_bootstrap_diff_ci(a, 3, b, 3, 10000, 0.50, 7, &lo3, &hi3);
    cr_assert(lo1 <= lo3 && lo3 <= hi3 && hi3 <= hi1, "a 50%% interval lies inside the 95%% one");
}

Test(stats, bootstrap_interval_with_three_seeds_is_the_range)
{
    /* 3 seeds: each group has 27 equally likely index triples; all three 0s
     * (mean 0) has probability 1/27 = 0.037 > 0.025, and so has all three 2s:
     * the 95% interval is the whole range of resampled differences, [0 - 5, 2 - 5].
     * Of 10,000 resamples ~370 +- 19 are all-zero, so order statistics 249 and 250
     * are zeros (6 sd of margin); sums of small integers are exact */
    const double a[3] = {0, 1, 2}, b[3] = {5, 5, 5};
    double lo, hi;
    cr_assert(ast_bootstrap_diff_ci(a, 3, b, 3, 10000, 0.95, 1, &lo, &hi) == 0);
    cr_assert(lo == -5.0 && hi == -3.0, "[%g, %g]", lo, hi);
    cr_assert(ast_bootstrap_diff_ci(b, 3, b, 3, 100, 0.95, 1, &lo, &hi) == 0 && lo == 0.0 && hi == 0.0);
    cr_assert(ast_bootstrap_diff_ci(a, 0, b, 3, 100, 0.95, 1, &lo, &hi) == -1);
    cr_assert(ast_bootstrap_diff_ci(a, 3, b, 3, 100, 1.0, 1, &lo, &hi) == -1);
}

Test(stats, distinct_bootstrap_resamples)
{
    /* multisets C(2n - 1, n): 1, 3, 10, 126, 92378 */
    const int n[] = {1, 2, 3, 5, 10};
    const double want[] = {1, 3, 10, 126, 92378};
    for (int i = 0; i < 5; i++) cr_assert_eq(ast_bootstrap_distinct(n[i]), want[i], "n = %d", n[i]);
}

Test(stats, holm_matches_r_p_adjust)
{
    /* R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02
     * (sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04;
     * the running maximum lifts the last to 0.06) */
    const double p[4] = {0.01, 0.04, 0.03, 0.005}, want[4] = {0.03, 0.06, 0.06, 0.02};
    double adj[4];
    cr_assert_eq(ast_holm(p, 4, adj), 4);
    /* each adjusted value is one product k * p: within an ulp (2e-17 at 0.06) of the decimal */
    for (int i = 0; i < 4; i++) cr_assert_float_eq(adj[i], want[i], 1e-15, "p[%d]", i);
    /* R: p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), "holm") = 0.05 0.08 0.09 0.09 0.09 */
    const double q[5] = {0.01, 0.02, 0.03, 0.04, 0.05}, wq[5] = {0.05, 0.08, 0.09, 0.09, 0.09};
    double aq[5];
    ast_holm(q, 5, aq);
    for (int i = 0; i < 5; i++) cr_assert_float_eq(aq[i], wq[i], 1e-15, "q[%d]", i); /* one product each, as above */
}

Test(stats, holm_caps_at_one_and_skips_untested)
{
    /* R: p.adjust(c(0.6, 0.7, 0.1), "holm") = 1 1 0.3 */
    const double p[5] = {0.6, NAN, 0.7, 0.1, NAN};
    double adj[5];
    cr_assert_eq(ast_holm(p, 5, adj), 3, "NaN entries are not tests");
    cr_assert(adj[0] == 1.0 && adj[2] == 1.0 && isnan(adj[1]) && isnan(adj[4]));
    cr_assert_float_eq(adj[3], 0.3, 1e-15); /* 3 * 0.1, one rounding */
    /* a raw p below 0.05 that does not survive: 0.02 among 5 tests is 0.1 at best */
    const double f[5] = {0.02, 0.5, 0.5, 0.5, 0.5};
    double af[5];
    ast_holm(f, 5, af);
    cr_assert_float_eq(af[0], 0.1, 1e-15); /* 5 * 0.02, one rounding */
    cr_assert(ast_holm(f, 0, af) == 0);
}
