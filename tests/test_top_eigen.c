/* The Krylov path of ast_top_eigenpairs against a matrix whose spectrum is
 * known by construction: a = h diag(lambda) h with h = I - 2 u u' (a dense
 * orthogonal reflection), so the eigenvector of lambda_i is h e_i. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "engine/engine.h"
#include "model/top_eigen.h"

#define N 600 /* above the size that goes to dsyevr whole */

/* The spectrum: a top three (10, 9, 8) above a bulk in [-5, 5], and two
 * eigenvalues larger in magnitude but negative (-50, -40), which a solver
 * of the largest magnitudes would return instead. */
static double spectrum(int i)
{
    if (i == 0) return -50.0;
    if (i == 1) return -40.0;
    if (i >= N - 3) return 10.0 - (N - 1 - i);
    return -5.0 + 10.0 * i / N;
}

static void reflected(double *a, double *u)
{
    ast_rng rng;
    ast_rng_seed(&rng, 3);
    double norm = 0.0;
    for (int i = 0; i < N; i++) u[i] = ast_rng_gauss(&rng), norm += u[i] * u[i];
    for (int i = 0; i < N; i++) u[i] /= sqrt(norm);
    for (int i = 0; i < N; i++) /* (h d h)_ij = d_i d_ij - 2 u_i u_j (d_i + d_j) + 4 u_i u_j (u' d u) */
        for (int j = 0; j < N; j++) a[(size_t)i * N + j] = (i == j ? spectrum(i) : 0.0) - 2.0 * u[i] * u[j] * (spectrum(i) + spectrum(j));
    double udu = 0.0;
    for (int i = 0; i < N; i++) udu += u[i] * u[i] * spectrum(i);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) a[(size_t)i * N + j] += 4.0 * u[i] * u[j] * udu;
}

/* Residuals of at most 1e-9 |a| (|a| = 50) bound the eigenvalue error by
 * 5e-8 and, with a gap of 1 to the next eigenvalue, each eigenvector's
 * angle by about 5e-8: |cos| within 1e-12 of 1 (1 - cos ~ angle^2 / 2);
 * 1e-10 leaves room for the rounding of the products (600 terms of 1e-16). */
Test(top_eigen, krylov_finds_the_algebraically_largest_pairs)
{
    for (int exact = 0; exact <= 1; exact++) {
        double *a = ast_xmalloc((size_t)N * N * sizeof *a), u[N], w[N], *z = ast_xmalloc((size_t)3 * N * sizeof *z);
        reflected(a, u);
        ast_top_eigenpairs(a, N, 3, w, z, exact);
        for (int c = 0; c < 3; c++) {
            int i = N - 3 + c; /* w ascending: 8, 9, 10 */
            cr_expect(fabs(w[c] - spectrum(i)) < 1e-7, "eigenvalue %d: %.12g, want %g (exact %d)", c, w[c], spectrum(i), exact);
            double dot = 0.0; /* with h e_i = e_i - 2 u u_i */
            for (int j = 0; j < N; j++) dot += z[(size_t)c * N + j] * ((j == i) - 2.0 * u[j] * u[i]);
            cr_expect(fabs(fabs(dot) - 1.0) < 1e-10, "eigenvector %d: |cos| %.15f (exact %d)", c, fabs(dot), exact);
        }
        free(a), free(z);
    }
}
