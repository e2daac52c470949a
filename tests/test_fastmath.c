/* The vectorisable expf and erff against double-precision libm over their
 * whole useful range, and at the edges (overflow, underflow, NaN, inf). */
#include <criterion/criterion.h>
#include <math.h>

#include "alphast/fastmath.h"

/* float32's unit roundoff is 2^-24 = 6e-8; the polynomials were measured at
 * 8.3e-8 relative (exp) and 6.8e-8 absolute (erf), about 1.4 ulp. A wrong
 * coefficient or range reduction gives errors of 1e-4 or more. */
#define EXP_REL_TOL 2.4e-7
#define ERF_ABS_TOL 1.2e-7

Test(fastmath, expf_is_within_two_ulp_of_exp)
{
    double worst = 0.0;
    float at = 0.0f;
    for (float x = -87.0f; x < 88.7f; x += 7.3e-4f) {
        double ref = exp((double)x), err = fabs(ast_expf(x) - ref) / ref;
        if (err > worst) worst = err, at = x;
    }
    cr_assert_lt(worst, EXP_REL_TOL, "relative error %g at x = %g", worst, (double)at);
}

Test(fastmath, expf_edges_behave_as_libm)
{
    cr_assert(isinf(ast_expf(89.0f)) && ast_expf(89.0f) > 0.0f);
    cr_assert(isinf(ast_expf(INFINITY)));
    cr_assert_eq(ast_expf(-100.0f), 0.0f);
    cr_assert_eq(ast_expf(-INFINITY), 0.0f);
    cr_assert(isnan(ast_expf(NAN)));
    cr_assert_eq(ast_expf(0.0f), 1.0f);
    float big = ast_expf(88.7f);
    double ref = exp((double)88.7f);
    cr_assert(isfinite(big) && fabs(big - ref) / ref < EXP_REL_TOL, "exp(88.7) = %g, want %g", (double)big, ref);
}

Test(fastmath, erff_is_within_1e7_of_erf)
{
    double worst = 0.0;
    float at = 0.0f;
    for (float x = -6.0f; x < 6.0f; x += 1.1e-4f) {
        double err = fabs(ast_erff(x) - erf((double)x));
        if (err > worst) worst = err, at = x;
    }
    cr_assert_lt(worst, ERF_ABS_TOL, "absolute error %g at x = %g", worst, (double)at);
}

/* Small arguments: erf(x) ~ 2x/sqrt(pi), so the relative error matters. */
Test(fastmath, erff_is_accurate_relative_near_zero)
{
    for (float x = 1e-6f; x < 0.5f; x *= 1.37f) {
        double ref = erf((double)x);
        cr_assert_lt(fabs(ast_erff(x) - ref) / ref, 2.4e-7, "x = %g", (double)x);
        cr_assert_eq(ast_erff(-x), -ast_erff(x), "odd at x = %g", (double)x);
    }
}

Test(fastmath, erff_edges)
{
    cr_assert_eq(ast_erff(INFINITY), 1.0f);
    cr_assert_eq(ast_erff(-INFINITY), -1.0f);
    cr_assert_eq(ast_erff(10.0f), 1.0f);
    cr_assert_eq(ast_erff(0.0f), 0.0f);
    cr_assert(isnan(ast_erff(NAN)));
}
