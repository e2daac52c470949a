/* Spread/skill, the energy score on distance vectors and per-cell coverage
 * of S placements of the same sets (alphast/uncertainty.h). Placements are
 * defined up to a rigid motion, so every comparison of positions is made
 * after a Kabsch alignment (reflection allowed, no scale: a wrong scale
 * is an error the measures should see). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "model/kabsch.h"
#include "eval/uncertainty.h"

/* Generalised Procrustes converges in a few rounds once every sample is
 * aligned onto the first; the mean moves by far less than a cell spacing
 * after five (tests/test_uncertainty.c checks spreads to 2 %). */
#define GPA_ROUNDS 5

typedef struct totals {
    double spread2, err2, energy; /* sums over cells (spread2 over samples too), over sets */
    long cells, covered;
    int sets;
} totals;

static void rotate_rows(double *x, int n, const double r[9])
{
    for (int i = 0; i < n; i++) {
        double *p = x + 3 * i, v[3] = {p[0], p[1], p[2]};
        for (int a = 0; a < 3; a++) p[a] = r[a * 3] * v[0] + r[a * 3 + 1] * v[1] + r[a * 3 + 2] * v[2];
    }
}

static double dist2(const double *a, const double *b)
{
    return (a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]) + (a[2] - b[2]) * (a[2] - b[2]);
}

/* The S samples a [S, n, 3] aligned onto their mean m [n, 3] (both
 * centred), and then, with it, onto the centred truth q. */
static void align_all(int S, int n, double *a, double *m, const double *q)
{
    double r[9];
    for (int s = 0; s < S; s++) ast_center_rows3(a + (size_t)s * 3 * n, NULL, n);
    memcpy(m, a, (size_t)3 * n * sizeof *m); /* the first sample is the first reference */
    for (int round = 0; round < GPA_ROUNDS; round++) {
        for (int s = 0; s < S; s++) {
            ast_kabsch(a + (size_t)s * 3 * n, m, NULL, n, 1, r);
            rotate_rows(a + (size_t)s * 3 * n, n, r);
        }
        for (int i = 0; i < 3 * n; i++) {
            double sum = 0.0;
            for (int s = 0; s < S; s++) sum += a[(size_t)s * 3 * n + i];
            m[i] = sum / S;
        }
    }
    ast_kabsch(m, q, NULL, n, 1, r);
    rotate_rows(m, n, r);
    for (int s = 0; s < S; s++) rotate_rows(a + (size_t)s * 3 * n, n, r);
}

/* Cell i is covered when its truth is no farther from the centre of the
 * S + 1 points than the farthest sample. */
static int covered(int S, int n, int i, const double *a, const double *q)
{
    double c[3] = {q[3 * i], q[3 * i + 1], q[3 * i + 2]}, reach = 0.0;
    for (int s = 0; s < S; s++)
        for (int k = 0; k < 3; k++) c[k] += a[((size_t)s * n + i) * 3 + k];
    for (int k = 0; k < 3; k++) c[k] /= S + 1;
    for (int s = 0; s < S; s++) reach = fmax(reach, dist2(a + ((size_t)s * n + i) * 3, c));
    return dist2(q + 3 * i, c) <= reach;
}

/* The pairwise distances of n cells x [n, 3], into d [n (n - 1) / 2]. */
static void distance_vector(const double *x, int n, double *d)
{
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) d[k++] = sqrt(dist2(x + 3 * i, x + 3 * j));
}

static double rms_diff(const double *u, const double *v, size_t P)
{
    double sum = 0.0;
    for (size_t k = 0; k < P; k++) sum += (u[k] - v[k]) * (u[k] - v[k]);
    return sqrt(sum / P);
}

/* E|D_s - D| - E|D_s - D_s'| / 2 with the RMS over the P pairs as the
 * norm; the second expectation over distinct samples (the fair estimator,
 * unbiased for small S). */
static double energy_score(int S, int n, const double *a, const double *q)
{
    size_t P = (size_t)n * (n - 1) / 2;
    double *d = ast_xmalloc((S + 1) * P * sizeof *d), *truth = d + S * P, fit = 0.0, spread = 0.0;
    distance_vector(q, n, truth);
    for (int s = 0; s < S; s++) {
        distance_vector(a + (size_t)s * 3 * n, n, d + s * P);
        fit += rms_diff(d + s * P, truth, P) / S;
    }
    for (int s = 0; s < S; s++)
        for (int t = s + 1; t < S; t++) spread += rms_diff(d + s * P, d + t * P, P) / ((double)S * (S - 1));
    free(d);
    return fit - spread;
}

static void one_set(int S, int n, double *a, double *m, double *q, totals *t)
{
    ast_center_rows3(q, NULL, n);
    align_all(S, n, a, m, q);
    for (int i = 0; i < n; i++) {
        t->err2 += dist2(m + 3 * i, q + 3 * i);
        for (int s = 0; s < S; s++) t->spread2 += dist2(a + ((size_t)s * n + i) * 3, m + 3 * i);
        t->covered += covered(S, n, i, a, q);
    }
    t->cells += n;
    t->energy += energy_score(S, n, a, q);
    t->sets++;
}

void ast_uncertainty_compute(int S, int B, int N, const float *samples, const float *truth, const float *mask,
                             ast_uncertainty *out)
{
    totals t = {0};
    double *a = ast_xmalloc((size_t)(S + 2) * N * 3 * sizeof *a), *m = a + (size_t)S * N * 3, *q = m + (size_t)N * 3;
    for (int b = 0; b < B; b++) {
        int n = 0;
        while (n < N && (!mask || mask[(size_t)b * N + n] > 0.5f)) n++;
        if (n < 2) continue; /* one cell has no arrangement */
        for (int s = 0; s < S; s++)
            for (int i = 0; i < 3 * n; i++) a[(size_t)s * 3 * n + i] = samples[(((size_t)s * B + b) * N) * 3 + i];
        for (int i = 0; i < 3 * n; i++) q[i] = truth[(size_t)b * N * 3 + i];
        one_set(S, n, a, m, q, &t);
    }
    free(a);
    double spread = S > 1 && t.cells ? sqrt(t.spread2 / ((double)(S - 1) * t.cells)) : NAN;
    double skill = t.cells ? sqrt(t.err2 / t.cells) : NAN;
    *out = (ast_uncertainty){.samples = S, .spread = spread, .skill = skill,
                             .spread_skill = sqrt((S + 1.0) / S) * spread / skill,
                             .energy = t.sets ? t.energy / t.sets : NAN,
                             .coverage = S > 1 && t.cells ? (double)t.covered / t.cells : NAN,
                             .coverage_nominal = S / (S + 1.0)};
}

const char *ast_uncertainty_judgement(const ast_uncertainty *u)
{
    if (!isfinite(u->spread_skill) || !isfinite(u->coverage)) return NULL;
    if (u->spread_skill < 0.5 || u->coverage < 0.5 * u->coverage_nominal) return "overconfident";
    return u->spread_skill > 2.0 ? "underconfident" : "calibrated";
}
