/* The CPU backend's kernels for the layers above the ops (backend.h):
 * zeroing, the backward's seed, AdamW, and the gradient norm and scaling
 * of clipping, each split over the thread pool. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

static void zero_range(void *arg, int64_t lo, int64_t hi)
{
    memset((unsigned char *)arg + lo, 0, (size_t)(hi - lo));
}

void ast_cpu_zero(const ast_backend *b, void *dst, size_t bytes)
{
    ast_parallel_for((int64_t)bytes, (int64_t)1 << 20, zero_range, dst);
}

typedef struct axpy_args {
    float *y;
    const float *x;
} axpy_args;

static void accumulate_range(void *arg, int64_t lo, int64_t hi)
{
    const axpy_args *a = arg;
    for (int64_t i = lo; i < hi; i++) a->y[i] += a->x[i];
}

void ast_cpu_accumulate(const ast_backend *b, float *y, const float *x, int64_t n)
{
    ast_parallel_for(n, AST_PAR_GRAIN, accumulate_range, &(axpy_args){y, x});
}

/* ---- AdamW ---------------------------------------------------------------- */

static int all_zero(const float *g, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (g[i] != 0.0f) return 0;
    return 1;
}

typedef struct adamw_args {
    const ast_adamw_job *job;
    const ast_adamw_hyper *h;
} adamw_args;

/* Comparisons rather than fmaxf, and no branch on AMSGrad inside a loop,
 * so the update vectorises; blocks of 1024 keep the three passes in cache. */
static void adamw_range(void *arg, int64_t lo, int64_t hi)
{
    const adamw_args *a = arg;
    const ast_adamw_hyper *h = a->h;
    float *restrict p = a->job->p, *restrict m = a->job->m, *restrict v = a->job->v, *restrict vmax = a->job->vmax;
    const float *restrict g = a->job->g;
    for (int64_t b = lo; b < hi; b += 1024) {
        int64_t e = b + 1024 < hi ? b + 1024 : hi;
        for (int64_t j = b; j < e; j++) {
            m[j] = h->beta1 * m[j] + (1.0f - h->beta1) * g[j];
            v[j] = h->beta2 * v[j] + (1.0f - h->beta2) * g[j] * g[j];
        }
        if (vmax)
            for (int64_t j = b; j < e; j++) vmax[j] = v[j] > vmax[j] ? v[j] : vmax[j];
        const float *restrict vhat = vmax ? vmax : v;
        for (int64_t j = b; j < e; j++)
            p[j] = p[j] * h->decay - h->step_size * m[j] / (sqrtf(vhat[j]) / h->bc2_sqrt + h->eps);
    }
}

void ast_cpu_adamw(const ast_backend *b, const ast_adamw_job *jobs, int n, const ast_adamw_hyper *h,
                   const double *sumsq, const float *loss)
{
    if ((sumsq && !isfinite(*sumsq)) || (loss && !isfinite(*loss))) return;
    for (int i = 0; i < n; i++)
        if (jobs[i].n && !all_zero(jobs[i].g_whole, jobs[i].whole_n))
            ast_parallel_for(jobs[i].n, AST_PAR_GRAIN, adamw_range, &(adamw_args){&jobs[i], h});
}

/* ---- clipping ------------------------------------------------------------- */

typedef struct sumsq_args {
    const float *g;
    int64_t n;
    double *block_sums;
} sumsq_args;

/* Eight lanes per block so the loop vectorises without reassociating a
 * single sum. */
static void sumsq_range(void *arg, int64_t lo, int64_t hi)
{
    const sumsq_args *a = arg;
    for (int64_t blk = lo; blk < hi; blk++) {
        int64_t from = blk * AST_NORM_BLOCK, to = from + AST_NORM_BLOCK < a->n ? from + AST_NORM_BLOCK : a->n, i = from;
        double lane[8] = {0};
        for (; i + 8 <= to; i += 8)
            for (int l = 0; l < 8; l++) lane[l] += (double)a->g[i + l] * a->g[i + l];
        for (; i < to; i++) lane[0] += (double)a->g[i] * a->g[i];
        double s = 0.0;
        for (int l = 0; l < 8; l++) s += lane[l];
        a->block_sums[blk] = s;
    }
}

static double sum_squares_one(const float *g, int64_t n)
{
    int64_t blocks = (n + AST_NORM_BLOCK - 1) / AST_NORM_BLOCK;
    sumsq_args a = {g, n, ast_xmalloc((size_t)(blocks ? blocks : 1) * sizeof(double))};
    ast_parallel_for(blocks, AST_PAR_GRAIN / AST_NORM_BLOCK, sumsq_range, &a);
    double s = 0.0;
    for (int64_t k = 0; k < blocks; k++) s += a.block_sums[k];
    free(a.block_sums);
    return s;
}

void ast_cpu_sum_squares(const ast_backend *b, float *const *xs, const int64_t *ns, int n, double *out)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        if (xs[i]) s += sum_squares_one(xs[i], ns[i]);
    *out = s;
}

typedef struct scale_args {
    float *g;
    float coef;
} scale_args;

static void scale_range(void *arg, int64_t lo, int64_t hi)
{
    const scale_args *a = arg;
    for (int64_t j = lo; j < hi; j++) a->g[j] *= a->coef;
}

void ast_cpu_clip(const ast_backend *b, float *const *xs, const int64_t *ns, int n, const double *sumsq, float max_norm)
{
    double coef = ast_clip_coef(*sumsq, max_norm);
    if (!(coef < 1.0)) return;
    for (int i = 0; i < n; i++)
        if (xs[i]) ast_parallel_for(ns[i], AST_PAR_GRAIN, scale_range, &(scale_args){xs[i], (float)coef});
}
