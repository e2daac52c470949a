/* Local-structure losses on the x0 prediction of positions (ast_structure_loss,
 * see model/loss.h): soft neighbour retrieval (kNN-NCA) and the log-ratios of
 * the true kNN graph's edge lengths. Both see the prediction only through
 * distance ratios, so they are blind to its rotation, reflection, shift and
 * scale: they ask for the neighbourhoods eval's knn_k and dist_row_spearman
 * score, not for coordinates. One fused node on the host: per set, the
 * true kNN lists are a partial sort of O(n^2) distances, cheap beside the
 * network for the set sizes trained. On a device it synchronises
 * (loss.structure is none by default, so the default step does not). */
#include <math.h>

#include "model/loss.h"
#include "model/model_internal.h"

/* Relative floor of the squared edge lengths in edge_log_ratio, as a share
 * of the set's mean squared pairwise distance (so it scales with the set
 * and keeps the loss scale-free): 1e-6 keeps log finite for coincident
 * cells and is far below any real neighbour distance (a 64-cell set's
 * nearest neighbours are ~1e-2 of it). */
#define EDGE_FLOOR 1e-6

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

/* The inputs on the host and the loss's settings. */
typedef struct host_sets {
    const float *pred, *target, *mask; /* mask NULL: none */
    int64_t n;                         /* cells per set, padding included */
    ast_structure kind;
    int k;
    double tau;
} host_sets;

/* One set's valid cells, compacted, in double. */
typedef struct sset {
    double *p, *q, *g; /* [n, 3] pred, target, dL/dpred */
    int64_t *row;      /* row[i]: cell i's index in the set */
    int *nbr;          /* [n, k] cell i's true k nearest neighbours */
    double *work;      /* [n] a row of logits */
    int64_t n;
    int k;
} sset;

static double sq_dist(const double *a, const double *b)
{
    double dx = a[0] - b[0], dy = a[1] - b[1], dz = a[2] - b[2];
    return dx * dx + dy * dy + dz * dz;
}

/* Loads set b's valid cells (mask != 0: the mask marks padding, 0 or 1).
 * Returns 0 if one is not finite. */
static int load_valid(sset *s, const float *pred, const float *target, const float *mask, int64_t b, int64_t n)
{
    int finite = 1;
    s->n = 0;
    for (int64_t i = 0; i < n; i++) {
        if (mask && mask[b * n + i] == 0.0f) continue;
        for (int a = 0; a < 3; a++) {
            s->p[s->n * 3 + a] = pred[(b * n + i) * 3 + a];
            s->q[s->n * 3 + a] = target[(b * n + i) * 3 + a];
            finite &= isfinite(s->p[s->n * 3 + a]) && isfinite(s->q[s->n * 3 + a]);
        }
        s->row[s->n++] = i;
    }
    return finite;
}

/* Each cell's k nearest other cells by the true positions, nearest first
 * (ties to the lower index): an insertion into a list of k. */
static void true_knn(sset *s)
{
    for (int64_t i = 0; i < s->n; i++) {
        int *nb = s->nbr + i * s->k, len = 0;
        double *d = s->work;
        for (int64_t j = 0; j < s->n; j++) d[j] = sq_dist(s->q + i * 3, s->q + j * 3);
        for (int64_t j = 0; j < s->n; j++) {
            if (j == i || (len == s->k && d[j] >= d[nb[len - 1]])) continue;
            int at = len < s->k ? len++ : len - 1;
            while (at > 0 && d[nb[at - 1]] > d[j]) nb[at] = nb[at - 1], at--;
            nb[at] = (int)j;
        }
    }
}

/* Mean squared distance over ordered pairs of distinct cells,
 * 2 sum_i |x_i - xbar|^2 / (n - 1); mean (3 values) is xbar. */
static double mean_pair_sq(const double *x, int64_t n, double mean[3])
{
    double ss = 0.0;
    for (int a = 0; a < 3; a++) {
        mean[a] = 0.0;
        for (int64_t i = 0; i < n; i++) mean[a] += x[i * 3 + a] / (double)n;
    }
    for (int64_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++) ss += (x[i * 3 + a] - mean[a]) * (x[i * 3 + a] - mean[a]);
    return 2.0 * ss / (double)(n - 1);
}

/* Adds dL/dS * dS/dp to the set's gradient, S = mean_pair_sq(p):
 * dS/dp_i = 4 (p_i - pbar) / (n - 1). */
static void add_spread_grad(sset *s, const double mean[3], double dl_ds)
{
    for (int64_t i = 0; i < s->n; i++)
        for (int a = 0; a < 3; a++) s->g[i * 3 + a] += dl_ds * 4.0 * (s->p[i * 3 + a] - mean[a]) / (double)(s->n - 1);
}

/* Adds dL/d(d2_ij) * d(d2_ij)/dp for d2_ij = |p_i - p_j|^2. */
static void add_pair_grad(sset *s, int64_t i, int64_t j, double dl_dd2)
{
    for (int a = 0; a < 3; a++) {
        double g = 2.0 * dl_dd2 * (s->p[i * 3 + a] - s->p[j * 3 + a]);
        s->g[i * 3 + a] += g;
        s->g[j * 3 + a] -= g;
    }
}

/* Mean squared length of the true kNN edges. */
static double true_knn_sq(const sset *s)
{
    double sum = 0.0;
    for (int64_t i = 0; i < s->n; i++)
        for (int e = 0; e < s->k; e++) sum += sq_dist(s->q + i * 3, s->q + s->nbr[i * s->k + e] * 3);
    return sum / (double)(s->n * s->k);
}

/* Cell i's term -log sum_{j in kNN(i)} p_ij, p_ij = softmax_{j != i} of
 * a_ij = -d2_ij / t, both sums shifted by their own largest logit (a
 * prediction far off can put every true neighbour ~1e3 logits below the
 * nearest cell); adds its gradient (dL/da_ij = p_ij - q_ij, q the softmax
 * restricted to the kNN) to the pairs and returns dL/dt. */
static double nca_cell(sset *s, int64_t i, double t, double *loss)
{
    const int *nb = s->nbr + i * s->k;
    double *a = s->work, top = -INFINITY, top_near = -INFINITY, all = 0.0, near = 0.0, dl_dt = 0.0;
    for (int64_t j = 0; j < s->n; j++) {
        a[j] = j == i ? -INFINITY : -sq_dist(s->p + i * 3, s->p + j * 3) / t;
        if (a[j] > top) top = a[j];
    }
    for (int e = 0; e < s->k; e++) top_near = a[nb[e]] > top_near ? a[nb[e]] : top_near;
    for (int64_t j = 0; j < s->n; j++) all += exp(a[j] - top);
    for (int e = 0; e < s->k; e++) near += exp(a[nb[e]] - top_near);
    *loss += top + log(all) - top_near - log(near);
    for (int64_t j = 0; j < s->n; j++) {
        if (j == i) continue;
        double dl_da = exp(a[j] - top) / all;
        for (int e = 0; e < s->k; e++)
            if (nb[e] == j) dl_da -= exp(a[j] - top_near) / near;
        add_pair_grad(s, i, j, -dl_da / t);
        dl_dt += dl_da * (-a[j] / t); /* da_ij/dt = -a_ij / t */
    }
    return dl_dt;
}

/* NCA over one set, the mean over its cells. The temperature is
 * t = tau * r2 * S_pred / S_true: r2 the mean squared true kNN edge, mapped
 * into the prediction's scale by the ratio of the sets' mean squared
 * pairwise distances. So the kernel reaches the k-th neighbour at tau = 1
 * whatever the units, the prediction's scale (L is invariant to it: t moves
 * with it, and so does its gradient) and the set size (r2 shrinks as a set
 * of the same tissue grows, where a share of the set's extent would not).
 * Returns -1 for a set with no scale (all true or all predicted cells in
 * one place): there is nothing to retrieve. */
static int nca_set(sset *s, double tau, double *loss)
{
    double mp[3], mq[3], sp = mean_pair_sq(s->p, s->n, mp), sq = mean_pair_sq(s->q, s->n, mq);
    double r2 = true_knn_sq(s);
    if (!(sp > 0.0) || !(sq > 0.0) || !(r2 > 0.0)) return -1;
    double t = tau * r2 * sp / sq, dl_dt = 0.0, sum = 0.0;
    for (int64_t i = 0; i < s->n; i++) dl_dt += nca_cell(s, i, t, &sum);
    for (int64_t k = 0; k < s->n * 3; k++) s->g[k] /= (double)s->n;
    add_spread_grad(s, mp, dl_dt / (double)s->n * t / sp);
    *loss = sum / (double)s->n;
    return 0;
}

/* Edge log-ratios over one set: r_e = log dp_e - log dq_e over the directed
 * true kNN edges (an edge both ways counts twice, as a mutual neighbour
 * matters twice), L = mean_e (r_e - c)^2 with c = mean_e r_e, so a common
 * scale of the prediction is free. Lengths are floored at EDGE_FLOOR of the
 * set's own scale. dL/dr_e = 2 (r_e - c) / E (c's own change sums to 0). */
static int edge_set(sset *s, double *loss)
{
    double mp[3], mq[3], sp = mean_pair_sq(s->p, s->n, mp), sq = mean_pair_sq(s->q, s->n, mq);
    if (!(sp > 0.0) || !(sq > 0.0)) return -1;
    int64_t edges = s->n * s->k;
    double *r = s->work, c = 0.0, sum = 0.0, dl_ds = 0.0;
    for (int64_t e = 0; e < edges; e++) {
        const double *pi = s->p + e / s->k * 3, *qi = s->q + e / s->k * 3;
        int j = s->nbr[e];
        r[e] = 0.5 * (log(sq_dist(pi, s->p + j * 3) + EDGE_FLOOR * sp) - log(sq_dist(qi, s->q + j * 3) + EDGE_FLOOR * sq));
        c += r[e] / (double)edges;
    }
    for (int64_t e = 0; e < edges; e++) {
        int64_t i = e / s->k, j = s->nbr[e];
        double dl_dr = 2.0 * (r[e] - c) / (double)edges, den = sq_dist(s->p + i * 3, s->p + j * 3) + EDGE_FLOOR * sp;
        sum += (r[e] - c) * (r[e] - c) / (double)edges;
        add_pair_grad(s, i, j, dl_dr * 0.5 / den);
        dl_ds += dl_dr * 0.5 * EDGE_FLOOR / den;
    }
    add_spread_grad(s, mp, dl_ds);
    *loss = sum;
    return 0;
}

/* Set b: its loss into *loss and its gradient into grad's rows (NULL:
 * none). Returns 1 if the set counts (a non-finite one does, with a NaN
 * loss and gradient: the trainer must see it), 0 if not. */
static int one_set(sset *s, const host_sets *in, int64_t b, float *grad, double *loss)
{
    int64_t n = in->n;
    if (!load_valid(s, in->pred, in->target, in->mask, b, n)) {
        for (int64_t k = 0; grad && k < n * 3; k++) grad[k] = NAN;
        *loss = NAN;
        return 1;
    }
    if (s->n < 2) return 0; /* one cell has no neighbours */
    s->k = in->k < s->n - 1 ? in->k : (int)(s->n - 1);
    for (int64_t k = 0; k < s->n * 3; k++) s->g[k] = 0.0;
    true_knn(s);
    int skipped = in->kind == AST_STRUCTURE_NCA ? nca_set(s, in->tau, loss) : edge_set(s, loss);
    if (skipped) return 0;
    for (int64_t i = 0; grad && i < s->n; i++)
        for (int a = 0; a < 3; a++) grad[s->row[i] * 3 + a] = (float)s->g[i * 3 + a];
    return 1;
}

ast_tensor *ast_structure_loss(ast_ctx *c, ast_structure kind, ast_tensor *pred, ast_tensor *target,
                               ast_tensor *mask, int k, double tau)
{
    char s1[64], s2[64];
    AST_ASSERT(pred->ndim == 3 && pred->shape[2] == 3 && ast_same_shape(pred, target),
               "structure loss: %s against %s; both must be [B, N, 3]", ast_shape_str(pred, s1, sizeof s1),
               ast_shape_str(target, s2, sizeof s2));
    AST_ASSERT(kind == AST_STRUCTURE_NCA || kind == AST_STRUCTURE_EDGE_LOG_RATIO, "structure loss: kind %d", (int)kind);
    AST_ASSERT(k >= 1 && tau > 0.0, "structure loss: k %d, tau %g", k, tau);
    int64_t nb = pred->shape[0], n = pred->shape[1];
    AST_ASSERT(!mask || mask->size == nb * n, "structure loss: mask %s for %s",
               mask ? ast_shape_str(mask, s1, sizeof s1) : "", ast_shape_str(pred, s2, sizeof s2));
    host_sets in = {model_host_data(c, pred), model_host_data(c, target), mask ? model_host_data(c, mask) : NULL,
                    n, kind, (int)(k < n ? k : n), tau};
    float *grad = ast_needs_grad(c, &pred, 1) ? ast_alloc(c, (size_t)pred->size * sizeof(float)) : NULL;
    size_t rows = (size_t)n * 3 * sizeof(double);
    sset s = {ast_alloc_uninit(c, rows), ast_alloc_uninit(c, rows), ast_alloc_uninit(c, rows),
              ast_alloc_uninit(c, (size_t)n * sizeof(int64_t)), ast_alloc_uninit(c, (size_t)n * in.k * sizeof(int)),
              ast_alloc_uninit(c, (size_t)n * in.k * sizeof(double)), 0, in.k};
    double total = 0.0, loss;
    int sets = 0;
    for (int64_t b = 0; b < nb; b++)
        if (one_set(&s, &in, b, grad ? grad + b * n * 3 : NULL, &loss)) sets++, total += loss;
    for (int64_t i = 0; grad && sets > 1 && i < pred->size; i++) grad[i] /= (float)sets; /* the mean over sets */
    float value = sets ? (float)(total / sets) : 0.0f;
    ast_tensor *y = ast_tensor_from(c, 1, (int64_t[]){1}, &value);
    ast_record(c, &(ast_node){.op = "structure_loss", .backward = model_host_grad_backward, .out = y, .in = {pred},
                              .n_in = 1, .saved = grad});
    return y;
}
