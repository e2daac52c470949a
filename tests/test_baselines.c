/* The baselines against small cases computed by hand: embeddings that must
 * reproduce known distances, and k-NN means over tiny reference sets. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "eval/baselines.h"

/* Inputs are small integers, the arithmetic double, outputs float32. An
 * eigenvalue comes out of dsyevr within a few eps |B| (|B| < 500 here), so
 * an eigenvalue that is 0 by hand gives coordinates of at most
 * sqrt(10 * 2.2e-16 * 500) ~ 3e-6 before the float rounding (half an ulp,
 * 1e-6 at 12, the largest coordinate). */
#define TOL 5e-6

static double dist(const float *pos, int i, int j)
{
    double s = 0.0;
    for (int d = 0; d < 3; d++) {
        double diff = (double)pos[i * 3 + d] - pos[j * 3 + d];
        s += diff * diff;
    }
    return sqrt(s);
}

static double sum_sq(const float *pos, int n, int axis)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)pos[i * 3 + axis] * pos[i * 3 + axis];
    return s;
}

Test(baselines, sq_distances_and_k_nearest)
{
    /* (0,0) (3,4) against itself and against (0,1): 0 25 / 25 0 and 1, 18. */
    float a[4] = {0, 0, 3, 4}, b[2] = {0, 1};
    double self[4], cross[2];
    ast_sq_distances(a, 2, a, 2, 2, self);
    ast_sq_distances(a, 2, b, 1, 2, cross);
    double want_self[4] = {0, 25, 25, 0}, want_cross[2] = {1, 18};
    for (int i = 0; i < 4; i++) cr_assert_eq(self[i], want_self[i], "self %d: %g", i, self[i]);
    for (int i = 0; i < 2; i++) cr_assert_eq(cross[i], want_cross[i], "cross %d: %g", i, cross[i]);
    /* the three smallest leaving out 4: 1 and 3 tie at 1 (index order), then 2 */
    double d[5] = {3, 1, 2, 1, 0};
    int near[3];
    ast_k_nearest(d, 5, 3, 4, near);
    cr_assert(near[0] == 1 && near[1] == 3 && near[2] == 2, "%d %d %d", near[0], near[1], near[2]);
}

Test(baselines, mds_of_a_line_by_hand)
{
    /* Along (1,2,2)/3 the rows sit at 0, 3 and 9; centred (mean 4) that is
     * -4, -1, 5, with 5 the largest magnitude and so positive. B has rank
     * 1: the second axis is 0, the third is left out with dims = 2. */
    float x[9] = {0, 0, 0, 1, 2, 2, 3, 6, 6}, pos[9];
    ast_baseline_mds(x, 3, 3, 2, pos);
    float want[3] = {-4, -1, 5};
    for (int i = 0; i < 3; i++) {
        cr_assert_float_eq(pos[i * 3], want[i], TOL, "cell %d: %g", i, pos[i * 3]);
        cr_assert_float_eq(pos[i * 3 + 1], 0.0, TOL);
        cr_assert_eq(pos[i * 3 + 2], 0.0f, "dims = 2 leaves z exactly 0");
    }
}

Test(baselines, mds_of_a_right_triangle_keeps_its_sides)
{
    /* Sides 3, 4, 5 in a 4-gene space; the embedding is centred and its
     * scatter is sum_{i<j} d^2 / n = (9 + 16 + 25) / 3; a plane needs no
     * third axis. */
    float x[12] = {1, 1, 0, 0, 1, 1, 3, 0, 1, 1, 0, 4}, pos[9];
    ast_baseline_mds(x, 3, 4, 3, pos);
    cr_assert_float_eq(dist(pos, 0, 1), 3.0, TOL);
    cr_assert_float_eq(dist(pos, 0, 2), 4.0, TOL);
    cr_assert_float_eq(dist(pos, 1, 2), 5.0, TOL);
    for (int d = 0; d < 3; d++) cr_assert_float_eq(pos[d] + pos[3 + d] + pos[6 + d], 0.0, TOL, "axis %d centred", d);
    cr_assert_float_eq(sum_sq(pos, 3, 0) + sum_sq(pos, 3, 1), 50.0 / 3.0, 1e-5, "scatter, float-rounded squares");
    for (int i = 0; i < 3; i++) cr_assert_float_eq(pos[i * 3 + 2], 0.0, TOL);
}

/* The L (0,0) (1,0) (2,0) (2,1) (2,2). With k = 1 each cell's nearest
 * (ties by index) are 1, 0, 1, 2, 3: the chain 0-1-2-3-4. With k = 2 the
 * extra edges 0-2 and 2-4 have length 2, as the chain between them, and
 * the next cell would be sqrt 5 away (a shortcut): so geodesics are |i-j|,
 * unrolled onto a line at -2..2 (sum of squares 10, second axis 0). */
static const float ell[10] = {0, 0, 1, 0, 2, 0, 2, 1, 2, 2};

Test(baselines, isomap_unrolls_an_l)
{
    for (int k = 1; k <= 2; k++) {
        float pos[15];
        ast_baseline_isomap(ell, 5, 2, 2, k, pos);
        for (int i = 0; i < 5; i++) {
            for (int j = 0; j < 5; j++) cr_assert_float_eq(fabs(pos[i * 3] - pos[j * 3]), (double)abs(i - j), TOL);
            cr_assert_float_eq(pos[i * 3 + 1], 0.0, TOL, "k %d cell %d", k, i);
            cr_assert_eq(pos[i * 3 + 2], 0.0f, "dims = 2 leaves z exactly 0");
        }
    }
}

Test(baselines, mds_keeps_the_bend_of_the_l)
{
    /* The L centred at (1.4, 0.6) has scatter [[3.2, 1.8], [1.8, 3.2]],
     * eigenvalues 5 and 1.4: MDS's two axes, where Isomap has 10 and 0. */
    float pos[15];
    ast_baseline_mds(ell, 5, 2, 2, pos);
    cr_assert_float_eq(sum_sq(pos, 5, 0), 5.0, 1e-5);
    cr_assert_float_eq(sum_sq(pos, 5, 1), 1.4, 1e-5);
}

Test(baselines, isomap_joins_components)
{
    /* One gene at 0 1 5 6 20 21 with k = 1: components {0,1} {5,6}
     * {20,21}. Joined by 1-5 (4), 6-20 (14) and 1-20 (19, no shorter than
     * the chain), the geodesics are the 1-D distances: the line itself,
     * centred at 53/6, 21 - 53/6 the largest magnitude and so positive. */
    float x[6] = {0, 1, 5, 6, 20, 21}, pos[18];
    ast_baseline_isomap(x, 6, 1, 3, 1, pos);
    for (int i = 0; i < 6; i++) {
        cr_assert(isfinite(pos[i * 3]) && isfinite(pos[i * 3 + 1]) && isfinite(pos[i * 3 + 2]), "cell %d", i);
        cr_assert_float_eq(pos[i * 3], x[i] - 53.0 / 6.0, TOL, "cell %d: %g", i, pos[i * 3]);
        cr_assert_float_eq(pos[i * 3 + 1], 0.0, TOL);
        cr_assert_float_eq(pos[i * 3 + 2], 0.0, TOL);
    }
}

Test(baselines, mean_nn_distance_and_rescale)
{
    /* A square of side 2: every nearest other cell is 2 away. Rescaled to
     * 0.5 every coordinate is quartered. On a line at 0 1 5 the nearest are
     * 1, 1, 4 away: mean 2. */
    float sq[12] = {0, 0, 0, 2, 0, 0, 0, 2, 0, 2, 2, 0}, line[9] = {0, 0, 0, 1, 0, 0, 5, 0, 0};
    cr_assert_float_eq(ast_mean_nn_distance(sq, 4), 2.0, TOL);
    cr_assert_float_eq(ast_mean_nn_distance(line, 3), 2.0, TOL);
    ast_rescale_to_spacing(sq, 4, 0.0);
    cr_assert_eq(sq[3], 2.0f, "spacing 0 leaves it alone");
    ast_rescale_to_spacing(sq, 4, 0.5);
    cr_assert_float_eq(ast_mean_nn_distance(sq, 4), 0.5, TOL);
    float want[12] = {0, 0, 0, 0.5f, 0, 0, 0, 0.5f, 0, 0.5f, 0.5f, 0};
    for (int i = 0; i < 12; i++) cr_assert_float_eq(sq[i], want[i], TOL);
}

/* Four reference cells: expression on a 10 x 10 square of two genes,
 * positions on a 2 x 4 rectangle; and three genes for pos_to_expr. */
static const float ref_x[8] = {0, 0, 10, 0, 0, 10, 10, 10};
static const float ref_pos[12] = {1, 1, 0, 3, 1, 0, 1, 5, 0, 3, 5, 0};
static const float ref_e[12] = {1, 0, 2, 3, 4, 2, 2, 8, 5, 6, 0, 7};

/* The reference expression [n, G] of a test, read row by row. */
typedef struct dense {
    const float *expr;
    int G;
} dense;

static void dense_row(const void *ctx, int64_t i, float *out)
{
    const dense *m = ctx;
    memcpy(out, m->expr + i * m->G, (size_t)m->G * sizeof *out);
}

Test(baselines, knn_positions_by_hand)
{
    /* (1,1): squared distances 2, 82, 82, 162 -> cells 0 and 1 (the tie by
     * index), mean (2, 1). (9,2): 85, 5, 145, 65 -> cells 1 and 3, mean
     * (3, 3). k = 10 is cut to the 4 cells: the centre (2, 3). */
    dense x_rows = {ref_x, 2};
    ast_reference_cells ref = {4, 2, ref_pos, dense_row, &x_rows};
    float x[4] = {1, 1, 9, 2}, pos[6], all[6];
    ast_baseline_knn_positions(&ref, x, 2, 2, pos);
    ast_baseline_knn_positions(&ref, x, 2, 10, all);
    float want[6] = {2, 1, 0, 3, 3, 0}, centre[3] = {2, 3, 0};
    for (int i = 0; i < 6; i++) {
        cr_assert_float_eq(pos[i], want[i], TOL, "entry %d: %g", i, pos[i]);
        cr_assert_float_eq(all[i], centre[i % 3], TOL);
    }
}

Test(baselines, mean_profile_by_hand)
{
    /* column sums 12, 12, 16 over 4 cells */
    dense e_rows = {ref_e, 3};
    ast_reference_cells ref = {4, 3, ref_pos, dense_row, &e_rows};
    float e[6], want[3] = {3, 3, 4};
    ast_baseline_mean_profile(&ref, 2, e);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(e[i], want[i % 3], TOL);
}

Test(baselines, spatial_knn_expr_by_hand)
{
    /* (2.9, 1.2): squared distances 3.65, 0.05, 14.45, 18.05 -> cells 1
     * and 0, mean (2, 2, 2). (2, 4.5): 13.25, 13.25, 1.25, 1.25 -> cells 2
     * and 3, mean (4, 4, 6). */
    dense e_rows = {ref_e, 3};
    ast_reference_cells ref = {4, 3, ref_pos, dense_row, &e_rows};
    float q[6] = {2.9f, 1.2f, 0, 2, 4.5f, 0}, e[6], want[6] = {2, 2, 2, 4, 4, 6};
    ast_baseline_spatial_knn_expr(&ref, q, 2, 2, e);
    for (int i = 0; i < 6; i++) cr_assert_float_eq(e[i], want[i], TOL, "entry %d: %g", i, e[i]);
}

/* n cells at uniform positions in [-5, 5]^2 (z = 0) with expression
 * A * position over G genes, A's entries N(0, 1) from a fixed seed. */
enum { LIN_G = 20 };
static void linear_cells(uint64_t seed, const float *a, int n, float *pos, float *x)
{
    ast_rng r;
    ast_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++) pos[i * 3 + k] = k < 2 ? 10.0f * ast_rng_uniform01(&r) - 5.0f : 0.0f;
        for (int g = 0; g < LIN_G; g++) x[i * LIN_G + g] = a[g * 2] * pos[i * 3] + a[g * 2 + 1] * pos[i * 3 + 1];
    }
}

Test(baselines, mlp_regression_learns_a_linear_map)
{
    enum { N_REF = 2000, N_Q = 200 };
    float a[LIN_G * 2], *pos = malloc(N_REF * 3 * sizeof *pos), *x = malloc(N_REF * LIN_G * sizeof *x);
    float qpos[N_Q * 3], qx[N_Q * LIN_G], got[N_Q * 3], again[N_Q * 3];
    ast_rng r;
    ast_rng_seed(&r, 7);
    for (int i = 0; i < LIN_G * 2; i++) a[i] = ast_rng_gauss(&r);
    linear_cells(1, a, N_REF, pos, x);
    linear_cells(2, a, N_Q, qpos, qx); /* unseen cells of the same map */
    dense rows = {x, LIN_G};
    ast_reference_cells ref = {N_REF, LIN_G, pos, dense_row, &rows};
    ast_mlp_regressor_config cfg = ast_mlp_regressor_defaults(60, 3);
    ast_mlp_regressor *m = ast_mlp_regressor_fit(&ref, 2, &cfg);
    ast_mlp_regressor_predict(m, qx, N_Q, got);
    ast_mlp_regressor_predict(m, qx, N_Q, again);
    ast_mlp_regressor_free(m);
    double se = 0.0;
    for (int i = 0; i < N_Q; i++) {
        for (int k = 0; k < 2; k++) se += (got[i * 3 + k] - qpos[i * 3 + k]) * (got[i * 3 + k] - qpos[i * 3 + k]);
        cr_assert_eq(got[i * 3 + 2], 0.0f, "an axis beyond dims is 0");
    }
    /* The map is exact and noise-free, so the error is the fit's alone: 0.007
     * measured against positions of sd 2.9. 0.1 (R^2 > 0.998) leaves room
     * for other BLAS summation orders, and a regressor that did not learn
     * the map (the mean position: 2.9) fails it by far. */
    double rmse = sqrt(se / (2.0 * N_Q));
    cr_assert_lt(rmse, 0.1, "held-out RMSE %g", rmse);
    cr_assert_eq(memcmp(got, again, sizeof got), 0, "prediction is deterministic");
    free(pos), free(x);
}
