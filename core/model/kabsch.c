/* ast_align_onto (see model/kabsch.h): the mask's weighted means removed,
 * Kabsch (engine/kabsch.c), the means of q put back. */
#include <stdlib.h>

#include "engine/engine.h"
#include "model/kabsch.h"

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
