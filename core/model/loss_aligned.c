/* The position loss up to a rigid motion (ast_aligned_mse, see
 * alphast/loss.h): per set, the centred prediction is turned onto the
 * centred target by the optimal orthogonal R (Kabsch) and the MSE taken.
 * One fused node computed on the host (a 3x3 SVD per set): the forward
 * reads pred, target and mask once (on a device, one synchronisation), has
 * every residual at hand and keeps dL/dpred on the host for the backward
 * instead of recomputing the alignment. */
#include <math.h>

#include "model/kabsch.h"
#include "model/loss.h"
#include "model/model_internal.h"

/* One set in double: pred and target rows of 3, centred with the mask's
 * weights w (NULL when there is no mask: all 1). */
typedef struct set_work {
    double *p, *q, *w;
    int64_t n;
} set_work;

/* The inputs' data on the host. */
typedef struct host_inputs {
    const float *pred, *target, *mask; /* mask NULL: none */
} host_inputs;

static double set_weight(const float *mask, int64_t b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += mask ? mask[b * n + i] : 1.0;
    return s;
}

/* Loads and centres set b. Padded cells (weight 0) are loaded as zeros,
 * so whatever they hold cannot reach the sums (0 * NaN is NaN). Returns 0
 * if a valid cell is not finite: LAPACK's SVD rejects NaN, and the trainer
 * should see a NaN loss, not an abort. */
static int load_set(set_work *x, const host_inputs *in, int64_t b)
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
    ast_center_rows3(x->p, x->w, (int)n);
    ast_center_rows3(x->q, x->w, (int)n);
    return finite;
}

/* sum_i w_i |R p_i - q_i|^2 for the optimal R; with grad (else NULL),
 * also writes scale * 2 w_i R^T (R p_i - q_i) into the set's rows. That is
 * the whole gradient: R is optimal, so its own change drops out (envelope
 * theorem), and so does the centring's, as the weighted residuals sum to
 * R sum w p - sum w q = 0. */
static double aligned_sq_err(const set_work *x, float *grad, double scale)
{
    double r[9], sum = 0.0;
    ast_kabsch(x->p, x->q, x->w, (int)x->n, 1, r);
    for (int64_t i = 0; i < x->n; i++) {
        const double *p = x->p + i * 3, *q = x->q + i * 3;
        double wi = x->w ? x->w[i] : 1.0, e[3];
        for (int a = 0; a < 3; a++) e[a] = r[a * 3] * p[0] + r[a * 3 + 1] * p[1] + r[a * 3 + 2] * p[2] - q[a];
        sum += wi * (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
        if (grad)
            for (int d = 0; d < 3; d++)
                grad[i * 3 + d] = (float)(2.0 * scale * wi * (r[d] * e[0] + r[3 + d] * e[1] + r[6 + d] * e[2]));
    }
    return sum;
}

void model_host_grad_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *pred = n->in[0];
    const float *dl = n->saved;
    float *g = ast_grad(c, pred), dy;
    if (!g) return;
    const ast_backend *b = ast_ctx_backend(c);
    b->to_host(b, &dy, n->out->grad, sizeof dy);
    size_t bytes = (size_t)pred->size * sizeof(float);
    float *add = ast_alloc_uninit(c, bytes), *dev = ast_data_alloc_uninit(c, bytes);
    for (int64_t k = 0; k < pred->size; k++) add[k] = dy * dl[k];
    b->to_backend(b, dev, add, bytes);
    b->accumulate(b, g, dev, pred->size);
}

ast_tensor *ast_aligned_mse(ast_ctx *c, ast_tensor *pred, ast_tensor *target, ast_tensor *mask)
{
    char s1[64], s2[64];
    AST_ASSERT(pred->ndim == 3 && pred->shape[2] == 3 && ast_same_shape(pred, target),
               "aligned_mse: %s against %s; both must be [B, N, 3]", ast_shape_str(pred, s1, sizeof s1),
               ast_shape_str(target, s2, sizeof s2));
    int64_t nb = pred->shape[0], n = pred->shape[1];
    AST_ASSERT(!mask || mask->size == nb * n, "aligned_mse: mask %s for %s",
               mask ? ast_shape_str(mask, s1, sizeof s1) : "", ast_shape_str(pred, s2, sizeof s2));
    host_inputs in = {model_host_data(c, pred), model_host_data(c, target), mask ? model_host_data(c, mask) : NULL};
    int sets = 0;
    for (int64_t b = 0; b < nb; b++) sets += set_weight(in.mask, b, n) >= 2.0;
    float *grad = ast_needs_grad(c, &pred, 1) ? ast_alloc(c, (size_t)pred->size * sizeof(float)) : NULL;
    set_work x = {ast_alloc_uninit(c, (size_t)n * 3 * sizeof(double)),
                  ast_alloc_uninit(c, (size_t)n * 3 * sizeof(double)),
                  mask ? ast_alloc_uninit(c, (size_t)n * sizeof(double)) : NULL, n};
    double total = 0.0;
    for (int64_t b = 0; b < nb; b++) {
        double weight = set_weight(in.mask, b, n);
        if (weight < 2.0) continue; /* one point has no shape to compare */
        float *gb = grad ? grad + b * n * 3 : NULL;
        if (!load_set(&x, &in, b)) {
            total = NAN;
            for (int64_t k = 0; gb && k < n * 3; k++) gb[k] = NAN;
            continue;
        }
        double scale = 1.0 / (3.0 * weight * sets); /* set b's share of the mean over sets */
        total += scale * aligned_sq_err(&x, gb, scale);
    }
    float value = (float)total;
    ast_tensor *y = ast_tensor_from(c, 1, (int64_t[]){1}, &value);
    ast_record(c, &(ast_node){.op = "aligned_mse", .backward = model_host_grad_backward, .out = y, .in = {pred},
                              .n_in = 1, .saved = grad});
    return y;
}
