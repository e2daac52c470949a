/* The CPU kernels of aligned_mse (ops/dispatch_loss.c), the position loss
 * up to a rigid motion: per set in double, centred, turned by Kabsch's R
 * (LAPACK's 3x3 SVD, engine/kabsch.c), the residuals' MSE. The forward has
 * every residual at hand, so it makes dL/dpred and dL/dtarget too (where
 * wanted) and the backward only scales them by dL/dy. And of kabsch_align,
 * the sampler's alignment: the same sets and R, about the origin, and pred
 * turned by it. */
#include <math.h>

#include "engine/backend.h"
#include "engine/kabsch.h"

/* One set in double: pred and target rows of 3, centred with the mask's
 * weights w (NULL when there is no mask: all 1). */
typedef struct set_work {
    double *p, *q, *w;
    int64_t n;
} set_work;

typedef struct aligned_in {
    const float *pred, *target, *mask; /* mask NULL: none */
} aligned_in;

/* What the forward leaves the backward (n->saved): the gradients for
 * dL/dy = 1, in full tensors (NULL where the input wants none). */
typedef struct aligned_grads {
    float *pred, *target;
} aligned_grads;

static double set_weight(const float *mask, int64_t b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += mask ? mask[b * n + i] : 1.0;
    return s;
}

/* A set's work space in the arena, with weights where there is a mask. */
static set_work set_work_of(ast_ctx *c, int64_t np, const ast_tensor *mask)
{
    return (set_work){ast_alloc_uninit(c, (size_t)np * 3 * sizeof(double)),
                      ast_alloc_uninit(c, (size_t)np * 3 * sizeof(double)),
                      mask ? ast_alloc_uninit(c, (size_t)np * sizeof(double)) : NULL, np};
}

/* Loads set b. Cells of weight 0 (padding) are loaded as zeros, so
 * whatever they hold cannot reach the sums (0 * NaN is NaN; a finite value
 * would add 0 w p q = 0 anyway). Returns 0 if a weighted cell is not finite:
 * LAPACK's SVD rejects NaN, and the caller should see NaN, not an abort. */
static int load_set(set_work *x, const aligned_in *in, int64_t b)
{
    int64_t n = x->n;
    int finite = 1;
    for (int64_t i = 0; i < n; i++) {
        double wi = in->mask ? in->mask[b * n + i] : 1.0;
        if (x->w) x->w[i] = wi;
        for (int64_t k = i * 3; k < i * 3 + 3; k++) {
            x->p[k] = wi != 0.0 ? in->pred[b * n * 3 + k] : 0.0;
            x->q[k] = wi != 0.0 ? in->target[b * n * 3 + k] : 0.0;
            finite &= isfinite(x->p[k]) && isfinite(x->q[k]);
        }
    }
    return finite;
}

/* sum_i w_i |R p_i - q_i|^2 for the optimal R; with g's rows (each NULL
 * when not wanted), also scale * 2 w_i R^T (R p_i - q_i) for pred and
 * -scale * 2 w_i (R p_i - q_i) for target. That is the whole gradient: R
 * is optimal, so its own change drops out (envelope theorem), and so does
 * the centring's, as the weighted residuals sum to R sum w p - sum w q = 0. */
static double aligned_sq_err(const set_work *x, aligned_grads g, double scale)
{
    double r[9], sum = 0.0;
    ast_kabsch(x->p, x->q, x->w, (int)x->n, 1, r);
    for (int64_t i = 0; i < x->n; i++) {
        const double *p = x->p + i * 3, *q = x->q + i * 3;
        double wi = x->w ? x->w[i] : 1.0, e[3];
        for (int a = 0; a < 3; a++) e[a] = r[a * 3] * p[0] + r[a * 3 + 1] * p[1] + r[a * 3 + 2] * p[2] - q[a];
        sum += wi * (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
        for (int d = 0; d < 3; d++) {
            if (g.pred)
                g.pred[i * 3 + d] = (float)(2.0 * scale * wi * (r[d] * e[0] + r[3 + d] * e[1] + r[6 + d] * e[2]));
            if (g.target) g.target[i * 3 + d] = (float)(-2.0 * scale * wi * e[d]);
        }
    }
    return sum;
}

/* A set with a non-finite cell: NaN loss, NaN gradients for all its cells. */
static void poison_set(aligned_grads g, int64_t count)
{
    for (int64_t k = 0; k < count; k++) {
        if (g.pred) g.pred[k] = NAN;
        if (g.target) g.target[k] = NAN;
    }
}

static float *grad_buffer(ast_ctx *c, ast_tensor *t)
{
    return ast_needs_grad(c, &t, 1) ? ast_alloc(c, (size_t)t->size * sizeof(float)) : NULL;
}

static void aligned_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *pred = n->in[0], *target = n->in[1], *mask = n->in[2];
    int64_t nb = pred->shape[0], np = pred->shape[1];
    aligned_in in = {pred->data, target->data, mask ? mask->data : NULL};
    aligned_grads *g = ast_alloc(c, sizeof *g);
    *g = (aligned_grads){grad_buffer(c, pred), grad_buffer(c, target)};
    int sets = 0;
    for (int64_t b = 0; b < nb; b++) sets += set_weight(in.mask, b, np) >= 2.0;
    set_work x = set_work_of(c, np, mask);
    double total = 0.0;
    for (int64_t b = 0; b < nb; b++) {
        double weight = set_weight(in.mask, b, np);
        if (weight < 2.0) continue; /* one point has no shape to compare */
        aligned_grads gb = {g->pred ? g->pred + b * np * 3 : NULL, g->target ? g->target + b * np * 3 : NULL};
        if (!load_set(&x, &in, b)) {
            total = NAN;
            poison_set(gb, np * 3);
            continue;
        }
        ast_center_rows3(x.p, x.w, (int)np);
        ast_center_rows3(x.q, x.w, (int)np);
        double scale = 1.0 / (3.0 * weight * sets); /* set b's share of the mean over sets */
        total += scale * aligned_sq_err(&x, gb, scale);
    }
    n->out->data[0] = (float)total;
    n->saved = g;
}

/* grad (=, or += where it holds another's) dy * the saved gradient. */
static void scale_into(float *grad, int assign, const float *unit, float dy, int64_t count)
{
    for (int64_t k = 0; k < count; k++) grad[k] = assign ? dy * unit[k] : grad[k] + dy * unit[k];
}

static void aligned_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    const aligned_grads *s = n->saved;
    float dy = n->out->grad[0];
    int64_t count = n->in[0]->size;
    if (g->g[0]) scale_into(g->g[0], g->assign[0], s->pred, dy, count);
    if (g->g[1]) scale_into(g->g[1], g->assign[1], s->target, dy, count);
}

/* kabsch_align: R of each set as loaded, not centred (the sets come
 * centred in float; in double their means are rounding, which would move
 * the bits of the sampler's steps), and every cell of pred, padding
 * included, turned by it in double and rounded once. */
static void align_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *pred = n->in[0], *mask = n->in[2];
    int64_t nb = pred->shape[0], np = pred->shape[1];
    aligned_in in = {pred->data, n->in[1]->data, mask ? mask->data : NULL};
    set_work x = set_work_of(c, np, mask);
    for (int64_t b = 0; b < nb; b++) {
        const float *p = in.pred + b * np * 3;
        float *out = n->out->data + b * np * 3;
        double r[9];
        int finite = load_set(&x, &in, b);
        if (finite) ast_kabsch(x.p, x.q, x.w, (int)np, 1, r);
        for (int64_t i = 0; i < np; i++)
            for (int a = 0; a < 3; a++)
                out[i * 3 + a] = finite ? (float)(r[a * 3] * p[i * 3] + r[a * 3 + 1] * p[i * 3 + 1] +
                                                  r[a * 3 + 2] * p[i * 3 + 2])
                                        : NAN;
    }
}

void ast_cpu_aligned_kernels(ast_op_kernel *t)
{
    t[AST_OP_aligned_mse] = (ast_op_kernel){.forward = aligned_forward, .backward = aligned_backward, .assigns = 3u};
    t[AST_OP_kabsch_align] = (ast_op_kernel){.forward = align_forward}; /* no backward: inference only */
}
