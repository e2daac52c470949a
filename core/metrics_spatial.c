/* Position metrics of spec §7 (distance-matrix MSE, Procrustes disparity,
 * k-NN preservation), correlations of the pairwise distances, and the
 * reference's Gaussian-kernel Moran's I. All per set, on valid cells. */
#include <stdlib.h>
#include <string.h>

#include "metrics_internal.h"

/* LAPACK's SVD, from libopenblas. Debian's libopenblas-dev installs no
 * lapack.h, so it is declared as LAPACK 3.9's lapack.h declares it, with
 * the hidden lengths of the two character arguments that gfortran passes. */
extern void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a, const int *lda,
                    double *s, double *u, const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork,
                    int *info, size_t jobu_len, size_t jobvt_len);

static double dist3(const float *a, const float *b)
{
    double dx = (double)a[0] - b[0], dy = (double)a[1] - b[1], dz = (double)a[2] - b[2];
    return sqrt(dx * dx + dy * dy + dz * dz);
}

/* Centred and scaled to unit Frobenius norm, in double; 0 if no spread. */
static int standardise(const float *x, int n, double *out)
{
    double mean[3] = {0}, norm = 0.0;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < 3; d++) mean[d] += x[i * 3 + d] / (double)n;
    for (int i = 0; i < n; i++)
        for (int d = 0; d < 3; d++) out[i * 3 + d] = x[i * 3 + d] - mean[d], norm += out[i * 3 + d] * out[i * 3 + d];
    if (!(norm > 0.0)) return 0;
    for (int i = 0; i < 3 * n; i++) out[i] /= sqrt(norm);
    return 1;
}

double ast_procrustes(const float *truth, const float *pred, int n)
{
    double *a = ast_xmalloc((size_t)6 * n * sizeof *a), *b = a + 3 * n;
    if (!standardise(truth, n, a) || !standardise(pred, n, b)) {
        free(a);
        return 1.0;
    }
    /* SciPy: U W V^T = svd(A^T B), R = U V^T, scale = sum W; fit = scale B R^T. */
    double m[9] = {0}, w[3], u[9], vt[9], work[64]; /* column-major 3x3 */
    for (int k = 0; k < n; k++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) m[i + 3 * j] += a[k * 3 + i] * b[k * 3 + j];
    int three = 3, lwork = 64, info = 0;
    dgesvd_("A", "A", &three, &three, m, &three, w, u, &three, vt, &three, work, &lwork, &info, 1, 1);
    AST_ASSERT(info == 0, "dgesvd failed on a 3x3 matrix (info %d)", info);
    double r[9], scale = w[0] + w[1] + w[2], disparity = 0.0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) r[i * 3 + j] = u[i] * vt[3 * j] + u[i + 3] * vt[1 + 3 * j] + u[i + 6] * vt[2 + 3 * j];
    for (int k = 0; k < n; k++)
        for (int i = 0; i < 3; i++) {
            double fit = scale * (b[k * 3] * r[i * 3] + b[k * 3 + 1] * r[i * 3 + 1] + b[k * 3 + 2] * r[i * 3 + 2]);
            disparity += (a[k * 3 + i] - fit) * (a[k * 3 + i] - fit);
        }
    free(a);
    return disparity;
}

/* The k nearest other points of each point, ties by index: out [n, k]. */
static void knn_lists(const float *x, int n, int k, int *out)
{
    ast_indexed *o = ast_xmalloc((size_t)n * sizeof *o);
    for (int i = 0; i < n; i++) {
        int m = 0;
        for (int j = 0; j < n; j++)
            if (j != i) o[m++] = (ast_indexed){dist3(x + i * 3, x + j * 3), j};
        qsort(o, (size_t)m, sizeof *o, ast_cmp_indexed);
        for (int j = 0; j < k; j++) out[i * k + j] = o[j].i;
    }
    free(o);
}

double ast_knn_overlap(const float *truth, const float *pred, int n, int k)
{
    AST_ASSERT(n > k && k > 0, "k-NN overlap needs n > k > 0 (n %d, k %d)", n, k);
    int *nt = ast_xmalloc((size_t)2 * n * k * sizeof *nt), *np = nt + n * k;
    char *hit = ast_xcalloc((size_t)n, 1);
    knn_lists(truth, n, k, nt);
    knn_lists(pred, n, k, np);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < k; j++) hit[nt[i * k + j]] = 1;
        int both = 0;
        for (int j = 0; j < k; j++) both += hit[np[i * k + j]];
        for (int j = 0; j < k; j++) hit[nt[i * k + j]] = 0;
        sum += (double)both / k;
    }
    free(nt), free(hit);
    return sum / n;
}

/* The valid cells of set b, packed: returns their number. */
static int gather_set(const float *x, const float *mask, int b, int N, int D, float *out)
{
    int n = 0;
    for (int i = 0; i < N; i++)
        if (!mask || mask[b * N + i] > 0.5f) memcpy(out + (size_t)n++ * D, x + ((size_t)b * N + i) * D, D * sizeof(float));
    return n;
}

typedef struct pos_sums {
    ast_nanmean dist_mse, procrustes, knn, pearson, spearman;
} pos_sums;

static void set_metrics(const float *t, const float *p, int n, int k, pos_sums *acc)
{
    if (n < 2) return;
    int pairs = n * (n - 1) / 2, m = 0;
    double *dt = ast_xmalloc((size_t)2 * pairs * sizeof *dt), *dp = dt + pairs, se = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++, m++) {
            dt[m] = dist3(t + i * 3, t + j * 3), dp[m] = dist3(p + i * 3, p + j * 3);
            se += 2.0 * (dp[m] - dt[m]) * (dp[m] - dt[m]); /* both triangles of the n x n matrix */
        }
    ast_nanmean_add(&acc->dist_mse, se / ((double)n * n));
    ast_nanmean_add(&acc->pearson, ast_pearson(dt, dp, pairs));
    ast_nanmean_add(&acc->spearman, ast_spearman(dt, dp, pairs));
    if (n > 2) ast_nanmean_add(&acc->procrustes, ast_procrustes(t, p, n));
    if (n > k) ast_nanmean_add(&acc->knn, ast_knn_overlap(t, p, n, k));
    free(dt);
}

void ast_pos_metrics_compute(int B, int N, const float *pred, const float *truth, const float *mask, int k,
                             ast_pos_metrics *out)
{
    float *t = ast_xmalloc((size_t)6 * N * sizeof *t), *p = t + 3 * N;
    pos_sums acc = {0};
    for (int b = 0; b < B; b++) {
        int n = gather_set(truth, mask, b, N, 3, t);
        gather_set(pred, mask, b, N, 3, p);
        set_metrics(t, p, n, k, &acc);
    }
    *out = (ast_pos_metrics){ast_nanmean_value(&acc.dist_mse), ast_nanmean_value(&acc.procrustes),
                             ast_nanmean_value(&acc.knn), ast_nanmean_value(&acc.pearson),
                             ast_nanmean_value(&acc.spearman)};
    free(t);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* numpy.percentile (linear interpolation) of the n x n matrix's entries > 0. */
static double positive_percentile(const double *d, int n, double q)
{
    double *v = ast_xmalloc((size_t)n * n * sizeof *v);
    int m = 0;
    for (int i = 0; i < n * n; i++)
        if (d[i] > 0.0) v[m++] = d[i];
    double out = 0.0;
    if (m > 0) {
        qsort(v, (size_t)m, sizeof *v, cmp_double);
        double at = (m - 1) * q;
        int lo = (int)at;
        out = lo + 1 < m ? v[lo] + (at - lo) * (v[lo + 1] - v[lo]) : v[lo];
    }
    free(v);
    return out;
}

/* One set's Moran's I; 0 when all cells coincide or the values are constant. */
static double morans_set(const float *x, const double *val, int n)
{
    double *d = ast_xmalloc((size_t)n * n * sizeof *d), mean = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) d[i * n + j] = dist3(x + i * 3, x + j * 3);
    double h = positive_percentile(d, n, 0.25), wsum = 0.0, cross = 0.0, yy = 0.0;
    if (!(h > 0.0)) {
        free(d);
        return 0.0;
    }
    for (int i = 0; i < n; i++) mean += val[i] / n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double w = i == j ? 0.0 : exp(-d[i * n + j] * d[i * n + j] / (2.0 * h * h));
            wsum += w;
            cross += w * (val[i] - mean) * (val[j] - mean);
        }
    for (int i = 0; i < n; i++) yy += (val[i] - mean) * (val[i] - mean);
    free(d);
    /* The reference normalises W to sum 1 (+1e-8) and divides by its sum again. */
    double norm = wsum + 1e-8, den = wsum / norm * yy;
    return den >= 1e-8 ? n * (cross / norm) / den : 0.0;
}

double ast_morans_i(int B, int N, const float *pos, const float *values, int stride, const float *mask)
{
    float *x = ast_xmalloc((size_t)3 * N * sizeof *x);
    double *v = ast_xmalloc((size_t)N * sizeof *v);
    ast_nanmean acc = {0};
    for (int b = 0; b < B; b++) {
        int n = 0;
        for (int i = 0; i < N; i++) {
            if (mask && mask[b * N + i] <= 0.5f) continue;
            memcpy(x + 3 * n, pos + ((size_t)b * N + i) * 3, 3 * sizeof(float));
            v[n++] = values[((size_t)b * N + i) * stride];
        }
        if (n >= 3) ast_nanmean_add(&acc, morans_set(x, v, n));
    }
    free(x), free(v);
    return ast_nanmean_value(&acc);
}
