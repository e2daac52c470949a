/* Curves over seeds: each seed's points are averaged within bins along x
 * (so a long run gives a readable line, and seeds with slightly different
 * steps line up), then the bins' mean and min-max over seeds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_internal.h"

static void x_range(const rp_series *const *seeds, int n_seeds, double *lo, double *hi)
{
    *lo = INFINITY, *hi = -INFINITY;
    for (int s = 0; s < n_seeds; s++)
        for (int i = 0; i < seeds[s]->n; i++) *lo = fmin(*lo, seeds[s]->x[i]), *hi = fmax(*hi, seeds[s]->x[i]);
}

void rp_band_of(const rp_series *const *seeds, int n_seeds, int max_points, rp_band *b)
{
    memset(b, 0, sizeof *b);
    double lo, hi;
    x_range(seeds, n_seeds, &lo, &hi);
    if (!(lo <= hi)) return;
    double width = fmax(1.0, ceil((hi - lo + 1.0) / max_points));
    int n_bins = (int)floor((hi - lo) / width) + 1;
    /* per bin and seed: sum and count of y, and of x for the bin's position */
    double *sum = ast_xcalloc((size_t)n_bins * n_seeds, sizeof *sum), *xs = ast_xcalloc((size_t)n_bins, sizeof *xs);
    int *cnt = ast_xcalloc((size_t)n_bins * n_seeds, sizeof *cnt), *xn = ast_xcalloc((size_t)n_bins, sizeof *xn);
    for (int s = 0; s < n_seeds; s++)
        for (int i = 0; i < seeds[s]->n; i++) {
            int k = (int)floor((seeds[s]->x[i] - lo) / width);
            sum[k * n_seeds + s] += seeds[s]->y[i], cnt[k * n_seeds + s]++;
            xs[k] += seeds[s]->x[i], xn[k]++;
        }
    b->x = ast_xmalloc((size_t)n_bins * sizeof(double));
    b->mean = ast_xmalloc((size_t)n_bins * sizeof(double));
    b->lo = ast_xmalloc((size_t)n_bins * sizeof(double));
    b->hi = ast_xmalloc((size_t)n_bins * sizeof(double));
    for (int k = 0; k < n_bins; k++) {
        double total = 0.0, mn = INFINITY, mx = -INFINITY;
        int seeds_here = 0;
        for (int s = 0; s < n_seeds; s++) {
            if (!cnt[k * n_seeds + s]) continue;
            double v = sum[k * n_seeds + s] / cnt[k * n_seeds + s];
            total += v, mn = fmin(mn, v), mx = fmax(mx, v), seeds_here++;
        }
        if (!seeds_here) continue;
        b->x[b->n] = xs[k] / xn[k], b->mean[b->n] = total / seeds_here, b->lo[b->n] = mn, b->hi[b->n] = mx;
        b->n++;
    }
    free(sum), free(xs), free(cnt), free(xn);
}

void rp_band_free(rp_band *b)
{
    free(b->x), free(b->mean), free(b->lo), free(b->hi);
    memset(b, 0, sizeof *b);
}

int rp_series_argmin(const rp_series *s)
{
    int best = -1;
    for (int i = 0; i < s->n; i++)
        if (best < 0 || s->y[i] < s->y[best]) best = i;
    return best;
}
