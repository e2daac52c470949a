/* The CPU kernels of geometry and losses (ops/dispatch_loss.c): pairwise
 * distances within each point set and the row-masked mean squared error. */
#include <math.h>

#include "engine/backend.h"

/* ---- pdist ----------------------------------------------------------------- */

/* From the differences, not |a|^2 + |b|^2 - 2ab: that form cancels badly
 * for close points and has no usable gradient at distance 0. */
static float distance(const float *a, const float *b, int64_t d)
{
    float s = 0.0f;
    for (int64_t k = 0; k < d; k++) s += (a[k] - b[k]) * (a[k] - b[k]);
    return sqrtf(s);
}

/* The work of pdist for the thread pool: one item per point (b, i), which
 * writes row i of D and the gradient of p_i only, so items never share an
 * output. Each distance is computed from both ends, which costs twice the
 * arithmetic of a triangle but needs no locking (d is 2 or 3). */
typedef struct pdist_args {
    const float *p, *y, *dy;
    float *out; /* forward: D; backward: dL/dp */
    int64_t np, d;
} pdist_args;

static void pdist_range(void *arg, int64_t lo, int64_t hi)
{
    const pdist_args *a = arg;
    for (int64_t bi = lo; bi < hi; bi++) {
        int64_t b = bi / a->np, i = bi % a->np;
        const float *pb = a->p + b * a->np * a->d;
        float *row = a->out + bi * a->np;
        for (int64_t j = 0; j < a->np; j++) row[j] = j == i ? 0.0f : distance(pb + i * a->d, pb + j * a->d, a->d);
    }
}

/* dD_ij/dp_i = (p_i - p_j) / D_ij, taken as 0 at D_ij = 0; D is symmetric,
 * so p_i collects (dy_ij + dy_ji) for every j. */
static void pdist_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const pdist_args *a = arg;
    int64_t np = a->np, d = a->d;
    for (int64_t bi = lo; bi < hi; bi++) {
        int64_t b = bi / np, i = bi % np;
        const float *pb = a->p + b * np * d, *yb = a->y + b * np * np, *dy = a->dy + b * np * np;
        float *gi = a->out + bi * d;
        for (int64_t j = 0; j < np; j++) {
            float dist = yb[i * np + j], g = dy[i * np + j] + dy[j * np + i];
            if (dist == 0.0f) continue;
            for (int64_t k = 0; k < d; k++) gi[k] += g * ((pb[i * d + k] - pb[j * d + k]) / dist); /* |u| <= 1 */
        }
    }
}

static void pdist_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *p = n->in[0];
    pdist_args a = {p->data, n->out->data, n->out->grad, g->g[0], p->shape[1], p->shape[2]};
    if (a.out) ast_parallel_for(p->shape[0] * a.np, ast_row_grain(a.np), pdist_backward_range, &a);
}

static void pdist_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *p = n->in[0];
    int64_t np = p->shape[1];
    pdist_args a = {.p = p->data, .out = n->out->data, .np = np, .d = p->shape[2]};
    ast_parallel_for(p->shape[0] * np, ast_row_grain(np), pdist_range, &a);
}

/* ---- mse ------------------------------------------------------------------- */

static double row_sq_err(const float *a, const float *b, int64_t d)
{
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t k = 0; k < d; k++) s += (double)(a[k] - b[k]) * (a[k] - b[k]);
    return s;
}

/* The rows of an mse for the thread pool: squared errors per row (summed
 * afterwards in row order, so the loss has the same bits for any thread
 * count) and, in the backward, each row's gradients. */
typedef struct mse_args {
    const float *a, *b, *m;
    float *ga, *gb, *gm;
    double *row_sums;
    int64_t d;
    float g, loss, cnt;
} mse_args;

static void mse_rows_range(void *arg, int64_t lo, int64_t hi)
{
    const mse_args *x = arg;
    for (int64_t r = lo; r < hi; r++) x->row_sums[r] = row_sq_err(x->a + r * x->d, x->b + r * x->d, x->d);
}

/* L = num / max(1, cnt), num = sum_r m_r S_r, cnt = sum_r m_r * cols:
 * dL/da = 2 m_r (a - b) / den = -dL/db, and, where cnt > 1 so the
 * denominator moves with the mask, dL/dm_r = (S_r - L * cols) / den. */
static void mse_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const mse_args *x = arg;
    int64_t d = x->d;
    for (int64_t r = lo; r < hi; r++) {
        const float *ar = x->a + r * d, *br = x->b + r * d;
        float mr = x->m ? x->m[r] : 1.0f;
        for (int64_t k = 0; k < d; k++) {
            float e = 2.0f * x->g * mr * (ar[k] - br[k]);
            if (x->ga) x->ga[r * d + k] += e;
            if (x->gb) x->gb[r * d + k] -= e;
        }
        if (x->gm) x->gm[r] += x->g * (float)(row_sq_err(ar, br, d) - (x->cnt > 1.0f ? x->loss * (double)d : 0.0));
    }
}

/* farg[0] = cnt. */
static void mse_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *a = n->in[0], *b = n->in[1], *m = n->in[2];
    float cnt = n->farg[0];
    mse_args x = {a->data, b->data, m ? m->data : NULL, g->g[0], g->g[1], g->g[2], NULL,
                  ast_cols(a), n->out->grad[0] / fmaxf(1.0f, cnt), n->out->data[0], cnt};
    ast_parallel_for(ast_rows(a), ast_row_grain(x.d), mse_backward_range, &x);
}

static void mse_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *a = n->in[0], *mask = n->in[2];
    int64_t rows = ast_rows(a), d = ast_cols(a);
    mse_args x = {.a = a->data, .b = n->in[1]->data, .row_sums = ast_alloc_uninit(c, (size_t)rows * sizeof(double)),
                  .d = d};
    ast_parallel_for(rows, ast_row_grain(d), mse_rows_range, &x);
    double num = 0.0, cnt = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double mr = mask ? mask->data[r] : 1.0;
        num += mr * x.row_sums[r];
        cnt += mr * (double)d;
    }
    n->out->data[0] = (float)(num / fmax(1.0, cnt));
    n->farg[0] = (float)cnt;
}

void ast_cpu_loss_kernels(ast_op_kernel *t)
{
    t[AST_OP_pdist] = (ast_op_kernel){.forward = pdist_forward, .backward = pdist_backward};
    t[AST_OP_mse] = (ast_op_kernel){.forward = mse_forward, .backward = mse_backward};
}
