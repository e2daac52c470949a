/* The metrics against small cases computed by hand, and the chance level
 * of k-NN preservation against its closed form. Cases of cells on a line
 * put them on the x axis: the metrics see rows of 3 either way. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "eval/metrics.h"

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

/* A rotation about (1, 2, 2)/3 by 0.7 rad, a reflection of z, a scale
 * and a shift: with scale 2.5, a similarity Procrustes and k-NN must
 * ignore; with scale 1, a rigid motion the RMSD must ignore too. */
static void transform(const float *in, int n, double scale, float *out)
{
    double u[3] = {1.0 / 3, 2.0 / 3, 2.0 / 3}, c = cos(0.7), s = sin(0.7);
    for (int i = 0; i < n; i++) {
        const float *p = in + 3 * i;
        double dot = u[0] * p[0] + u[1] * p[1] + u[2] * p[2];
        double cross[3] = {u[1] * p[2] - u[2] * p[1], u[2] * p[0] - u[0] * p[2], u[0] * p[1] - u[1] * p[0]};
        for (int d = 0; d < 3; d++) {
            double rot = p[d] * c + cross[d] * s + u[d] * dot * (1 - c); /* Rodrigues */
            out[3 * i + d] = (float)(scale * (d == 2 ? -rot : rot) + (d + 1) * 7.0);
        }
    }
}

static const float cloud[8 * 3] = {0.1f, 0.2f, -0.3f, 1.0f, -0.5f, 0.2f, -0.7f, 0.9f, 0.4f, 0.3f, 0.3f, 1.1f,
                                   -1.2f, -0.4f, 0.0f, 0.6f, 1.3f, -0.8f, 0.0f, -1.1f, -0.6f, 0.8f, 0.1f, 0.5f};

Test(metrics, procrustes_ignores_similarities)
{
    float moved[8 * 3];
    transform(cloud, 8, 2.5, moved);
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
    transform(cloud, 8, 2.5, moved);
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
    transform(cloud, 8, 2.5, p);
    /* set 1: two valid cells at distance 1 predicted 3 apart: two of the
     * four entries of D differ by 2 -> dist_mse (4 + 4) / 4 = 2. */
    float t1[6] = {0, 0, 0, 1, 0, 0}, p1[6] = {0, 0, 0, 0, 3, 0};
    memcpy(t + N * 3, t1, sizeof t1);
    memcpy(p + N * 3, p1, sizeof p1);
    for (int i = 0; i < 8; i++) mask[i] = 1;
    mask[N] = mask[N + 1] = 1;
    ast_pos_metrics m;
    ast_pos_metrics_compute(2, N, t, t, mask, 3, &m);
    cr_assert_float_eq(m.knn[0], 1.0, TOL, "set 1 has 2 <= 5 cells and does not count");
    cr_assert(isnan(m.knn[1]) && isnan(m.knn[2]), "no set has more than 10 cells");
    cr_assert_float_eq(m.graph_f1, 1.0, TOL);
    cr_assert_float_eq(m.rmsd, 0.0, TOL);
    cr_assert_float_eq(m.dist_mse, 0.0, TOL);
    cr_assert_float_eq(m.dist_pearson, 1.0, TOL);
    cr_assert_float_eq(m.dist_spearman, 1.0, TOL);
    cr_assert_float_eq(m.procrustes, 0.0, TOL);
    ast_pos_metrics_compute(2, N, p, t, mask, 3, &m);
    cr_assert_float_eq(m.knn[0], 1.0, TOL);
    cr_assert_float_eq(m.graph_precision, 1.0, TOL, "a similarity keeps the 3-NN graph; set 1 does not count");
    cr_assert_float_eq(m.graph_recall, 1.0, TOL);
    cr_assert_float_eq(m.dist_row_spearman, 1.0, TOL, "a similarity keeps every row's order; set 1 does not count");
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
    /* RMSD: set 0 aligns to 1.5 x the centred cloud (no scaling), so
     * 1.5 sqrt(mean |c_i - c|^2); set 1, centred (+-0.5, 0) against
     * (0, +-1.5) and turned onto the x axis, is off by 1 at both ends. */
    double c[3] = {0}, spread = 0.0;
    for (int i = 0; i < 8 * 3; i++) c[i % 3] += cloud[i] / 8.0;
    for (int i = 0; i < 8 * 3; i++) spread += (cloud[i] - c[i % 3]) * (cloud[i] - c[i % 3]) / 8.0;
    /* The prediction is float32 of coordinates up to ~25: half an ulp,
     * 2e-6 per coordinate, moves an RMSD by at most its RMS, 3.3e-6. */
    cr_assert_float_eq(m.rmsd, (1.5 * sqrt(spread) + 1.0) / 2.0, 1e-5, "rmsd %g", m.rmsd);
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
    cr_assert_float_eq(m.knn[0], 0.25, 0.019, "knn %g", m.knn[0]); /* ast_knn_ks[0] = K */
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

/* x coordinates of cells on a line: rows of 3 with y = z = 0. */
static void on_line(const float *x, int n, float *out)
{
    for (int i = 0; i < n; i++) out[3 * i] = x[i], out[3 * i + 1] = out[3 * i + 2] = 0.0f;
}

Test(metrics, knn_at_fixed_ks_of_two_swapped_cells_by_hand)
{
    /* Set 0: cells 0-5 at x = 0..5 and 6-11 at x = 100..105; the
     * prediction swaps cells 0 and 6. k = 5: a cell's 5-NN are the rest of
     * its cluster. Cells 1-5 and 7-11 keep 4 of 5, cells 0 and 6 none:
     * (10 * 4/5) / 12 = 2/3. k = 10: a cell's 10-NN are all others but
     * the farthest, the far end of the other cluster. Cells 1-5 keep
     * theirs (cell 11 both times) -> 1; for cells 7-11 it is 0 in truth,
     * 6 predicted, for cell 0 11 and 6, for cell 6 0 and 11 -> 9/10 each:
     * (5 + 7 * 0.9) / 12 = 11.3 / 12. k = 20 > n - 1: NaN. The 5-NN graphs
     * are two K6s (30 edges) each; they share the K5s on 1-5 and 7-11 (20):
     * precision = recall = F1 = 2/3. Set 1 has 4 valid cells (<= every k)
     * and does not count; the padding is far-away garbage. */
    enum { N = 14 };
    float t[2 * N * 3], p[2 * N * 3], mask[2 * N] = {0}, x[12];
    for (int i = 0; i < 2 * N * 3; i++) t[i] = p[i] = 1e3f * (float)(i % 5);
    for (int i = 0; i < 12; i++) x[i] = (float)(i < 6 ? i : 94 + i), mask[i] = 1;
    on_line(x, 12, t);
    x[0] = 100.0f, x[6] = 0.0f;
    on_line(x, 12, p);
    for (int i = 0; i < 4; i++) mask[N + i] = 1;
    ast_pos_metrics m;
    ast_pos_metrics_compute(2, N, p, t, mask, 5, &m);
    cr_assert_eq(ast_knn_ks[0], 5);
    cr_assert_float_eq(m.knn[0], 2.0 / 3.0, TOL, "knn_k5 %g", m.knn[0]);
    cr_assert_float_eq(m.knn[1], 11.3 / 12.0, TOL, "knn_k10 %g", m.knn[1]);
    cr_assert(isnan(m.knn[2]), "no set has more than 20 cells: knn_k20 is undefined, not 0");
    cr_assert_float_eq(m.graph_precision, 2.0 / 3.0, TOL);
    cr_assert_float_eq(m.graph_recall, 2.0 / 3.0, TOL);
    cr_assert_float_eq(m.graph_f1, 2.0 / 3.0, TOL);
}

Test(metrics, knn_graph_precision_and_recall_differ_by_hand)
{
    /* k = 1. Truth on a line at 0 1 3 6 10: nearest others 1 0 1 2 3, so
     * the OR graph is the path 0-1 1-2 2-3 3-4 (4 edges; 1-2 only because
     * 2 lists 1). Predicted at 0 10 1 11 30: nearest others 2 3 0 1 3, the
     * edges 0-2 1-3 3-4 (3). Shared: 3-4. Precision 1/3, recall 1/4,
     * F1 = 2 (1/12) / (7/12) = 2/7. */
    float xt[5] = {0, 1, 3, 6, 10}, xp[5] = {0, 10, 1, 11, 30}, t[15], p[15];
    on_line(xt, 5, t);
    on_line(xp, 5, p);
    double pr, rc, f1;
    ast_knn_graph_scores(t, p, 5, 1, &pr, &rc, &f1);
    cr_assert_float_eq(pr, 1.0 / 3.0, TOL);
    cr_assert_float_eq(rc, 0.25, TOL);
    cr_assert_float_eq(f1, 2.0 / 7.0, TOL);
    ast_pos_metrics m;
    ast_pos_metrics_compute(1, 5, p, t, NULL, 1, &m);
    cr_assert_float_eq(m.graph_precision, 1.0 / 3.0, TOL);
    cr_assert_float_eq(m.graph_recall, 0.25, TOL);
    cr_assert_float_eq(m.graph_f1, 2.0 / 7.0, TOL);
    for (int i = 0; i < AST_N_KNN_KS; i++) cr_assert(isnan(m.knn[i]), "5 cells are not above k = %d", ast_knn_ks[i]);
    ast_pos_metrics_compute(1, 5, p, t, NULL, 5, &m);
    cr_assert(isnan(m.graph_precision) && isnan(m.graph_recall) && isnan(m.graph_f1), "n = k: no graph");
}

Test(metrics, dist_row_spearman_of_a_swap_by_hand)
{
    /* Truth on a line at 0 1 3 7, predicted with cells 0 and 1 swapped
     * (1 0 3 7). Rows (distances to the others in index order):
     *   cell 0: truth 1 3 7, pred 1 2 6: same order, rho 1;
     *   cell 1: truth 1 2 6, pred 1 3 7: rho 1;
     *   cell 2: truth 3 2 4, pred 2 3 4: ranks 2 1 3 vs 1 2 3, rho = 1 -
     *           6 (1 + 1) / (3 * 8) = 1/2;
     *   cell 3: truth 7 6 4, pred 6 7 4: likewise 1/2.
     * Mean 3/4. */
    float xt[4] = {0, 1, 3, 7}, xp[4] = {1, 0, 3, 7}, t[12], p[12];
    on_line(xt, 4, t);
    on_line(xp, 4, p);
    cr_assert_float_eq(ast_dist_row_spearman(t, p, 4), 0.75, TOL);
    ast_pos_metrics m;
    ast_pos_metrics_compute(1, 4, p, t, NULL, 10, &m);
    cr_assert_float_eq(m.dist_row_spearman, 0.75, TOL);
    /* On a line at 0 1 2 the middle cell's row (1, 1) is constant: it has
     * no rho and is skipped, not counted 0 (which would give 2/3). Cells
     * that all coincide leave no rho at all; nor do rows of one distance. */
    float x3[3] = {0, 1, 2}, l3[9], same[9] = {0};
    on_line(x3, 3, l3);
    cr_assert_float_eq(ast_dist_row_spearman(l3, l3, 3), 1.0, TOL);
    cr_assert(isnan(ast_dist_row_spearman(same, same, 3)), "constant rows");
    cr_assert(isnan(ast_dist_row_spearman(t, p, 2)), "rows of one distance");
}

Test(metrics, undefined_metrics_are_nan_and_old_ones_stay_zero)
{
    /* Two sets of 2 valid cells among 4 (the rest padding): every k is
     * above n - 1, rows have one distance; the RMSD is defined: each set
     * is the truth (+-0.5, 0) against (+-1.5, 0), off by 1 at both ends. */
    float t[2 * 4 * 3] = {0}, p[2 * 4 * 3] = {0}, mask[8] = {1, 1, 0, 0, 0, 1, 0, 1};
    for (int s = 0; s < 2; s++) {
        int a = s ? 5 : 0, b = s ? 7 : 1;
        t[3 * b] = 1.0f, p[3 * b] = 3.0f;
        t[3 * a + 1] = t[3 * b + 1] = p[3 * a + 1] = p[3 * b + 1] = (float)s; /* set 1 lies off the axis */
    }
    for (int i = 0; i < 8; i++)
        if (mask[i] == 0) t[3 * i] = p[3 * i] = -50.0f * i; /* padding that would change every metric */
    ast_pos_metrics m;
    ast_pos_metrics_compute(2, 4, p, t, mask, 1, &m);
    for (int i = 0; i < AST_N_KNN_KS; i++) cr_assert(isnan(m.knn[i]), "knn at %d", ast_knn_ks[i]);
    cr_assert(isnan(m.dist_row_spearman), "dist_row_spearman %g", m.dist_row_spearman);
    cr_assert_float_eq(m.graph_precision, 1.0, TOL, "k = 1 < n: two cells make one edge, the same in both");
    cr_assert_float_eq(m.rmsd, 1.0, TOL);
    cr_assert_float_eq(m.procrustes, 0.0, TOL, "as before: no set counts, 0");
    cr_assert_float_eq(m.dist_mse, 2.0, TOL, "D entries 1 vs 3 twice: (4 + 4) / 4");
    ast_pos_metrics_compute(2, 4, p, t, mask, 2, &m);
    cr_assert(isnan(m.graph_precision) && isnan(m.graph_f1), "k = 2 >= n");
}

Test(metrics, rmsd_ignores_rotation_reflection_and_shift)
{
    /* The rigid copy has det -1 (the z reflection): Kabsch with reflection
     * aligns it exactly. Float32 rounding of the copy's coordinates (up to
     * ~22: half an ulp is 1e-6, 1.7e-6 per point) bounds the RMSD, since
     * the exact inverse motion is one candidate alignment. */
    float moved[8 * 3];
    transform(cloud, 8, 1.0, moved);
    cr_assert_float_eq(ast_rmsd_aligned(cloud, cloud, 8), 0.0, TOL);
    cr_assert_float_eq(ast_rmsd_aligned(cloud, moved, 8), 0.0, 2e-6);
    /* No scaling: 2.5 x the cloud is 1.5 x its centred spread away. */
    transform(cloud, 8, 2.5, moved);
    double c[3] = {0}, spread = 0.0;
    for (int i = 0; i < 8 * 3; i++) c[i % 3] += cloud[i] / 8.0;
    for (int i = 0; i < 8 * 3; i++) spread += (cloud[i] - c[i % 3]) * (cloud[i] - c[i % 3]) / 8.0;
    cr_assert_float_eq(ast_rmsd_aligned(cloud, moved, 8), 1.5 * sqrt(spread), 5e-6); /* coordinates up to ~25 */
}

Test(metrics, rmsd_of_planar_sets_by_hand)
{
    /* 2-D data is stored with z = 0. Truth (+-1, 0), (0, +-1); the
     * prediction stretches y to +-2. H = sum p q^T = diag(2, 4, 0): R = I
     * on the plane (the third axis is free and moves nothing), and the
     * points (0, +-2) are 1 off: RMSD sqrt(2 / 4). The same after turning
     * the prediction by 30 degrees in the plane, mirroring x and shifting
     * it; and after tipping it into the x-z plane (Kabsch must use the
     * third axis). Entries are O(1) floats: 1e-6. */
    float t[12] = {1, 0, 0, -1, 0, 0, 0, 1, 0, 0, -1, 0}, p[12] = {1, 0, 0, -1, 0, 0, 0, 2, 0, 0, -2, 0};
    float turned[12], tipped[12];
    double c = cos(M_PI / 6), s = sin(M_PI / 6);
    for (int i = 0; i < 4; i++) {
        double x = p[3 * i], y = p[3 * i + 1];
        turned[3 * i] = (float)(-(c * x - s * y) + 3.0), turned[3 * i + 1] = (float)(s * x + c * y - 2.0);
        turned[3 * i + 2] = 0.0f;
        tipped[3 * i] = (float)x, tipped[3 * i + 1] = 0.0f, tipped[3 * i + 2] = (float)y;
    }
    cr_assert_float_eq(ast_rmsd_aligned(t, p, 4), sqrt(0.5), TOL);
    cr_assert_float_eq(ast_rmsd_aligned(t, turned, 4), sqrt(0.5), TOL);
    cr_assert_float_eq(ast_rmsd_aligned(t, tipped, 4), sqrt(0.5), TOL);
    cr_assert_float_eq(ast_rmsd_aligned(p, turned, 4), 0.0, TOL, "a planar rigid copy");
}

Test(metrics, most_spatial_genes_prefers_a_smooth_gene_over_noise)
{
    /* Four 6 x 6 grids (z = 0) with 4 padded cells each. Gene 0 is
     * N(0, 10^2) noise: 100 x the variance of gene 1, a gentle gradient in
     * x (0.1 x), but spatially random. Gene 2 is constant (I = 0), gene 3 a
     * copy of gene 1 (a tie, broken by index). The most variable gene
     * would be 0; the most spatial must be 1, then 3. Moran's I of the
     * gradient is 0.39; of the noise, -1/35 in expectation, and within
     * +-0.02 for each of seeds 1-29: the margin is 20 of its spreads. */
    enum { B = 4, N = 40, G = 4 };
    static float pos[B * N * 3], expr[B * N * G], mask[B * N];
    ast_rng r;
    ast_rng_seed(&r, 11);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            float *x = pos + (b * N + i) * 3, *e = expr + (b * N + i) * G;
            x[0] = (float)(i % 6), x[1] = (float)(i / 6), x[2] = 0.0f;
            mask[b * N + i] = i < 36;
            e[0] = 10.0f * ast_rng_gauss(&r), e[1] = e[3] = 0.1f * x[0], e[2] = 1.0f;
            if (i >= 36) e[1] = e[3] = 1e3f * (float)(i % 2); /* padding that would make gene 1 rough */
        }
    int top[G];
    ast_most_spatial_genes(B, N, G, pos, expr, mask, G, top);
    double i0 = ast_morans_i(B, N, pos, expr, G, mask), i1 = ast_morans_i(B, N, pos, expr + 1, G, mask);
    cr_assert(top[0] == 1 && top[1] == 3, "picked %d %d (I: noise %g, gradient %g)", top[0], top[1], i0, i1);
    int one;
    ast_most_spatial_genes(B, N, G, pos, expr, mask, 1, &one);
    cr_assert_eq(one, 1);
}

/* The metric table: one row per key, each reads its own field, and the
 * directions eval.json will carry are the ones the metrics mean. */
Test(metrics, the_table_reads_each_field_once)
{
    ast_pos_metrics pos = {.knn = {0.1, 0.2, 0.3}, .rmsd = 4.0, .procrustes = 0.5};
    ast_expr_metrics expr = {.mse = 2.0, .pcc_gene = 0.7};
    int seen_rmsd = 0, seen_knn10 = 0, seen_pcc = 0;
    for (int i = 0; i < ast_n_metric_defs; i++) {
        const ast_metric_def *m = &ast_metric_defs[i];
        for (int j = 0; j < i; j++) cr_assert_str_neq(m->name, ast_metric_defs[j].name, "one row per key");
        const void *in = m->group == AST_METRIC_POSITIONS ? (const void *)&pos : (const void *)&expr;
        if (!strcmp(m->name, "rmsd")) {
            seen_rmsd = 1;
            cr_assert_eq(ast_metric_value(m, in), 4.0);
            cr_assert_eq(m->better, AST_BETTER_LOWER);
        }
        if (!strcmp(m->name, "knn_k10")) {
            seen_knn10 = 1;
            cr_assert_eq(ast_metric_value(m, in), 0.2);
            cr_assert_eq(m->better, AST_BETTER_HIGHER);
        }
        if (!strcmp(m->name, "pcc_gene")) {
            seen_pcc = 1;
            cr_assert_eq(ast_metric_value(m, in), 0.7);
            cr_assert_eq(m->group, AST_METRIC_EXPRESSION);
        }
    }
    cr_assert(seen_rmsd && seen_knn10 && seen_pcc);
    cr_assert_str_eq(ast_better_name(AST_BETTER_LOWER), "lower");
}
