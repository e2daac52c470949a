/* engine/kabsch.h: the optimal rigid alignment of two point sets (Kabsch)
 * on the host, in double: the CPU kernels of the ops aligned_mse and
 * kabsch_align (ops/ops_aligned.c; the sampler's alignment), and through
 * model/kabsch.h the RMSD metric and the placements. */
#ifndef ALPHAST_ENGINE_KABSCH_H
#define ALPHAST_ENGINE_KABSCH_H

/* The orthogonal 3x3 R (row-major) that minimises sum_i w_i |R p_i - q_i|^2
 * over n points p, q (rows of 3, double), both already centred (with the
 * same weights). w NULL weighs every point 1. With allow_reflection,
 * det R may be -1 (the orthogonal Procrustes solution); else R is a proper
 * rotation. Degenerate inputs (all points at the origin) give R = I. */
void ast_kabsch(const double *p, const double *q, const double *w, int n, int allow_reflection, double r[9]);

/* Subtracts the w-weighted mean of n rows of 3 from x in place (w NULL:
 * all 1); returns the total weight. */
double ast_center_rows3(double *x, const double *w, int n);

#endif
