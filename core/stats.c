/* Welch's t-test over seeds, with the Student t CDF from the regularised
 * incomplete beta function (continued fraction, modified Lentz method as in
 * Numerical Recipes §6.4). */
#include <float.h>
#include <math.h>

#include "alphast/stats.h"

void ast_mean_sd(const double *x, int n, double *mean, double *sd)
{
    double m = 0.0, ss = 0.0;
    for (int i = 0; i < n; i++) m += x[i];
    m /= n;
    for (int i = 0; i < n; i++) ss += (x[i] - m) * (x[i] - m);
    *mean = m;
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0.0;
}

/* The continued fraction of I_x(a, b); converges fast for x < (a+1)/(a+b+2). */
static double beta_cf(double a, double b, double x)
{
    const double tiny = 1e-300;
    double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
    d = 1.0 / (fabs(d) < tiny ? tiny : d);
    double h = d;
    for (int m = 1; m <= 500; m++) {
        for (int odd = 0; odd < 2; odd++) {
            double num = odd ? -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
                             : m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m));
            d = 1.0 + num * d;
            d = 1.0 / (fabs(d) < tiny ? tiny : d);
            c = 1.0 + num / c;
            if (fabs(c) < tiny) c = tiny;
            h *= d * c;
            if (odd && fabs(d * c - 1.0) < 4 * DBL_EPSILON) return h;
        }
    }
    return h; /* 500 rounds reach double precision for any a, b a t-test produces */
}

double ast_betai(double a, double b, double x)
{
    if (!(a > 0 && b > 0 && x >= 0 && x <= 1)) return NAN;
    if (x == 0 || x == 1) return x;
    double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1) / (a + b + 2)) return front * beta_cf(a, b, x) / a;
    return 1.0 - front * beta_cf(b, a, 1.0 - x) / b;
}

double ast_student_t_cdf(double t, double df)
{
    if (isinf(t)) return t > 0 ? 1.0 : 0.0;
    /* P(|T| > |t|) = I_{df/(df+t^2)}(df/2, 1/2) */
    double tail = 0.5 * ast_betai(0.5 * df, 0.5, df / (df + t * t));
    return t > 0 ? 1.0 - tail : tail;
}

int ast_welch_test(const double *a, int na, const double *b, int nb, ast_welch *w)
{
    if (na < 2 || nb < 2) return -1;
    double ma, sa, mb, sb;
    ast_mean_sd(a, na, &ma, &sa);
    ast_mean_sd(b, nb, &mb, &sb);
    double va = sa * sa / na, vb = sb * sb / nb, se2 = va + vb;
    if (se2 == 0.0) {
        *w = (ast_welch){ma == mb ? 0.0 : copysign(INFINITY, ma - mb), na + nb - 2, ma == mb ? 1.0 : 0.0};
        return 0;
    }
    w->t = (ma - mb) / sqrt(se2);
    w->df = se2 * se2 / (va * va / (na - 1) + vb * vb / (nb - 1));
    w->p = 2.0 * ast_student_t_cdf(-fabs(w->t), w->df);
    return 0;
}
