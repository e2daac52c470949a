/* Generated positions of 2-D data in two coordinates. The model places
 * cells in 3-D and, trained on distances or up to a rotation, in no
 * particular frame: a planar set may come out tilted. Rotating it onto its
 * principal axes puts its best-fitting plane at z = 0, so writing x and y
 * drops the least of the arrangement. The symmetric 3x3 eigenproblem is
 * LAPACK's, from libopenblas (as the Kabsch SVD). */
#include <stddef.h>

#include "eval/sample.h"

/* Declared as LAPACK 3.9's lapack.h does (Debian's libopenblas-dev has no
 * lapack.h), with the hidden character lengths gfortran passes. */
extern void dsyev_(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w,
                   double *work, const int *lwork, int *info, size_t jobz_len, size_t uplo_len);

/* The weighted centre and the scatter matrix about it (column-major). */
static void scatter(int N, const float *pos, const float *mask, double c[3], double s[9])
{
    double total = 0.0;
    for (int k = 0; k < 9; k++) s[k] = 0.0;
    c[0] = c[1] = c[2] = 0.0;
    for (int i = 0; i < N; i++) {
        double w = mask ? mask[i] : 1.0;
        total += w;
        for (int a = 0; a < 3; a++) c[a] += w * pos[i * 3 + a];
    }
    for (int a = 0; a < 3 && total > 0.0; a++) c[a] /= total;
    for (int i = 0; i < N; i++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                s[a + 3 * b] += (mask ? mask[i] : 1.0) * (pos[i * 3 + a] - c[a]) * (pos[i * 3 + b] - c[b]);
}

void ast_positions_to_principal_axes(int N, float *pos, const float *mask)
{
    double c[3], s[9], ev[3], work[64];
    int three = 3, lwork = 64, info = 0;
    scatter(N, pos, mask, c, s);
    dsyev_("V", "U", &three, s, &three, ev, work, &lwork, &info, 1, 1);
    AST_ASSERT(info == 0, "dsyev failed on a 3x3 scatter matrix (info %d)", info);
    /* Eigenvalues ascend: the widest axis is the last column of s. */
    for (int i = 0; i < N; i++) {
        double d[3] = {pos[i * 3] - c[0], pos[i * 3 + 1] - c[1], pos[i * 3 + 2] - c[2]};
        for (int k = 0; k < 3; k++) {
            const double *axis = s + 3 * (2 - k);
            pos[i * 3 + k] = (float)(c[k] + axis[0] * d[0] + axis[1] * d[1] + axis[2] * d[2]);
        }
    }
}

void ast_positions_flatten(int B, int N, float *pos, const float *mask)
{
    for (int b = 0; b < B; b++) {
        float *set = pos + (int64_t)b * N * 3;
        ast_positions_to_principal_axes(N, set, mask ? mask + (int64_t)b * N : NULL);
        for (int i = 0; i < N; i++) set[i * 3 + 2] = 0.0f;
    }
}
