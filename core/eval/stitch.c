/* Stitching overlapping sets into one frame (see alphast/stitch.h). */
#include <stdlib.h>

#include "model/kabsch.h"
#include "eval/stitch.h"

/* The frame's sums of positions and placement counts, per cell. */
typedef struct frame {
    double *sum; /* [n_cells, 3] */
    int *count;  /* [n_cells] */
} frame;

/* Row means of n rows of 3. */
static void mean3(const double *x, int n, double m[3])
{
    m[0] = m[1] = m[2] = 0.0;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) m[k] += x[i * 3 + k] / n;
}

/* R and the centres that take set b's shared cells onto the frame:
 * x -> R (x - from) + to; left as they are (the identity) when fewer
 * than 3 cells are shared. Returns the cells shared. */
static int fit(const ast_eval_sets *s, const float *pos, const frame *f, int b, double *p, double *q, double r[9],
               double from[3], double to[3])
{
    int n = 0;
    for (int i = 0; i < s->N; i++) {
        int64_t row = (int64_t)b * s->N + i, c = s->cells[row];
        if (s->mask[row] < 0.5f || !f->count[c]) continue;
        for (int k = 0; k < 3; k++) p[n * 3 + k] = pos[row * 3 + k], q[n * 3 + k] = f->sum[c * 3 + k] / f->count[c];
        n++;
    }
    if (n < 3) return n;
    mean3(p, n, from), mean3(q, n, to);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) p[i * 3 + k] -= from[k], q[i * 3 + k] -= to[k];
    ast_kabsch(p, q, NULL, n, 1, r); /* learned from distances: a mirror image is as good */
    return n;
}

int ast_stitch_sets(const ast_eval_sets *s, const float *pos, int64_t n_cells, float *out)
{
    frame f = {ast_xcalloc((size_t)n_cells * 3, sizeof *f.sum), ast_xcalloc((size_t)n_cells, sizeof *f.count)};
    double *p = ast_xmalloc((size_t)s->N * 6 * sizeof *p), *q = p + (size_t)s->N * 3;
    int unaligned = 0;
    for (int b = 0; b < s->B; b++) {
        double r[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, from[3] = {0}, to[3] = {0};
        int shared = fit(s, pos, &f, b, p, q, r, from, to);
        int fresh = b == 0 || s->slice[b] != s->slice[b - 1]; /* a slice's sets are consecutive */
        unaligned += shared < 3 && !fresh;
        for (int i = 0; i < s->N; i++) {
            int64_t row = (int64_t)b * s->N + i, c = s->cells[row];
            if (s->mask[row] < 0.5f) continue;
            const float *x = pos + row * 3;
            for (int k = 0; k < 3; k++)
                f.sum[c * 3 + k] += r[k * 3] * (x[0] - from[0]) + r[k * 3 + 1] * (x[1] - from[1]) +
                                    r[k * 3 + 2] * (x[2] - from[2]) + to[k];
            f.count[c]++;
        }
    }
    for (int64_t c = 0; c < n_cells; c++)
        for (int k = 0; k < 3; k++) out[c * 3 + k] = f.count[c] ? (float)(f.sum[c * 3 + k] / f.count[c]) : 0.0f;
    free(f.sum), free(f.count), free(p);
    return unaligned;
}
