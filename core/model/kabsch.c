/* Kabsch: R = V diag(1, 1, d) U^T from the SVD U S V^T of H = sum w p q^T
 * (see alphast/kabsch.h). The 3x3 SVD is LAPACK's, from libopenblas. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "model/kabsch.h"

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

/* The mask-weighted mean of n rows of 3. */
static void mean_rows3(const double *x, const double *w, int n, double m[3])
{
    double total = 0.0;
    m[0] = m[1] = m[2] = 0.0;
    for (int i = 0; i < n; i++) {
        total += w[i];
        for (int d = 0; d < 3; d++) m[d] += w[i] * x[i * 3 + d];
    }
    for (int d = 0; d < 3 && total > 0.0; d++) m[d] /= total;
}

void ast_align_onto(int n, const float *p, const float *q, const float *mask, float *out)
{
    double *a = ast_xmalloc((size_t)7 * n * sizeof *a), *b = a + 3 * n, *w = b + 3 * n, mp[3], mq[3], r[9];
    for (int i = 0; i < n; i++) w[i] = mask ? mask[i] : 1.0;
    for (int i = 0; i < 3 * n; i++) a[i] = p[i], b[i] = q[i];
    mean_rows3(a, w, n, mp), mean_rows3(b, w, n, mq);
    for (int i = 0; i < 3 * n; i++) a[i] -= mp[i % 3], b[i] -= mq[i % 3];
    ast_kabsch(a, b, w, n, 1, r);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            const double *ai = a + i * 3;
            out[i * 3 + k] = (float)(r[k * 3] * ai[0] + r[k * 3 + 1] * ai[1] + r[k * 3 + 2] * ai[2] + mq[k]);
        }
    free(a);
}
