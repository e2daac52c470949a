/* Kabsch on the host: R = V diag(1, 1, d) U^T from the SVD U S V^T of
 * H = sum w p q^T (see engine/kabsch.h). The 3x3 SVD is LAPACK's, from
 * libopenblas. */
#include "engine/engine.h"
#include "engine/kabsch.h"

/* Debian's libopenblas-dev installs no lapack.h; declared as LAPACK 3.9's
 * lapack.h does, with the hidden character lengths gfortran passes. */
extern void dgesvd_(const char *jobu, const char *jobvt, const int *m, const int *n, double *a, const int *lda,
                    double *s, double *u, const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork,
                    int *info, size_t jobu_len, size_t jobvt_len);

double ast_center_rows3(double *x, const double *w, int n)
{
    double mean[3] = {0}, total = 0.0;
    for (int i = 0; i < n; i++) {
        double wi = w ? w[i] : 1.0;
        total += wi;
        for (int d = 0; d < 3; d++) mean[d] += wi * x[i * 3 + d];
    }
    if (total > 0.0)
        for (int i = 0; i < n; i++)
            for (int d = 0; d < 3; d++) x[i * 3 + d] -= mean[d] / total;
    return total;
}

static double det3(const double m[9])
{
    return m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6]) + m[2] * (m[3] * m[7] - m[4] * m[6]);
}

void ast_kabsch(const double *p, const double *q, const double *w, int n, int allow_reflection, double r[9])
{
    double h[9] = {0}; /* column-major for LAPACK: h[i + 3 j] = sum w p_i q_j */
    for (int k = 0; k < n; k++)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++) h[i + 3 * j] += (w ? w[k] : 1.0) * p[k * 3 + i] * q[k * 3 + j];
    double s[3], u[9], vt[9], work[64];
    int three = 3, lwork = 64, info = 0;
    dgesvd_("A", "A", &three, &three, h, &three, s, u, &three, vt, &three, work, &lwork, &info, 1, 1);
    AST_ASSERT(info == 0, "dgesvd failed on a 3x3 matrix (info %d)", info);
    /* R[a][b] = sum_c V[a][c] D[c] U[b][c]; U[b][c] = u[b + 3c], V[a][c] = vt[c + 3a]. */
    double d[3] = {1.0, 1.0, 1.0};
    for (int pass = 0; pass < 2; pass++) {
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++) {
                double v = 0.0;
                for (int c = 0; c < 3; c++) v += vt[c + 3 * a] * d[c] * u[b + 3 * c];
                r[a * 3 + b] = v;
            }
        if (allow_reflection || det3(r) > 0.0) return;
        d[2] = -1.0; /* flip the axis of the smallest singular value */
    }
}
