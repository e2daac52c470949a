/* Position metrics of docs/model.md §7 (distance-matrix MSE, Procrustes disparity),
 * correlations of the pairwise distances, the aligned RMSD, their
 * per-set averaging (the k-NN ones are in metrics_graph.c), and the
 * reference's Gaussian-kernel Moran's I. All per set, on valid cells. */
#include <stdlib.h>
#include <string.h>

#include "model/kabsch.h"
#include "metrics_internal.h"

/* LAPACK's SVD, from libopenblas. Debian's libopenblas-dev installs no
 * lapack.h, so it is declared as LAPACK 3.9's lapack.h declares it, with
 * the hidden lengths of the two character arguments that gfortran passes. */
extern void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a, const int *lda,
                    double *s, double *u, const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork,
                    int *info, size_t jobu_len, size_t jobvt_len);

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

double ast_rmsd_aligned(const float *truth, const float *pred, int n)
{
    AST_ASSERT(n > 0, "RMSD of no points");
    double *q = ast_xmalloc((size_t)6 * n * sizeof *q), *p = q + 3 * n, r[9], se = 0.0;
    for (int i = 0; i < 3 * n; i++) q[i] = truth[i], p[i] = pred[i];
    ast_center_rows3(q, NULL, n);
    ast_center_rows3(p, NULL, n);
    ast_kabsch(p, q, NULL, n, 1, r);
    for (int i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) {
            const double *pi = p + 3 * i;
            double d = r[a * 3] * pi[0] + r[a * 3 + 1] * pi[1] + r[a * 3 + 2] * pi[2] - q[3 * i + a];
            se += d * d;
        }
    free(q);
    return sqrt(se / n);
}

double ast_dist_row_spearman(const float *truth, const float *pred, int n)
{
    if (n < 3) return NAN;
    double *dt = ast_xmalloc((size_t)2 * (n - 1) * sizeof *dt), *dp = dt + (n - 1);
    ast_nanmean acc = {0};
    for (int i = 0; i < n; i++) {
        int m = 0;
        for (int j = 0; j < n; j++) {
            if (j == i) continue;
            dt[m] = ast_dist3(truth + i * 3, truth + j * 3), dp[m++] = ast_dist3(pred + i * 3, pred + j * 3);
        }
        ast_nanmean_add(&acc, ast_spearman(dt, dp, n - 1));
    }
    free(dt);
    return ast_nanmean_or_nan(&acc);
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
    ast_nanmean knn[AST_N_KNN_KS], row_spearman, rmsd, graph[3], dist_mse, procrustes, pearson, spearman;
} pos_sums;

/* The metrics of one set's n >= 2 pairwise distances. */
static void distance_metrics(const float *t, const float *p, int n, pos_sums *acc)
{
    int pairs = n * (n - 1) / 2, m = 0;
    double *dt = ast_xmalloc((size_t)2 * pairs * sizeof *dt), *dp = dt + pairs, se = 0.0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++, m++) {
            dt[m] = ast_dist3(t + i * 3, t + j * 3), dp[m] = ast_dist3(p + i * 3, p + j * 3);
            se += 2.0 * (dp[m] - dt[m]) * (dp[m] - dt[m]); /* both triangles of the n x n matrix */
        }
    ast_nanmean_add(&acc->dist_mse, se / ((double)n * n));
    ast_nanmean_add(&acc->pearson, ast_pearson(dt, dp, pairs));
    ast_nanmean_add(&acc->spearman, ast_spearman(dt, dp, pairs));
    free(dt);
}

static void set_metrics(const float *t, const float *p, int n, int k, pos_sums *acc)
{
    if (n < 2) return;
    distance_metrics(t, p, n, acc);
    ast_nanmean_add(&acc->rmsd, ast_rmsd_aligned(t, p, n));
    if (n > 2) {
        ast_nanmean_add(&acc->procrustes, ast_procrustes(t, p, n));
        ast_nanmean_add(&acc->row_spearman, ast_dist_row_spearman(t, p, n));
    }
    double knn[AST_N_KNN_KS], graph[3];
    ast_neighbour_scores(t, p, n, k, knn, graph);
    for (int i = 0; i < AST_N_KNN_KS; i++) ast_nanmean_add(&acc->knn[i], knn[i]);
    for (int i = 0; i < 3; i++) ast_nanmean_add(&acc->graph[i], graph[i]);
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
    *out = (ast_pos_metrics){.dist_row_spearman = ast_nanmean_or_nan(&acc.row_spearman),
                             .rmsd = ast_nanmean_or_nan(&acc.rmsd),
                             .graph_precision = ast_nanmean_or_nan(&acc.graph[0]),
                             .graph_recall = ast_nanmean_or_nan(&acc.graph[1]),
                             .graph_f1 = ast_nanmean_or_nan(&acc.graph[2]),
                             .dist_mse = ast_nanmean_value(&acc.dist_mse),
                             .procrustes = ast_nanmean_value(&acc.procrustes),
                             .dist_pearson = ast_nanmean_value(&acc.pearson),
                             .dist_spearman = ast_nanmean_value(&acc.spearman),
                             .energy_score = NAN};
    for (int i = 0; i < AST_N_KNN_KS; i++) out->knn[i] = ast_nanmean_or_nan(&acc.knn[i]);
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

/* The reference's Gaussian weights of one set into w [n, n] (zero
 * diagonal); returns their sum. All zero when every cell coincides: no
 * bandwidth, and then Moran's I below is 0. */
static double morans_weights(const float *x, int n, double *w)
{
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) w[i * n + j] = ast_dist3(x + i * 3, x + j * 3);
    double h = positive_percentile(w, n, 0.25), wsum = 0.0;
    for (int i = 0; i < n * n; i++) {
        w[i] = h > 0.0 && i % (n + 1) != 0 ? exp(-w[i] * w[i] / (2.0 * h * h)) : 0.0;
        wsum += w[i];
    }
    return wsum;
}

/* One set's Moran's I on its weights; 0 when they or the values vanish. */
static double morans_set(const double *w, double wsum, const double *val, int n)
{
    double mean = 0.0, cross = 0.0, yy = 0.0;
    for (int i = 0; i < n; i++) mean += val[i] / n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) cross += w[i * n + j] * (val[i] - mean) * (val[j] - mean);
    for (int i = 0; i < n; i++) yy += (val[i] - mean) * (val[i] - mean);
    /* The reference normalises W to sum 1 (+1e-8) and divides by its sum again. */
    double norm = wsum + 1e-8, den = wsum / norm * yy;
    return den >= 1e-8 ? n * (cross / norm) / den : 0.0;
}

double ast_morans_i(int B, int N, const float *pos, const float *values, int stride, const float *mask)
{
    float *x = ast_xmalloc((size_t)3 * N * sizeof *x);
    double *v = ast_xmalloc((size_t)N * sizeof *v), *w = ast_xmalloc((size_t)N * N * sizeof *w);
    ast_nanmean acc = {0};
    for (int b = 0; b < B; b++) {
        int n = 0;
        for (int i = 0; i < N; i++) {
            if (mask && mask[b * N + i] <= 0.5f) continue;
            memcpy(x + 3 * n, pos + ((size_t)b * N + i) * 3, 3 * sizeof(float));
            v[n++] = values[((size_t)b * N + i) * stride];
        }
        if (n >= 3) ast_nanmean_add(&acc, morans_set(w, morans_weights(x, n, w), v, n));
    }
    free(x), free(v), free(w);
    return ast_nanmean_value(&acc);
}

void ast_most_spatial_genes(int B, int N, int G, const float *pos, const float *expr, const float *mask, int count,
                            int *out)
{
    AST_ASSERT(count >= 0 && count <= G, "asked for %d of %d genes", count, G);
    float *x = ast_xmalloc((size_t)3 * N * sizeof *x), *e = ast_xmalloc((size_t)N * G * sizeof *e);
    double *v = ast_xmalloc((size_t)N * sizeof *v), *w = ast_xmalloc((size_t)N * N * sizeof *w);
    ast_nanmean *acc = ast_xcalloc((size_t)G, sizeof *acc); /* per gene, as ast_morans_i averages */
    for (int b = 0; b < B; b++) {
        int n = gather_set(pos, mask, b, N, 3, x);
        gather_set(expr, mask, b, N, G, e);
        if (n < 3) continue;
        double wsum = morans_weights(x, n, w); /* the weights are the set's, shared by every gene */
        for (int g = 0; g < G; g++) {
            for (int i = 0; i < n; i++) v[i] = e[(size_t)i * G + g];
            ast_nanmean_add(&acc[g], morans_set(w, wsum, v, n));
        }
    }
    ast_indexed *o = ast_xmalloc((size_t)G * sizeof *o);
    for (int g = 0; g < G; g++) o[g] = (ast_indexed){-ast_nanmean_value(&acc[g]), g}; /* largest first, ties by index */
    qsort(o, (size_t)G, sizeof *o, ast_cmp_indexed);
    for (int j = 0; j < count; j++) out[j] = o[j].i;
    free(x), free(e), free(v), free(w), free(acc), free(o);
}
