/* Expression metrics of docs/model.md §7 and the correlation helpers every metric
 * uses. Sums run in double: pooled over thousands of cells x genes. */
#include <math.h>
#include <stdlib.h>

#include "metrics_internal.h"

/* The reference calls a vector constant when its (population) std is at most this. */
#define CONSTANT_STD 1e-8

static double std_of(const double *x, int n, double *mean)
{
    double m = 0.0, v = 0.0;
    for (int i = 0; i < n; i++) m += x[i];
    m /= n;
    for (int i = 0; i < n; i++) v += (x[i] - m) * (x[i] - m);
    *mean = m;
    return sqrt(v / n);
}

double ast_pearson(const double *x, const double *y, int n)
{
    double mx, my;
    if (n < 2 || std_of(x, n, &mx) <= CONSTANT_STD || std_of(y, n, &my) <= CONSTANT_STD) return NAN;
    double sxy = 0.0, sxx = 0.0, syy = 0.0;
    for (int i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxy / sqrt(sxx * syy);
}

int ast_cmp_indexed(const void *a, const void *b)
{
    const ast_indexed *x = a, *y = b;
    if (x->v != y->v) return (x->v > y->v) - (x->v < y->v);
    return x->i - y->i;
}

void ast_ranks(const double *x, int n, double *rank)
{
    ast_indexed *o = ast_xmalloc((size_t)(n ? n : 1) * sizeof *o);
    for (int i = 0; i < n; i++) o[i] = (ast_indexed){x[i], i};
    qsort(o, (size_t)n, sizeof *o, ast_cmp_indexed);
    for (int lo = 0, hi; lo < n; lo = hi) {
        for (hi = lo + 1; hi < n && o[hi].v == o[lo].v; hi++) {}
        double avg = 0.5 * (lo + 1 + hi); /* ranks lo+1 .. hi share their mean */
        for (int j = lo; j < hi; j++) rank[o[j].i] = avg;
    }
    free(o);
}

double ast_spearman(const double *x, const double *y, int n)
{
    double *rx = ast_xmalloc((size_t)(2 * n + 1) * sizeof *rx), *ry = rx + n;
    ast_ranks(x, n, rx);
    ast_ranks(y, n, ry);
    double r = ast_pearson(rx, ry, n);
    free(rx);
    return r;
}

/* Indices of the valid cells of the whole batch. */
static int64_t valid_cells(int B, int N, const float *mask, int64_t *out)
{
    int64_t n = 0;
    for (int64_t i = 0; i < (int64_t)B * N; i++)
        if (!mask || mask[i] > 0.5f) out[n++] = i;
    return n;
}

/* Per-gene Pearson (zero for constant genes) and Spearman (zero for a
 * constant true gene) over the pooled cells. */
static void per_gene(int64_t n, int G, const int64_t *cells, const float *pred, const float *truth, ast_expr_metrics *out)
{
    double *p = ast_xmalloc((size_t)(2 * n + 1) * sizeof *p), *t = p + n, mt;
    ast_nanmean pcc = {0}, rho = {0};
    for (int g = 0; g < G; g++) {
        for (int64_t i = 0; i < n; i++) p[i] = pred[cells[i] * G + g], t[i] = truth[cells[i] * G + g];
        double r = ast_pearson(t, p, (int)n);
        ast_nanmean_add(&pcc, isnan(r) ? 0.0 : r);
        ast_nanmean_add(&rho, n < 2 || std_of(t, (int)n, &mt) <= CONSTANT_STD ? 0.0 : ast_spearman(t, p, (int)n));
    }
    out->pcc_gene = ast_nanmean_value(&pcc);
    out->spearman = ast_nanmean_value(&rho);
    free(p);
}

/* Per-cell Pearson and cosine over genes. */
static void per_cell(int64_t n, int G, const int64_t *cells, const float *pred, const float *truth, ast_expr_metrics *out)
{
    double *p = ast_xmalloc((size_t)(2 * G) * sizeof *p), *t = p + G;
    ast_nanmean pcc = {0}, cos = {0};
    for (int64_t i = 0; i < n; i++) {
        double pp = 0.0, tt = 0.0, pt = 0.0;
        for (int g = 0; g < G; g++) {
            p[g] = pred[cells[i] * G + g], t[g] = truth[cells[i] * G + g];
            pp += p[g] * p[g], tt += t[g] * t[g], pt += p[g] * t[g];
        }
        double r = ast_pearson(t, p, G);
        ast_nanmean_add(&pcc, isnan(r) ? 0.0 : r);
        ast_nanmean_add(&cos, pt / ((sqrt(pp) + 1e-8) * (sqrt(tt) + 1e-8)));
    }
    out->pcc_cell = ast_nanmean_value(&pcc);
    out->cosine = ast_nanmean_value(&cos);
    free(p);
}

void ast_expr_metrics_compute(int B, int N, int G, const float *pred, const float *truth, const float *mask,
                              ast_expr_metrics *out)
{
    *out = (ast_expr_metrics){0};
    int64_t *cells = ast_xmalloc((size_t)B * N * sizeof *cells);
    int64_t n = valid_cells(B, N, mask, cells);
    if (n > 0) {
        double se = 0.0, ae = 0.0;
        for (int64_t i = 0; i < n; i++)
            for (int g = 0; g < G; g++) {
                double d = (double)pred[cells[i] * G + g] - truth[cells[i] * G + g];
                se += d * d, ae += fabs(d);
            }
        out->mse = se / ((double)n * G);
        out->mae = ae / ((double)n * G);
        per_gene(n, G, cells, pred, truth, out);
        per_cell(n, G, cells, pred, truth, out);
    }
    free(cells);
}
