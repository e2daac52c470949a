/* Comparing configs over seeds: Welch's t-test, with the Student t CDF
 * from the regularised incomplete beta function (continued fraction,
 * modified Lentz method as in Numerical Recipes §6.4) and its inverse; the
 * minimum detectable difference; a percentile bootstrap interval of a
 * difference of means; Holm's correction of a family of p-values. */
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "report/stats.h"

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

/* Welch-Satterthwaite degrees of freedom of the two standard errors. */
static double welch_df(double va, int na, double vb, int nb)
{
    return (va + vb) * (va + vb) / (va * va / (na - 1) + vb * vb / (nb - 1));
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
    w->df = welch_df(va, na, vb, nb);
    w->p = 2.0 * ast_student_t_cdf(-fabs(w->t), w->df);
    return 0;
}

double ast_student_t_quantile(double p, double df)
{
    if (!(p >= 0 && p <= 1 && df > 0)) return NAN;
    if (p == 0 || p == 1) return p == 1 ? INFINITY : -INFINITY;
    if (p <= 0.5) return p == 0.5 ? 0.0 : -ast_student_t_quantile(1.0 - p, df);
    /* Bisection on the monotone CDF: slower than Newton, but it cannot step
     * out of the bracket in the heavy tails of small df. */
    double lo = 0.0, hi = 1.0;
    while (ast_student_t_cdf(hi, df) < p) lo = hi, hi *= 2.0;
    for (int i = 0; i < 200 && hi - lo > 4 * DBL_EPSILON * hi; i++) {
        double mid = 0.5 * (lo + hi);
        if (ast_student_t_cdf(mid, df) < p) lo = mid;
        else hi = mid;
    }
    return 0.5 * (lo + hi);
}

double ast_mdd(double sd_a, int na, double sd_b, int nb, double alpha, double power)
{
    if (na < 2 || nb < 2) return NAN;
    double va = sd_a * sd_a / na, vb = sd_b * sd_b / nb;
    if (va + vb == 0.0) return 0.0; /* no spread: any difference shows */
    double df = welch_df(va, na, vb, nb);
    return (ast_student_t_quantile(1.0 - alpha / 2, df) + ast_student_t_quantile(power, df)) * sqrt(va + vb);
}

/* Mean of n draws with replacement from x. The modulo's bias is at most
 * n / 2^64 per draw: nothing next to the resampling noise itself. */
static double resample_mean(const double *x, int n, ast_rng *r)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += x[ast_rng_next(r) % (uint64_t)n];
    return sum / n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of sorted v, interpolating between order statistics
 * (Hyndman & Fan type 7: R's and numpy's default). */
static double quantile_sorted(const double *v, int n, double q)
{
    double h = (n - 1) * q;
    int k = (int)floor(h);
    return k + 1 < n ? v[k] + (h - k) * (v[k + 1] - v[k]) : v[n - 1];
}

int ast_bootstrap_diff_ci(const double *a, int na, const double *b, int nb, int resamples, double level,
                          uint64_t seed, double *lo, double *hi)
{
    if (na < 1 || nb < 1 || resamples < 2 || !(level > 0 && level < 1)) return -1;
    double *d = ast_xmalloc((size_t)resamples * sizeof *d);
    ast_rng r;
    ast_rng_seed(&r, seed);
    for (int i = 0; i < resamples; i++) d[i] = resample_mean(a, na, &r) - resample_mean(b, nb, &r);
    qsort(d, (size_t)resamples, sizeof *d, cmp_double);
    *lo = quantile_sorted(d, resamples, 0.5 * (1.0 - level));
    *hi = quantile_sorted(d, resamples, 0.5 * (1.0 + level));
    free(d);
    return 0;
}

double ast_bootstrap_distinct(int n)
{
    /* multisets of size n from n values: C(2n - 1, n) */
    return n < 1 ? 0.0 : round(exp(lgamma(2.0 * n) - lgamma(n + 1.0) - lgamma(n)));
}

int ast_holm(const double *p, int n, double *adj)
{
    int *order = ast_xmalloc((size_t)(n + 1) * sizeof *order), m = 0;
    for (int i = 0; i < n; i++) {
        adj[i] = NAN;
        if (!isnan(p[i])) order[m++] = i;
    }
    /* insertion sort by p: stable for ties, and a family is tens of tests */
    for (int i = 1; i < m; i++) {
        int k = order[i], j = i;
        for (; j > 0 && p[order[j - 1]] > p[k]; j--) order[j] = order[j - 1];
        order[j] = k;
    }
    /* the j-th smallest p (0-based) is multiplied by m - j; the running
     * maximum keeps the adjusted values in the order of the raw ones */
    double running = 0.0;
    for (int j = 0; j < m; j++) {
        running = fmax(running, (m - j) * p[order[j]]);
        adj[order[j]] = fmin(1.0, running);
    }
    free(order);
    return m;
}
