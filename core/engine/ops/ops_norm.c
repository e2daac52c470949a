/* The CPU kernels of the normalisations (ops/dispatch_norm.c): softmax
 * over any axis, layernorm, rmsnorm and the Euclidean norm of the last
 * axis. The per-row statistics a backward needs (mean, 1/std) are saved in
 * the arena rather than recomputed. */
#include <math.h>
#include <string.h>

#include "engine/backend.h"
#include "alphast/fastmath.h"
#include "ops_softmax.h"

/* ---- softmax ------------------------------------------------------------ */

/* One contiguous row; subtracting the max keeps exp from overflowing. */
void ast_softmax_row(const float *restrict x, float *restrict y, int64_t len)
{
    float m = x[0], s = 0.0f;
#pragma omp simd reduction(max : m)
    for (int64_t k = 1; k < len; k++) m = x[k] > m ? x[k] : m;
    for (int64_t k = 0; k < len; k++) y[k] = ast_expf(x[k] - m);
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < len; k++) s += y[k];
    for (int64_t k = 0; k < len; k++) y[k] /= s;
}

/* Columns [j0, j1) of a [len, inner] slab normalised down each column (a
 * middle axis). Walking it row by row keeps memory access contiguous; m and
 * s carry the running max and sum of every column. */
void ast_softmax_slab(const float *x, float *y, int64_t len, int64_t inner, int64_t j0, int64_t j1, float *m, float *s)
{
    for (int64_t j = j0; j < j1; j++) m[j] = x[j], s[j] = 0.0f;
    for (int64_t k = 1; k < len; k++)
        for (int64_t j = j0; j < j1; j++) m[j] = x[k * inner + j] > m[j] ? x[k * inner + j] : m[j];
    for (int64_t k = 0; k < len; k++)
        for (int64_t j = j0; j < j1; j++) s[j] += (y[k * inner + j] = ast_expf(x[k * inner + j] - m[j]));
    for (int64_t k = 0; k < len; k++)
        for (int64_t j = j0; j < j1; j++) y[k * inner + j] /= s[j];
}

/* dx = y * (dy - sum(dy * y)) along the axis; assign: dx is fresh. */
static void softmax_row_backward(const float *restrict y, const float *restrict dy, float *restrict dx, int64_t len,
                                 int assign)
{
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t k = 0; k < len; k++) dot += dy[k] * y[k];
    for (int64_t k = 0; k < len; k++) {
        float v = y[k] * (dy[k] - dot);
        dx[k] = assign ? v : dx[k] + v;
    }
}

void ast_softmax_slab_backward(const float *y, const float *dy, float *dx, int64_t len, int64_t inner, int64_t j0,
                               int64_t j1, float *dot, int assign)
{
    for (int64_t j = j0; j < j1; j++) dot[j] = 0.0f;
    for (int64_t k = 0; k < len; k++)
        for (int64_t j = j0; j < j1; j++) dot[j] += dy[k * inner + j] * y[k * inner + j];
    for (int64_t k = 0; k < len; k++)
        for (int64_t j = j0; j < j1; j++) {
            float v = y[k * inner + j] * (dy[k * inner + j] - dot[j]);
            dx[k * inner + j] = assign ? v : dx[k * inner + j] + v;
        }
}

/* A softmax's work for the thread pool: rows when the axis is the last one
 * (inner == 1), else columns of every slab, each with its own scratch. */
typedef struct softmax_args {
    const float *x, *dy;
    float *y, *dx, *scratch; /* scratch: 2 * inner floats */
    int64_t outer, len, inner;
    int assign; /* backward: dx is fresh */
} softmax_args;

static int64_t softmax_items(const softmax_args *a) { return a->inner == 1 ? a->outer : a->inner; }
static int64_t softmax_grain(const softmax_args *a)
{
    int64_t per_item = a->len * (a->inner == 1 ? 1 : a->outer);
    return ast_row_grain(per_item);
}

static void softmax_range(void *arg, int64_t lo, int64_t hi)
{
    const softmax_args *a = arg;
    int64_t slab = a->len * a->inner;
    if (a->inner == 1)
        for (int64_t o = lo; o < hi; o++) ast_softmax_row(a->x + o * slab, a->y + o * slab, a->len);
    else
        for (int64_t o = 0; o < a->outer; o++)
            ast_softmax_slab(a->x + o * slab, a->y + o * slab, a->len, a->inner, lo, hi, a->scratch,
                         a->scratch + a->inner);
}

static void softmax_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const softmax_args *a = arg;
    int64_t slab = a->len * a->inner;
    if (a->inner == 1)
        for (int64_t o = lo; o < hi; o++) softmax_row_backward(a->y + o * slab, a->dy + o * slab, a->dx + o * slab, a->len, a->assign);
    else
        for (int64_t o = 0; o < a->outer; o++)
            ast_softmax_slab_backward(a->y + o * slab, a->dy + o * slab, a->dx + o * slab, a->len, a->inner, lo, hi,
                                  a->scratch, a->assign);
}

/* iarg: outer, len, inner. */
static void softmax_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    softmax_args a = {.y = n->out->data, .dy = n->out->grad, .dx = g->g[0], .outer = n->iarg[0],
                      .len = n->iarg[1], .inner = n->iarg[2], .assign = g->assign[0]};
    if (!a.dx) return;
    if (a.inner > 1) a.scratch = ast_alloc_uninit(c, (size_t)a.inner * sizeof *a.scratch);
    ast_parallel_for(softmax_items(&a), softmax_grain(&a), softmax_backward_range, &a);
}

static void softmax_forward(ast_ctx *c, ast_node *n)
{
    softmax_args a = {.x = n->in[0]->data, .y = n->out->data, .outer = n->iarg[0], .len = n->iarg[1],
                      .inner = n->iarg[2]};
    if (a.inner > 1) a.scratch = ast_alloc_uninit(c, 2 * (size_t)a.inner * sizeof *a.scratch);
    ast_parallel_for(softmax_items(&a), softmax_grain(&a), softmax_range, &a);
}

/* ---- layernorm ------------------------------------------------------------ */

/* Biased variance, eps inside the square root (as torch.nn.LayerNorm);
 * statistics in double so rows with a large mean keep their precision. */
/* Row sums in double. `omp simd reduction` (-fopenmp-simd: no OpenMP
 * runtime) lets GCC vectorise them, which it may not do to a plain running
 * sum without reassociating it. */
static double row_sum(const float *restrict x, int64_t d)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < d; k++) s += x[k];
    return s;
}

static double row_sq_dev(const float *restrict x, int64_t d, double mu)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < d; k++) s += (x[k] - mu) * (x[k] - mu);
    return s;
}

/* y may be x (add_layernorm's in-place rows); mean and rstd NULL: a
 * forward with grad off, which keeps no statistics. */
static void layernorm_row(const float *x, float *y, int64_t d, const float *w, const float *b, float eps, float *mean,
                          float *rstd)
{
    double mu = row_sum(x, d) / (double)d;
    double r = 1.0 / sqrt(row_sq_dev(x, d, mu) / (double)d + eps);
    for (int64_t k = 0; k < d; k++)
        y[k] = (float)((x[k] - mu) * r) * (w ? w[k] : 1.0f) + (b ? b[k] : 0.0f);
    if (mean) *mean = (float)mu, *rstd = (float)r;
}

/* With g = dy * w and xh = (x - mean) * rstd:
 * dx = rstd * (g - mean(g) - xh * mean(g * xh)). */
static void layernorm_row_backward(const float *restrict x, const float *restrict dy, int64_t d, const float *w,
                                   float mean, float rstd, float *restrict dx, int assign)
{
    double mg = 0.0, mgx = 0.0;
#pragma omp simd reduction(+ : mg, mgx)
    for (int64_t k = 0; k < d; k++) {
        float g = dy[k] * (w ? w[k] : 1.0f), xh = (x[k] - mean) * rstd;
        mg += g;
        mgx += g * xh;
    }
    mg /= (double)d;
    mgx /= (double)d;
    for (int64_t k = 0; k < d; k++) {
        float g = dy[k] * (w ? w[k] : 1.0f), xh = (x[k] - mean) * rstd;
        float v = rstd * (float)(g - mg - xh * mgx);
        dx[k] = assign ? v : dx[k] + v;
    }
}

/* The arguments of the row-parallel (dx) and column-parallel (dw, db)
 * passes of the norms: rows are independent, while the weight gradients
 * sum over rows, so those are split by column and each column is summed in
 * row order, the same bits for any thread count. */
typedef struct norm_args {
    const float *x, *dy, *w, *b, *mean, *rstd;
    float *y, *dx, *dw, *db;
    int64_t rows, d;
    float eps;
    int assign; /* dx is fresh: write it rather than add */
} norm_args;

static void layernorm_dx_range(void *arg, int64_t lo, int64_t hi)
{
    const norm_args *a = arg;
    for (int64_t r = lo; r < hi; r++)
        layernorm_row_backward(a->x + r * a->d, a->dy + r * a->d, a->d, a->w, a->mean[r], a->rstd[r],
                               a->dx + r * a->d, a->assign);
}

/* One row's contribution to the weight and bias gradients, columns [lo, hi). */
static void layernorm_dwdb_row(const float *restrict x, const float *restrict dy, float mean, float rstd,
                               float *restrict dw, float *restrict db, int64_t lo, int64_t hi)
{
    if (dw)
        for (int64_t k = lo; k < hi; k++) dw[k] += dy[k] * ((x[k] - mean) * rstd);
    if (db)
        for (int64_t k = lo; k < hi; k++) db[k] += dy[k];
}

static void layernorm_dwdb_range(void *arg, int64_t lo, int64_t hi)
{
    const norm_args *a = arg;
    for (int64_t r = 0; r < a->rows; r++)
        layernorm_dwdb_row(a->x + r * a->d, a->dy + r * a->d, a->mean[r], a->rstd[r], a->dw, a->db, lo, hi);
}


/* saved: mean[rows] then rstd[rows]. */
static void layernorm_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *x = n->in[0], *w = n->in[1];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    norm_args a = {.x = x->data, .dy = n->out->grad, .w = w ? w->data : NULL, .mean = n->saved,
                   .rstd = (const float *)n->saved + rows, .dx = g->g[0], .dw = g->g[1], .db = g->g[2],
                   .rows = rows, .d = d, .assign = g->assign[0]};
    if (a.dx) ast_parallel_for(rows, ast_row_grain(d), layernorm_dx_range, &a);
    if (a.dw || a.db) ast_parallel_for(d, ast_row_grain(rows), layernorm_dwdb_range, &a);
}

static void layernorm_range(void *arg, int64_t lo, int64_t hi)
{
    const norm_args *a = arg;
    float *mean = (float *)a->mean, *rstd = (float *)a->rstd;
    for (int64_t r = lo; r < hi; r++)
        layernorm_row(a->x + r * a->d, a->y + r * a->d, a->d, a->w, a->b, a->eps, mean ? &mean[r] : NULL,
                      rstd ? &rstd[r] : NULL);
}

/* farg[0] = eps; saved: mean[rows] then rstd[rows], kept only when the
 * node goes on the tape. */
static void layernorm_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    float *mean = ast_needs_grad(c, n->in, n->n_in) ? ast_alloc_uninit(c, 2 * (size_t)rows * sizeof *mean) : NULL;
    norm_args a = {.x = x->data, .w = w ? w->data : NULL, .b = b ? b->data : NULL, .mean = mean,
                   .rstd = mean ? mean + rows : NULL, .y = n->out->data, .d = d, .eps = n->farg[0]};
    ast_parallel_for(rows, ast_row_grain(d), layernorm_range, &a);
    n->saved = mean;
}

/* ---- add_layernorm: layernorm(a + b) in one pass -------------------------- */

/* Each row's sum a + b, written where the node keeps it (sum: the tape's
 * copy, for the backward) or in y itself, then normalised there: one pass
 * over a and b, the rows still in cache, the same bits as add then
 * layernorm. */
typedef struct add_norm_args {
    norm_args n;
    const float *b2; /* the second summand (n.x the first) */
    float *sum;      /* [rows, d], or NULL with grad off */
} add_norm_args;

static void add_layernorm_range(void *arg, int64_t lo, int64_t hi)
{
    const add_norm_args *a = arg;
    int64_t d = a->n.d;
    float *mean = (float *)a->n.mean, *rstd = (float *)a->n.rstd;
    for (int64_t r = lo; r < hi; r++) {
        const float *restrict x1 = a->n.x + r * d, *restrict x2 = a->b2 + r * d;
        float *restrict s = (a->sum ? a->sum : a->n.y) + r * d;
        for (int64_t k = 0; k < d; k++) s[k] = x1[k] + x2[k];
        layernorm_row(s, a->n.y + r * d, d, a->n.w, a->n.b, a->n.eps, mean ? &mean[r] : NULL, rstd ? &rstd[r] : NULL);
    }
}

/* in: a, b, w, bias; farg[0] = eps; saved (on the tape only): mean[rows],
 * rstd[rows], then the sum [rows, d]. */
static void add_layernorm_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[2], *b = n->in[3];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    float *saved = ast_needs_grad(c, n->in, n->n_in) ? ast_alloc_uninit(c, (size_t)rows * (2 + d) * sizeof *saved) : NULL;
    add_norm_args a = {{.x = x->data, .w = w ? w->data : NULL, .b = b ? b->data : NULL, .mean = saved,
                        .rstd = saved ? saved + rows : NULL, .y = n->out->data, .d = d, .eps = n->farg[0]},
                       n->in[1]->data, saved ? saved + 2 * rows : NULL};
    ast_parallel_for(rows, ast_row_grain(d), add_layernorm_range, &a);
    n->saved = saved;
}

/* The sum's gradient (layernorm's dx) is both summands' gradient. It is
 * written into a summand's fresh buffer and then copied or added into the
 * other's (a and b one tensor: b's buffer is a's, assign[1] 0, so the add
 * doubles it, as it should); with neither fresh, each gets it added, made
 * twice, rather than kept in scratch the arena would hold to the step's end. */
static void add_layernorm_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    int64_t rows = ast_rows(n->out), d = ast_cols(n->out), size = n->out->size;
    const float *saved = n->saved;
    ast_tensor *w = n->in[2];
    norm_args a = {.x = saved + 2 * rows, .dy = n->out->grad, .w = w ? w->data : NULL, .mean = saved,
                   .rstd = saved + rows, .dw = g->g[2], .db = g->g[3], .rows = rows, .d = d};
    int fresh = g->g[0] && g->assign[0] ? 0 : g->g[1] && g->assign[1] ? 1 : -1;
    for (int i = 0; i < 2; i++) {
        if (!g->g[i] || (fresh >= 0 && i != fresh)) continue;
        a.dx = g->g[i], a.assign = g->assign[i];
        ast_parallel_for(rows, ast_row_grain(d), layernorm_dx_range, &a);
    }
    int other = 1 - fresh;
    if (fresh >= 0 && g->g[other]) {
        if (g->assign[other]) memcpy(g->g[other], g->g[fresh], (size_t)size * sizeof(float));
        else ast_cpu_accumulate(ast_ctx_backend(c), g->g[other], g->g[fresh], size);
    }
    if (a.dw || a.db) ast_parallel_for(d, ast_row_grain(rows), layernorm_dwdb_range, &a);
}

/* ---- rmsnorm -------------------------------------------------------------- */

/* y = x * r * w with r = rsqrt(mean(x^2) + eps); g = dy * w:
 * dx = r * g - x * r^3 * mean(g * x),  dw = dy * x * r. Rows split over the
 * thread pool for y and dx, columns for dw, as layernorm's (norm_args). */
static void rmsnorm_dx_range(void *arg, int64_t lo, int64_t hi)
{
    const norm_args *a = arg;
    int64_t d = a->d;
    for (int64_t r = lo; r < hi; r++) {
        const float *restrict x = a->x + r * d, *restrict dy = a->dy + r * d, *w = a->w;
        float *restrict dx = a->dx + r * d;
        float rs = a->rstd[r];
        double mgx = 0.0;
#pragma omp simd reduction(+ : mgx)
        for (int64_t k = 0; k < d; k++) mgx += dy[k] * (w ? w[k] : 1.0f) * x[k];
        float coef = (float)(mgx / (double)d) * rs * rs * rs;
        for (int64_t k = 0; k < d; k++) {
            float v = rs * dy[k] * (w ? w[k] : 1.0f) - x[k] * coef;
            dx[k] = a->assign ? v : dx[k] + v;
        }
    }
}

static void rmsnorm_dw_range(void *arg, int64_t lo, int64_t hi)
{
    const norm_args *a = arg;
    float *restrict dw = a->dw;
    for (int64_t r = 0; r < a->rows; r++) {
        const float *restrict x = a->x + r * a->d, *restrict dy = a->dy + r * a->d;
        for (int64_t k = lo; k < hi; k++) dw[k] += dy[k] * x[k] * a->rstd[r];
    }
}

/* saved: rstd[rows]. */
static void rmsnorm_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *x = n->in[0], *w = n->in[1];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    norm_args a = {.x = x->data, .dy = n->out->grad, .w = w ? w->data : NULL, .rstd = n->saved, .dx = g->g[0],
                   .dw = g->g[1], .rows = rows, .d = d, .assign = g->assign[0]};
    if (a.dx) ast_parallel_for(rows, ast_row_grain(d), rmsnorm_dx_range, &a);
    if (a.dw) ast_parallel_for(d, ast_row_grain(rows), rmsnorm_dw_range, &a);
}

static void rmsnorm_range(void *arg, int64_t lo, int64_t hi)
{
    const norm_args *a = arg;
    int64_t d = a->d;
    float *rstd = (float *)a->rstd;
    for (int64_t r = lo; r < hi; r++) {
        const float *restrict xr = a->x + r * d;
        float *restrict y = a->y + r * d;
        double ss = 0.0;
#pragma omp simd reduction(+ : ss)
        for (int64_t k = 0; k < d; k++) ss += (double)xr[k] * xr[k];
        float rs = (float)(1.0 / sqrt(ss / (double)d + a->eps));
        if (rstd) rstd[r] = rs;
        for (int64_t k = 0; k < d; k++) y[k] = xr[k] * rs * (a->w ? a->w[k] : 1.0f);
    }
}

/* farg[0] = eps; saved: rstd[rows], kept only when the node goes on the tape. */
static void rmsnorm_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[1];
    int64_t rows = ast_rows(x), d = ast_cols(x);
    float *rstd = ast_needs_grad(c, n->in, n->n_in) ? ast_alloc_uninit(c, (size_t)rows * sizeof *rstd) : NULL;
    norm_args a = {.x = x->data, .w = w ? w->data : NULL, .rstd = rstd, .y = n->out->data, .rows = rows, .d = d,
                   .eps = n->farg[0]};
    ast_parallel_for(rows, ast_row_grain(d), rmsnorm_range, &a);
    n->saved = rstd;
}

/* ---- vecnorm -------------------------------------------------------------- */

/* d|x|/dx = x / |x|, taken as 0 at |x| = 0 (the subgradient torch uses). */
static void vecnorm_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *gs)
{
    ast_tensor *x = n->in[0];
    float *gx = gs->g[0];
    int64_t d = ast_cols(x);
    for (int64_t r = 0; r < ast_rows(x); r++) {
        float norm = n->out->data[r];
        if (norm == 0.0f) continue;
        /* x / norm is at most 1, so a tiny norm cannot overflow. */
        float g = n->out->grad[r];
        for (int64_t k = 0; k < d; k++) gx[r * d + k] += g * (x->data[r * d + k] / norm);
    }
}

static void vecnorm_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0];
    int64_t d = ast_cols(x);
    for (int64_t r = 0; r < ast_rows(x); r++) {
        double ss = 0.0;
        for (int64_t k = 0; k < d; k++) ss += (double)x->data[r * d + k] * x->data[r * d + k];
        n->out->data[r] = (float)sqrt(ss);
    }
}

void ast_cpu_norm_kernels(ast_op_kernel *t)
{
    t[AST_OP_softmax] = (ast_op_kernel){.forward = softmax_forward, .backward = softmax_backward, .assigns = 1};
    t[AST_OP_layernorm] = (ast_op_kernel){.forward = layernorm_forward, .backward = layernorm_backward, .assigns = 1};
    t[AST_OP_add_layernorm] =
        (ast_op_kernel){.forward = add_layernorm_forward, .backward = add_layernorm_backward, .assigns = 3};
    t[AST_OP_rmsnorm] = (ast_op_kernel){.forward = rmsnorm_forward, .backward = rmsnorm_backward, .assigns = 1};
    t[AST_OP_vecnorm] = (ast_op_kernel){.forward = vecnorm_forward, .backward = vecnorm_backward};
}
