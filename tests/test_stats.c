/* Mean/sd, the regularised incomplete beta, the Student t CDF and Welch's
 * t-test against closed forms, textbook table values and an independent
 * numerical integration of the t density. */
#include <criterion/criterion.h>
#include <math.h>

#include "alphast/stats.h"

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
