/* The metrics against small cases computed by hand, and the chance level
 * of k-NN preservation against its closed form. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "alphast/metrics.h"

/* Everything is summed in double over at most a few thousand terms, and
 * the SVD of a 3x3 matrix is accurate to ~1e-15; inputs are float32, so
 * values that are exact by construction agree to float rounding of O(1)
 * coordinates: 1e-6. */
#define TOL 1e-6

Test(metrics, pearson_and_constant_vectors)
{
    double x[4] = {1, 2, 3, 4}, y[4] = {2, 4, 6, 8}, z[4] = {4, 3, 2, 1}, c[4] = {5, 5, 5, 5};
    cr_assert_float_eq(ast_pearson(x, y, 4), 1.0, TOL);
    cr_assert_float_eq(ast_pearson(x, z, 4), -1.0, TOL);
    cr_assert(isnan(ast_pearson(x, c, 4)), "a constant vector has no correlation");
}

Test(metrics, ranks_average_ties)
{
    double x[5] = {10, 20, 20, 5, 20}, r[5];
    ast_ranks(x, 5, r);
    double want[5] = {2, 4, 4, 1, 4}; /* the three 20s share ranks 3, 4, 5 */
    for (int i = 0; i < 5; i++) cr_assert_float_eq(r[i], want[i], TOL, "rank %d", i);
}

Test(metrics, spearman_with_ties_by_hand)
{
    /* ranks x = 1, 2.5, 2.5, 4 and y = 1, 3, 2, 4: centred dot 4.5,
     * squared norms 4.5 and 5, so rho = 4.5 / sqrt(22.5) = sqrt(0.9). */
    double x[4] = {1, 2, 2, 3}, y[4] = {1, 3, 2, 4};
    cr_assert_float_eq(ast_spearman(x, y, 4), sqrt(0.9), TOL);
}

/* A rotation about (1, 2, 2)/3 by 0.7 rad, a reflection of z, scale 2.5
 * and a shift: every similarity Procrustes and k-NN must ignore. */
static void transform(const float *in, int n, float *out)
{
    double u[3] = {1.0 / 3, 2.0 / 3, 2.0 / 3}, c = cos(0.7), s = sin(0.7);
    for (int i = 0; i < n; i++) {
        const float *p = in + 3 * i;
        double dot = u[0] * p[0] + u[1] * p[1] + u[2] * p[2];
        double cross[3] = {u[1] * p[2] - u[2] * p[1], u[2] * p[0] - u[0] * p[2], u[0] * p[1] - u[1] * p[0]};
        for (int d = 0; d < 3; d++) {
            double rot = p[d] * c + cross[d] * s + u[d] * dot * (1 - c); /* Rodrigues */
            out[3 * i + d] = (float)(2.5 * (d == 2 ? -rot : rot) + (d + 1) * 7.0);
        }
    }
}

static const float cloud[8 * 3] = {0.1f, 0.2f, -0.3f, 1.0f, -0.5f, 0.2f, -0.7f, 0.9f, 0.4f, 0.3f, 0.3f, 1.1f,
                                   -1.2f, -0.4f, 0.0f, 0.6f, 1.3f, -0.8f, 0.0f, -1.1f, -0.6f, 0.8f, 0.1f, 0.5f};

Test(metrics, procrustes_ignores_similarities)
{
    float moved[8 * 3];
    transform(cloud, 8, moved);
    cr_assert_float_eq(ast_procrustes(cloud, cloud, 8), 0.0, TOL);
    cr_assert_float_eq(ast_procrustes(cloud, moved, 8), 0.0, TOL);
}

Test(metrics, procrustes_of_a_stretched_square_by_hand)
{
    /* Truth (+-1, 0), (0, +-1): norm 2. Prediction stretched to (0, +-2):
     * norm sqrt(10). A^T B = diag(2, 4) / (2 sqrt 10), so the scale is
     * 3 / sqrt(10) and the disparity 1 - 9/10. */
    float t[12] = {1, 0, 0, -1, 0, 0, 0, 1, 0, 0, -1, 0}, p[12] = {1, 0, 0, -1, 0, 0, 0, 2, 0, 0, -2, 0};
    cr_assert_float_eq(ast_procrustes(t, p, 4), 0.1, TOL);
    float collapsed[12] = {0};
    cr_assert_float_eq(ast_procrustes(t, collapsed, 4), 1.0, TOL, "no spread explains nothing");
}

Test(metrics, knn_perfect_transformed_and_by_hand)
{
    float moved[8 * 3];
    transform(cloud, 8, moved);
    cr_assert_float_eq(ast_knn_overlap(cloud, cloud, 8, 3), 1.0, TOL);
    cr_assert_float_eq(ast_knn_overlap(cloud, moved, 8, 3), 1.0, TOL);
    /* On a line at 0 1 3 6 10 the nearest others are 1 0 1 2 3; mirrored
     * (10 6 3 1 0) they are 1 2 3 4 3: cells 0 and 4 keep theirs -> 2/5. */
    float t[15] = {0, 0, 0, 1, 0, 0, 3, 0, 0, 6, 0, 0, 10, 0, 0}, p[15] = {10, 0, 0, 6, 0, 0, 3, 0, 0, 1, 0, 0, 0, 0, 0};
    cr_assert_float_eq(ast_knn_overlap(t, p, 5, 1), 0.4, TOL);
}

Test(metrics, position_metrics_of_a_batch_ignore_padding)
{
    enum { N = 10 };
    float t[2 * N * 3], p[2 * N * 3], mask[2 * N] = {0};
    for (int i = 0; i < 2 * N * 3; i++) t[i] = p[i] = 1e3f * (float)(i % 7); /* padding: far away garbage */
    memcpy(t, cloud, sizeof cloud);
    transform(cloud, 8, p);
    /* set 1: two valid cells at distance 1 predicted 3 apart: two of the
     * four entries of D differ by 2 -> dist_mse (4 + 4) / 4 = 2. */
    float t1[6] = {0, 0, 0, 1, 0, 0}, p1[6] = {0, 0, 0, 0, 3, 0};
    memcpy(t + N * 3, t1, sizeof t1);
    memcpy(p + N * 3, p1, sizeof p1);
    for (int i = 0; i < 8; i++) mask[i] = 1;
    mask[N] = mask[N + 1] = 1;
    ast_pos_metrics m;
    ast_pos_metrics_compute(2, N, t, t, mask, 3, &m);
    cr_assert_float_eq(m.knn, 1.0, TOL, "set 1 has 2 <= k cells and does not count");
    cr_assert_float_eq(m.dist_mse, 0.0, TOL);
    cr_assert_float_eq(m.dist_pearson, 1.0, TOL);
    cr_assert_float_eq(m.dist_spearman, 1.0, TOL);
    cr_assert_float_eq(m.procrustes, 0.0, TOL);
    ast_pos_metrics_compute(2, N, p, t, mask, 3, &m);
    cr_assert_float_eq(m.knn, 1.0, TOL);
    cr_assert_float_eq(m.procrustes, 0.0, TOL, "set 1 has 2 cells and does not count");
    cr_assert_float_eq(m.dist_pearson, 1.0, TOL, "a set of 2 has one distance and no correlation");
    double mse0 = 0.0; /* set 0: predicted distances are 2.5 x the true ones */
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            double d = 0.0;
            for (int k = 0; k < 3; k++) d += (cloud[i * 3 + k] - cloud[j * 3 + k]) * (cloud[i * 3 + k] - cloud[j * 3 + k]);
            mse0 += 1.5 * 1.5 * d / 64.0;
        }
    cr_assert_float_eq(m.dist_mse, (mse0 + 2.0) / 2.0, 1e-4 * mse0, "mean of the two sets");
}

Test(metrics, knn_of_random_coordinates_is_chance)
{
    /* Independent random layouts: each cell's predicted k-NN are k of its
     * n-1 others uniformly, so the overlap count is hypergeometric with
     * mean k^2/(n-1): knn -> k/(n-1) = 0.25 for n = 21, k = 5. Its
     * per-cell variance k(k/20)(15/20)(15/19)/k^2 = 0.0296 bounds the
     * variance of a set's mean; over 2000 independent sets the std is at
     * most 0.0038, and 5 std = 0.019. */
    enum { S = 2000, N = 21, K = 5 };
    static float t[S * N * 3], p[S * N * 3];
    ast_rng r;
    ast_rng_seed(&r, 7);
    for (int i = 0; i < S * N * 3; i++) t[i] = ast_rng_gauss(&r), p[i] = ast_rng_gauss(&r);
    ast_pos_metrics m;
    ast_pos_metrics_compute(S, N, p, t, NULL, K, &m);
    cr_assert_float_eq(m.knn, 0.25, 0.019, "knn %g", m.knn);
}

Test(metrics, morans_i_of_a_checkerboard_square_by_hand)
{
    /* Unit square, values +1 -1 +1 -1 around it. Distances: 8 entries 1,
     * 4 entries sqrt 2; the 25th percentile is 1 = h. Weights e^-1/2 join
     * opposite values (8 entries), e^-1 equal ones (4): I = n sum w y y /
     * (sum w sum y^2) = (4 e^-1 - 8 e^-1/2) / (4 e^-1 + 8 e^-1/2)
     * = (1 - 2 sqrt e) / (1 + 2 sqrt e) ~ -0.535. */
    float pos[12] = {0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0}, v[4] = {1, -1, 1, -1};
    double want = (1 - 2 * sqrt(M_E)) / (1 + 2 * sqrt(M_E));
    cr_assert_float_eq(ast_morans_i(1, 4, pos, v, 1, NULL), want, TOL);
    /* Two distant clusters of equal values: strongly positive. */
    float pos2[18] = {0, 0, 0, 0.1f, 0, 0, 0, 0.1f, 0, 9, 9, 0, 9.1f, 9, 0, 9, 9.1f, 0}, v2[6] = {2, 2, 2, -2, -2, -2};
    cr_assert_gt(ast_morans_i(1, 6, pos2, v2, 1, NULL), 0.5);
    float flat[6] = {3, 3, 3, 3, 3, 3};
    cr_assert_float_eq(ast_morans_i(1, 6, pos2, flat, 1, NULL), 0.0, TOL, "constant values have no autocorrelation");
}

Test(metrics, expression_perfect_and_by_hand)
{
    enum { N = 3, G = 4 };
    float t[N * G] = {1, 2, 3, 4, 2, 1, 0, 5, 3, 3, 1, 0}, mask[N] = {1, 1, 0};
    ast_expr_metrics m;
    ast_expr_metrics_compute(1, N, G, t, t, mask, &m);
    cr_assert_float_eq(m.mse, 0.0, TOL);
    cr_assert_float_eq(m.pcc_gene, 1.0, TOL);
    cr_assert_float_eq(m.pcc_cell, 1.0, TOL);
    cr_assert_float_eq(m.cosine, 1.0, TOL);
    cr_assert_float_eq(m.spearman, 1.0, TOL);
    /* +1 on every valid entry: mse = mae = 1; correlations unchanged; the
     * third (padded) cell is ignored even though it differs. */
    float p[N * G];
    for (int i = 0; i < N * G; i++) p[i] = t[i] + (i < 2 * G ? 1.0f : 50.0f);
    ast_expr_metrics_compute(1, N, G, p, t, mask, &m);
    cr_assert_float_eq(m.mse, 1.0, TOL);
    cr_assert_float_eq(m.mae, 1.0, TOL);
    cr_assert_float_eq(m.pcc_gene, 1.0, TOL);
    cr_assert_float_eq(m.pcc_cell, 1.0, TOL);
    /* cosine of (1,2,3,4)+1 with (1,2,3,4): 40 / (sqrt 54 sqrt 30); of
     * (2,1,0,5)+1 with (2,1,0,5): 38 / (sqrt 50 sqrt 30). */
    cr_assert_float_eq(m.cosine, (40.0 / sqrt(54.0 * 30.0) + 38.0 / sqrt(50.0 * 30.0)) / 2.0, TOL);
}

Test(metrics, constant_genes_count_zero)
{
    /* Two cells; gene 0 varies and is predicted reversed (r = -1), gene 1
     * is constant in truth: Pearson and Spearman count it 0 -> mean -0.5. */
    float t[4] = {1, 7, 2, 7}, p[4] = {2, 1, 1, 3};
    ast_expr_metrics m;
    ast_expr_metrics_compute(1, 2, 2, p, t, NULL, &m);
    cr_assert_float_eq(m.pcc_gene, -0.5, TOL);
    cr_assert_float_eq(m.spearman, -0.5, TOL);
}
