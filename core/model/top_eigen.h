/* model/top_eigen.h: the few largest eigenpairs of a symmetric matrix, as
 * classical MDS needs them (model/expr_embed.h). */
#ifndef ALPHAST_TOP_EIGEN_H
#define ALPHAST_TOP_EIGEN_H

/* The m (1..n) algebraically largest eigenpairs of the symmetric a [n, n]
 * (both triangles filled; destroyed): w [n] holds the eigenvalues
 * ascending in its first m entries, z [m, n] the unit eigenvectors
 * (column-major, vector c is z + c n; the sign of each is arbitrary).
 * Small matrices go to LAPACK's dsyevr whole; larger ones first through a
 * block Krylov space with Rayleigh-Ritz (docs/model.md §2.12), which
 * returns pairs whose residual |a v - w v| is at most AST_EIGEN_TOL times
 * a's largest Ritz magnitude, else dsyevr. `exact` forces dsyevr. */
void ast_top_eigenpairs(double *a, int n, int m, double *w, double *z, int exact);

/* The residual bound of the Krylov path, relative to the spectral radius:
 * an eigenvector then errs by at most about AST_EIGEN_TOL / relative gap,
 * far below the float the coordinates are stored in when the gap is not
 * tiny (and where it is, the eigenvector itself is ill-defined). */
#define AST_EIGEN_TOL 1e-9

#endif
