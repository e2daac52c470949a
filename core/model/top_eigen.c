/* The few largest eigenpairs of a symmetric matrix (model/top_eigen.h).
 * LAPACK's dsyevr reduces the whole matrix to tridiagonal form first,
 * O(n^3) whatever range is asked for: 0.4 s of a 1,024-cell Isomap on one
 * core, for 2-3 eigenpairs. A block Krylov space (the span of Q, AQ,
 * A^2 Q, ...) holds good approximations of the extreme eigenvectors after
 * a few products with A; Rayleigh-Ritz on it (a small dsyevr) extracts
 * them, and a restart from the best Ritz vectors continues where the space
 * is full. Krylov spaces approximate both ends of the spectrum, so the
 * algebraically largest pairs are found even where a double-centred
 * geodesic matrix has larger negative eigenvalues (power iteration would
 * chase those). LAPACK has no such solver; ARPACK, which does, has no
 * development package here. BLAS does the products, LAPACK the QR and the
 * small eigenproblems. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "model/top_eigen.h"

/* Debian's libopenblas-dev installs no lapack.h; declared as LAPACK 3.9's
 * lapack.h does, with the hidden character lengths gfortran passes. */
extern void dsyevr_(const char *jobz, const char *range, const char *uplo, const int *n, double *a, const int *lda,
                    const double *vl, const double *vu, const int *il, const int *iu, const double *abstol, int *m,
                    double *w, double *z, const int *ldz, int *isuppz, double *work, const int *lwork, int *iwork,
                    const int *liwork, int *info, size_t jobz_len, size_t range_len, size_t uplo_len);
extern void dgeqrf_(const int *m, const int *n, double *a, const int *lda, double *tau, double *work, const int *lwork,
                    int *info);
extern void dorgqr_(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau,
                    double *work, const int *lwork, int *info);

/* Block size beyond the m pairs wanted (their neighbours in the spectrum
 * converge with them and speed them up), blocks per space, restarts. */
#define EXTRA_VECTORS 5
#define BLOCKS 8
#define RESTARTS 12

/* The m largest eigenpairs of a [n, n] (destroyed) by dsyevr, RANGE 'I'
 * (or all n when m == n). */
static void dense_top(double *a, int n, int m, double *w, double *z)
{
    int il = n - m + 1, iu = n, found = 0, info = 0, lwork = -1, liwork = -1, iwork_size = 0;
    double none = 0.0, abstol = 0.0, work_size = 0.0;
    int *isuppz = ast_xmalloc((size_t)2 * m * sizeof *isuppz);
    dsyevr_("V", "I", "L", &n, a, &n, &none, &none, &il, &iu, &abstol, &found, w, z, &n, isuppz, &work_size,
            &lwork, &iwork_size, &liwork, &info, 1, 1, 1);
    AST_ASSERT(info == 0, "dsyevr workspace query failed (info %d)", info);
    lwork = (int)work_size, liwork = iwork_size;
    double *work = ast_xmalloc((size_t)lwork * sizeof *work);
    int *iwork = ast_xmalloc((size_t)liwork * sizeof *iwork);
    dsyevr_("V", "I", "L", &n, a, &n, &none, &none, &il, &iu, &abstol, &found, w, z, &n, isuppz, work, &lwork, iwork,
            &liwork, &info, 1, 1, 1);
    AST_ASSERT(info == 0 && found == m, "dsyevr failed on a %d x %d matrix (info %d)", n, n, info);
    free(isuppz), free(work), free(iwork);
}

/* The space: columns [0, cols) of v [n, cap] orthonormal, w = a v. */
typedef struct krylov {
    const double *a;
    int n, m, p, cap, cols;
    double *v, *w, *theta, *y, scale; /* Ritz values [cap] ascending, vectors y [cap, cap], max |Ritz value| */
    ast_rng rng;                      /* the start block and the columns that replace lost ones */
} krylov;

/* b [n, p] minus its projection on the space, twice (once is not enough
 * in floating point). */
static void project_out(const krylov *k, double *b, double *c)
{
    for (int pass = 0; pass < 2 && k->cols > 0; pass++) {
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, k->cols, k->p, k->n, 1.0, k->v, k->n, b, k->n, 0.0, c, k->cols);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, k->n, k->p, k->cols, -1.0, k->v, k->n, c, k->cols, 1.0, b,
                    k->n);
    }
}

/* Orthonormalises the p columns at v + cols n against the space, then
 * within themselves by QR. A column that was (nearly) in the space already
 * (a converged vector's product with a) is replaced by a random one, so
 * the space keeps growing. -1 where even that fails. */
static int orthonormalise_block(krylov *k)
{
    int n = k->n, p = k->p, info = 0, lwork = 64 * p, ok = 1;
    double *b = k->v + (size_t)k->cols * n, *c = ast_xmalloc((size_t)(k->cols + 1) * p * sizeof *c);
    double *before = ast_xmalloc((size_t)p * sizeof *before);
    for (int j = 0; j < p; j++) before[j] = cblas_dnrm2(n, b + (size_t)j * n, 1);
    project_out(k, b, c);
    for (int j = 0; j < p; j++)
        if (!(cblas_dnrm2(n, b + (size_t)j * n, 1) > 1e-12 * before[j]))
            for (int i = 0; i < n; i++) b[(size_t)j * n + i] = ast_rng_gauss(&k->rng);
    project_out(k, b, c);
    for (int j = 0; j < p; j++) { /* unit columns: what is left of a residual is small, not lost */
        double norm = cblas_dnrm2(n, b + (size_t)j * n, 1);
        if (norm > 0.0) cblas_dscal(n, 1.0 / norm, b + (size_t)j * n, 1);
    }
    double *tau = ast_xmalloc((size_t)(p + lwork) * sizeof *tau), *work = tau + p;
    dgeqrf_(&n, &p, b, &n, tau, work, &lwork, &info);
    for (int j = 0; j < p && ok; j++) ok = fabs(b[(size_t)j * n + j]) > 1e-8;
    if (ok && info == 0) dorgqr_(&n, &p, &p, b, &n, tau, work, &lwork, &info);
    free(c), free(before), free(tau);
    return ok && info == 0 ? 0 : -1;
}

/* w's new block = a times v's. */
static void multiply_block(krylov *k)
{
    size_t at = (size_t)k->cols * k->n;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, k->n, k->p, k->n, 1.0, k->a, k->n, k->v + at, k->n, 0.0,
                k->w + at, k->n);
    k->cols += k->p;
}

/* Ritz pairs of the space: eigenpairs of h = v' a v (cols x cols). */
static void rayleigh_ritz(krylov *k)
{
    int c = k->cols;
    double *h = ast_xmalloc((size_t)c * c * sizeof *h);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, c, c, k->n, 1.0, k->v, k->n, k->w, k->n, 0.0, h, c);
    for (int i = 0; i < c; i++)
        for (int j = i + 1; j < c; j++) h[(size_t)i * c + j] = h[(size_t)j * c + i] = 0.5 * (h[(size_t)i * c + j] + h[(size_t)j * c + i]);
    dense_top(h, c, c, k->theta, k->y);
    k->scale = fmax(fabs(k->theta[0]), fabs(k->theta[c - 1]));
    free(h);
}

/* The top `count` Ritz vectors into z [n, count] and a z into az. */
static void ritz_vectors(const krylov *k, int count, double *z, double *az)
{
    const double *top = k->y + (size_t)(k->cols - count) * k->cols;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, k->n, count, k->cols, 1.0, k->v, k->n, top, k->cols, 0.0, z,
                k->n);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, k->n, count, k->cols, 1.0, k->w, k->n, top, k->cols, 0.0,
                az, k->n);
}

/* Whether the top m Ritz pairs have residuals within the tolerance; if
 * so, they go to w and z. */
static int converged(const krylov *k, double *w, double *z, double *az)
{
    ritz_vectors(k, k->m, z, az);
    for (int c = 0; c < k->m; c++) {
        double theta = k->theta[k->cols - k->m + c];
        cblas_daxpy(k->n, -theta, z + (size_t)c * k->n, 1, az + (size_t)c * k->n, 1);
        if (cblas_dnrm2(k->n, az + (size_t)c * k->n, 1) > AST_EIGEN_TOL * k->scale) return 0;
    }
    memcpy(w, k->theta + k->cols - k->m, (size_t)k->m * sizeof *w);
    return 1;
}

/* The space shrinks to its top p Ritz vectors, with a times them, which
 * needs no product with a (a v y = w y). */
static void restart(krylov *k, double *scratch)
{
    size_t len = (size_t)k->n * k->p;
    ritz_vectors(k, k->p, scratch, scratch + len);
    memcpy(k->v, scratch, len * sizeof *scratch), memcpy(k->w, scratch + len, len * sizeof *scratch);
    k->cols = k->p;
}

/* 0 with the pairs in w, z; -1 where the space did not converge. */
static int krylov_top(krylov *k, double *w, double *z)
{
    ast_rng_seed(&k->rng, 1); /* a fixed start: the same matrix gives the same pairs */
    for (size_t i = 0; i < (size_t)k->n * k->p; i++) k->v[i] = ast_rng_gauss(&k->rng);
    double *scratch = ast_xmalloc((size_t)2 * k->n * k->p * sizeof *scratch);
    int status = orthonormalise_block(k);
    if (status == 0) multiply_block(k);
    for (int restarts = 0; status == 0;) {
        rayleigh_ritz(k);
        if (converged(k, w, z, scratch)) break;
        if (k->cols + k->p > k->cap) {
            if (restarts++ == RESTARTS) status = -1;
            else restart(k, scratch);
            continue;
        }
        memcpy(k->v + (size_t)k->cols * k->n, k->w + (size_t)(k->cols - k->p) * k->n, (size_t)k->n * k->p * sizeof *k->v);
        status = orthonormalise_block(k);
        if (status == 0) multiply_block(k);
    }
    free(scratch);
    return status;
}

void ast_top_eigenpairs(double *a, int n, int m, double *w, double *z, int exact)
{
    int p = m + EXTRA_VECTORS, cap = BLOCKS * p;
    if (exact || n <= 4 * cap) {
        dense_top(a, n, m, w, z);
        return;
    }
    krylov k = {.a = a, .n = n, .m = m, .p = p, .cap = cap};
    k.v = ast_xmalloc((size_t)2 * n * cap * sizeof *k.v), k.w = k.v + (size_t)n * cap;
    k.theta = ast_xmalloc((size_t)cap * (cap + 1) * sizeof *k.theta), k.y = k.theta + cap;
    int status = krylov_top(&k, w, z);
    free(k.v), free(k.theta);
    if (status != 0) dense_top(a, n, m, w, z);
}
