/* Normalisations: softmax over any axis, layernorm, rmsnorm and the
 * Euclidean norm of the last axis. The per-row statistics a backward needs
 * (mean, 1/std) are saved in the arena rather than recomputed. */
#include <math.h>
#include <string.h>

#include "alphast/core.h"
#include "alphast/fastmath.h"
#include "ops_axis.h"

/* Outputs of the normalisations, which write every element. */
static ast_tensor *empty_like(ast_ctx *c, const ast_tensor *x) { return ast_empty(c, x->ndim, x->shape); }

static void check_affine(const ast_tensor *x, const ast_tensor *p, const char *op, const char *what)
{
    char s1[64], s2[64];
    AST_ASSERT(!p || (p->ndim == 1 && p->shape[0] == ast_cols(x)), "%s: %s %s does not fit x %s", op, what,
               p ? ast_shape_str(p, s1, sizeof s1) : "", ast_shape_str(x, s2, sizeof s2));
}

/* ---- softmax ------------------------------------------------------------ */

/* One contiguous row; subtracting the max keeps exp from overflowing. */
static void softmax_row(const float *x, float *y, int64_t len)
{
    float m = x[0], s = 0.0f;
    for (int64_t k = 1; k < len; k++) m = fmaxf(m, x[k]);
    for (int64_t k = 0; k < len; k++) y[k] = ast_expf(x[k] - m);
    for (int64_t k = 0; k < len; k++) s += y[k];
    for (int64_t k = 0; k < len; k++) y[k] /= s;
}

/* A [len, inner] slab normalised down each column (a middle axis). Walking
 * it row by row keeps memory access contiguous; m and s carry the running
 * max and sum of every column. */
static void softmax_slab(const float *x, float *y, int64_t len, int64_t inner, float *m, float *s)
{
    memcpy(m, x, (size_t)inner * sizeof *m);
    for (int64_t k = 1; k < len; k++)
        for (int64_t j = 0; j < inner; j++) m[j] = fmaxf(m[j], x[k * inner + j]);
    memset(s, 0, (size_t)inner * sizeof *s);
    for (int64_t k = 0; k < len; k++)
        for (int64_t j = 0; j < inner; j++) s[j] += (y[k * inner + j] = ast_expf(x[k * inner + j] - m[j]));
    for (int64_t k = 0; k < len; k++)
        for (int64_t j = 0; j < inner; j++) y[k * inner + j] /= s[j];
}

/* dx = y * (dy - sum(dy * y)) along the axis. */
static void softmax_row_backward(const float *y, const float *dy, float *dx, int64_t len)
{
    float dot = 0.0f;
    for (int64_t k = 0; k < len; k++) dot += dy[k] * y[k];
    for (int64_t k = 0; k < len; k++) dx[k] += y[k] * (dy[k] - dot);
}

static void softmax_slab_backward(const float *y, const float *dy, float *dx, int64_t len, int64_t inner, float *dot)
{
    memset(dot, 0, (size_t)inner * sizeof *dot);
    for (int64_t k = 0; k < len; k++)
        for (int64_t j = 0; j < inner; j++) dot[j] += dy[k * inner + j] * y[k * inner + j];
    for (int64_t k = 0; k < len; k++)
        for (int64_t j = 0; j < inner; j++) dx[k * inner + j] += y[k * inner + j] * (dy[k * inner + j] - dot[j]);
}

/* iarg: outer, len, inner. */
static void softmax_backward(ast_ctx *c, const ast_node *n)
{
    float *gx = ast_grad(c, n->in[0]);
    const float *y = n->out->data, *dy = n->out->grad;
    int64_t outer = n->iarg[0], len = n->iarg[1], inner = n->iarg[2], slab = len * inner;
    float *dot = inner > 1 ? ast_alloc(c, (size_t)inner * sizeof *dot) : NULL;
    for (int64_t o = 0; o < outer; o++) {
        if (inner == 1)
            softmax_row_backward(y + o * slab, dy + o * slab, gx + o * slab, len);
        else
            softmax_slab_backward(y + o * slab, dy + o * slab, gx + o * slab, len, inner, dot);
    }
}

ast_tensor *ast_softmax(ast_ctx *c, ast_tensor *x, int axis)
{
    ast_axis_split sp = ast_split_axis(x, axis, "softmax");
    AST_ASSERT(sp.len > 0, "softmax over an empty axis %d", axis);
    ast_tensor *y = empty_like(c, x);
    int64_t slab = sp.len * sp.inner;
    float *scratch = sp.inner > 1 ? ast_alloc(c, 2 * (size_t)sp.inner * sizeof *scratch) : NULL;
    for (int64_t o = 0; o < sp.outer; o++) {
        if (sp.inner == 1)
            softmax_row(x->data + o * slab, y->data + o * slab, sp.len);
        else
            softmax_slab(x->data + o * slab, y->data + o * slab, sp.len, sp.inner, scratch, scratch + sp.inner);
    }
    ast_record(c, &(ast_node){.op = "softmax", .backward = softmax_backward, .out = y, .in = {x}, .n_in = 1,
                              .iarg = {sp.outer, sp.len, sp.inner}});
    return y;
}

/* ---- layernorm ------------------------------------------------------------ */

/* Biased variance, eps inside the square root (as torch.nn.LayerNorm);
 * statistics in double so rows with a large mean keep their precision. */
static void layernorm_row(const float *x, float *y, int64_t d, const float *w, const float *b, float eps,
                          float *mean, float *rstd)
{
    double s = 0.0, v = 0.0;
    for (int64_t k = 0; k < d; k++) s += x[k];
    double mu = s / (double)d;
    for (int64_t k = 0; k < d; k++) v += (x[k] - mu) * (x[k] - mu);
    double r = 1.0 / sqrt(v / (double)d + eps);
    for (int64_t k = 0; k < d; k++)
        y[k] = (float)((x[k] - mu) * r) * (w ? w[k] : 1.0f) + (b ? b[k] : 0.0f);
    *mean = (float)mu;
    *rstd = (float)r;
}

/* With g = dy * w and xh = (x - mean) * rstd:
 * dx = rstd * (g - mean(g) - xh * mean(g * xh)). */
static void layernorm_row_backward(const float *x, const float *dy, int64_t d, const float *w, float mean, float rstd,
                                   float *dx, float *dw, float *db)
{
    double mg = 0.0, mgx = 0.0;
    for (int64_t k = 0; k < d; k++) {
        float g = dy[k] * (w ? w[k] : 1.0f), xh = (x[k] - mean) * rstd;
        mg += g;
        mgx += g * xh;
        if (dw) dw[k] += dy[k] * xh;
        if (db) db[k] += dy[k];
    }
    mg /= (double)d;
    mgx /= (double)d;
    if (!dx) return;
    for (int64_t k = 0; k < d; k++) {
        float g = dy[k] * (w ? w[k] : 1.0f), xh = (x[k] - mean) * rstd;
        dx[k] += rstd * (float)(g - mg - xh * mgx);
    }
}

/* saved: mean[rows] then rstd[rows]. */
static void layernorm_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    float *gx = ast_grad(c, x), *gw = ast_grad(c, w), *gb = ast_grad(c, b);
    const float *mean = n->saved, *rstd = mean + ast_rows(x);
    int64_t d = ast_cols(x);
    for (int64_t r = 0; r < ast_rows(x); r++)
        layernorm_row_backward(x->data + r * d, n->out->grad + r * d, d, w ? w->data : NULL, mean[r], rstd[r],
                               gx ? gx + r * d : NULL, gw, gb);
}

ast_tensor *ast_layernorm(ast_ctx *c, ast_tensor *x, ast_tensor *w, ast_tensor *b, float eps)
{
    check_affine(x, w, "layernorm", "weight");
    check_affine(x, b, "layernorm", "bias");
    int64_t rows = ast_rows(x), d = ast_cols(x);
    ast_tensor *y = empty_like(c, x);
    float *mean = ast_alloc(c, 2 * (size_t)rows * sizeof *mean), *rstd = mean + rows;
    for (int64_t r = 0; r < rows; r++)
        layernorm_row(x->data + r * d, y->data + r * d, d, w ? w->data : NULL, b ? b->data : NULL, eps, &mean[r],
                      &rstd[r]);
    ast_record(c, &(ast_node){.op = "layernorm", .backward = layernorm_backward, .out = y, .in = {x, w, b},
                              .n_in = 3, .saved = mean});
    return y;
}

/* ---- rmsnorm -------------------------------------------------------------- */

/* y = x * r * w with r = rsqrt(mean(x^2) + eps); g = dy * w:
 * dx = r * g - x * r^3 * mean(g * x),  dw = dy * x * r. */
static void rmsnorm_row_backward(const float *x, const float *dy, int64_t d, const float *w, float r, float *dx,
                                 float *dw)
{
    double mgx = 0.0;
    for (int64_t k = 0; k < d; k++) {
        mgx += dy[k] * (w ? w[k] : 1.0f) * x[k];
        if (dw) dw[k] += dy[k] * x[k] * r;
    }
    float coef = (float)(mgx / (double)d) * r * r * r;
    if (dx)
        for (int64_t k = 0; k < d; k++) dx[k] += r * dy[k] * (w ? w[k] : 1.0f) - x[k] * coef;
}

/* saved: rstd[rows]. */
static void rmsnorm_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[1];
    float *gx = ast_grad(c, x), *gw = ast_grad(c, w);
    const float *rstd = n->saved;
    int64_t d = ast_cols(x);
    for (int64_t r = 0; r < ast_rows(x); r++)
        rmsnorm_row_backward(x->data + r * d, n->out->grad + r * d, d, w ? w->data : NULL, rstd[r],
                             gx ? gx + r * d : NULL, gw);
}

ast_tensor *ast_rmsnorm(ast_ctx *c, ast_tensor *x, ast_tensor *w, float eps)
{
    check_affine(x, w, "rmsnorm", "weight");
    int64_t rows = ast_rows(x), d = ast_cols(x);
    ast_tensor *y = empty_like(c, x);
    float *rstd = ast_alloc(c, (size_t)rows * sizeof *rstd);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x->data + r * d;
        double ss = 0.0;
        for (int64_t k = 0; k < d; k++) ss += (double)xr[k] * xr[k];
        rstd[r] = (float)(1.0 / sqrt(ss / (double)d + eps));
        for (int64_t k = 0; k < d; k++) y->data[r * d + k] = xr[k] * rstd[r] * (w ? w->data[k] : 1.0f);
    }
    ast_record(c, &(ast_node){.op = "rmsnorm", .backward = rmsnorm_backward, .out = y, .in = {x, w}, .n_in = 2,
                              .saved = rstd});
    return y;
}

/* ---- vecnorm -------------------------------------------------------------- */

/* d|x|/dx = x / |x|, taken as 0 at |x| = 0 (the subgradient torch uses). */
static void vecnorm_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *x = n->in[0];
    float *gx = ast_grad(c, x);
    int64_t d = ast_cols(x);
    for (int64_t r = 0; r < ast_rows(x); r++) {
        float norm = n->out->data[r];
        if (norm == 0.0f) continue;
        /* x / norm is at most 1, so a tiny norm cannot overflow. */
        float g = n->out->grad[r];
        for (int64_t k = 0; k < d; k++) gx[r * d + k] += g * (x->data[r * d + k] / norm);
    }
}

ast_tensor *ast_vecnorm(ast_ctx *c, ast_tensor *x)
{
    int64_t shape[AST_MAX_DIMS], d = ast_cols(x);
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = 1;
    ast_tensor *y = ast_empty(c, x->ndim, shape);
    for (int64_t r = 0; r < ast_rows(x); r++) {
        double ss = 0.0;
        for (int64_t k = 0; k < d; k++) ss += (double)x->data[r * d + k] * x->data[r * d + k];
        y->data[r] = (float)sqrt(ss);
    }
    ast_record(c, &(ast_node){.op = "vecnorm", .backward = vecnorm_backward, .out = y, .in = {x}, .n_in = 1});
    return y;
}
