/* The per-cell MLP regressor baseline (CeLEry-like): expression -> position,
 * fitted on the training cells of one slice by MSE in their frame, with the
 * project's own engine (autograd ops, AdamW). Inputs are standardised per
 * gene and targets per axis on the fitting cells, so one learning rate
 * serves every dataset; a seeded tenth of the cells is held back and the
 * weights of the epoch with the lowest loss on it are the ones kept. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "eval/baselines.h"
#include "train/optim.h"

#define MAX_VALUES ((int64_t)1 << 25)

typedef struct layer {
    ast_tensor *weight, *bias;
} layer;

/* A Linear(in, out) with PyTorch's default U(+-1/sqrt(in)) initialisation. */
static layer layer_new(ast_scope *s, const char *name, int in, int out)
{
    char buf[64];
    float bound = 1.0f / sqrtf((float)in);
    layer l;
    snprintf(buf, sizeof buf, "%s.weight", name);
    l.weight = ast_param(s, buf, 2, (int64_t[]){out, in}, AST_INIT_UNIFORM, bound);
    snprintf(buf, sizeof buf, "%s.bias", name);
    l.bias = ast_param(s, buf, 1, (int64_t[]){out}, AST_INIT_UNIFORM, bound);
    return l;
}

struct ast_mlp_regressor {
    ast_mlp_regressor_config cfg;
    int G, dims;
    double *x_mean, *x_sd; /* [G] */
    double y_mean[3], y_sd[3];
    ast_params *params;
    layer l[3]; /* G -> hidden -> hidden -> dims */
    ast_ctx *ctx;
};

static ast_tensor *forward(ast_mlp_regressor *m, const float *x, int n)
{
    ast_ctx *c = m->ctx;
    ast_tensor *h = ast_tensor_from(c, 2, (int64_t[]){n, m->G}, x);
    for (int i = 0; i < 3; i++) {
        h = ast_linear(c, h, m->l[i].weight, m->l[i].bias);
        if (i < 2) h = ast_relu(c, h);
    }
    return h;
}

/* Per-column mean and standard deviation of rows [n, cols] (sd 1 for a
 * constant column, such as a 2-D slice's z, so it standardises to 0). */
static void column_stats(const float *rows, int64_t n, int cols, double *mean, double *sd)
{
    for (int j = 0; j < cols; j++) {
        double s = 0.0, s2 = 0.0;
        for (int64_t i = 0; i < n; i++) s += rows[i * cols + j];
        mean[j] = s / (double)n;
        for (int64_t i = 0; i < n; i++) s2 += (rows[i * cols + j] - mean[j]) * (rows[i * cols + j] - mean[j]);
        sd[j] = sqrt(s2 / (double)n);
        if (sd[j] < 1e-12) sd[j] = 1.0;
    }
}

static void standardise(float *rows, int64_t n, int cols, const double *mean, const double *sd)
{
    for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < cols; j++) rows[i * cols + j] = (float)((rows[i * cols + j] - mean[j]) / sd[j]);
}

/* Mean MSE of the model on rows [lo, hi) of (x, y), without a tape. */
static double loss_on(ast_mlp_regressor *m, const float *x, const float *y, int64_t lo, int64_t hi)
{
    ast_ctx_reset(m->ctx);
    ast_ctx_set_grad(m->ctx, 0);
    ast_tensor *out = forward(m, x + lo * m->G, (int)(hi - lo));
    ast_tensor *target = ast_tensor_from(m->ctx, 2, (int64_t[]){hi - lo, m->dims}, y + lo * m->dims);
    double l = ast_mse(m->ctx, out, target, NULL)->data[0];
    ast_ctx_set_grad(m->ctx, 1);
    return l;
}

/* One epoch of minibatch AdamW over the first n_fit rows in a fresh order. */
static void epoch(ast_mlp_regressor *m, ast_adamw *o, const float *x, const float *y, int64_t n_fit, int64_t *order,
                  float *bx, float *by, ast_rng *rng)
{
    for (int64_t i = n_fit - 1; i > 0; i--) {
        int64_t j = (int64_t)(ast_rng_next(rng) % (uint64_t)(i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    for (int64_t lo = 0; lo < n_fit; lo += m->cfg.batch) {
        int nb = (int)(lo + m->cfg.batch <= n_fit ? m->cfg.batch : n_fit - lo);
        for (int i = 0; i < nb; i++) {
            memcpy(bx + (int64_t)i * m->G, x + order[lo + i] * m->G, (size_t)m->G * sizeof *bx);
            memcpy(by + (int64_t)i * m->dims, y + order[lo + i] * m->dims, (size_t)m->dims * sizeof *by);
        }
        ast_ctx_reset(m->ctx);
        ast_tensor *out = forward(m, bx, nb);
        ast_tensor *loss = ast_mse(m->ctx, out, ast_tensor_from(m->ctx, 2, (int64_t[]){nb, m->dims}, by), NULL);
        ast_params_zero_grad(m->params);
        ast_backward(m->ctx, loss);
        ast_adamw_step(o, m->cfg.lr);
    }
}

/* Copies every parameter's values into (save) or out of (!save) keep. */
static void snapshot(ast_params *p, float *keep, int save)
{
    for (int i = 0; i < ast_params_count(p); i++) {
        ast_tensor *t = ast_params_at(p, i);
        if (save) memcpy(keep, t->data, (size_t)t->size * sizeof *keep);
        else memcpy(t->data, keep, (size_t)t->size * sizeof *keep);
        keep += t->size;
    }
}

/* AdamW with early stopping on rows [n_fit, n) of (x, y): the best
 * validation epoch's weights are restored at the end. */
static void fit(ast_mlp_regressor *m, const float *x, const float *y, int64_t n_fit, int64_t n)
{
    ast_adamw_config acfg = {.lr = m->cfg.lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = m->cfg.weight_decay};
    ast_adamw *o = ast_adamw_new(m->params, &acfg);
    int64_t *order = ast_xmalloc((size_t)n_fit * sizeof *order);
    for (int64_t i = 0; i < n_fit; i++) order[i] = i;
    float *bx = ast_xmalloc((size_t)m->cfg.batch * m->G * sizeof *bx), *by = ast_xmalloc((size_t)m->cfg.batch * 3 * sizeof *by);
    float *best = ast_xmalloc((size_t)ast_params_numel(m->params) * sizeof *best);
    snapshot(m->params, best, 1);
    double best_loss = n > n_fit ? loss_on(m, x, y, n_fit, n) : INFINITY;
    ast_rng rng;
    ast_rng_seed(&rng, m->cfg.seed);
    for (int e = 0, since = 0; e < m->cfg.max_epochs && since < m->cfg.patience; e++, since++) {
        epoch(m, o, x, y, n_fit, order, bx, by, &rng);
        double l = n > n_fit ? loss_on(m, x, y, n_fit, n) : -(double)e; /* no validation rows: the last epoch */
        if (l < best_loss) best_loss = l, since = -1, snapshot(m->params, best, 1);
    }
    snapshot(m->params, best, 0);
    free(best), free(bx), free(by), free(order);
    ast_adamw_free(o);
}

/* The fitting rows: at most cfg.max_cells reference cells, and at most
 * MAX_VALUES expression values (128 MB of floats: a panel of 20,000 genes
 * still fits 1,600 cells), in a seeded order whose last val_fraction are
 * the validation rows. */
static int64_t draw_rows(const ast_reference_cells *ref, const ast_mlp_regressor_config *cfg, int64_t **rows)
{
    int64_t n = ref->n, *idx = ast_xmalloc((size_t)(n ? n : 1) * sizeof *idx);
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    ast_rng rng;
    ast_rng_seed(&rng, cfg->seed ^ 0x6d6c7072ull);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(ast_rng_next(&rng) % (uint64_t)(i + 1)), t = idx[i];
        idx[i] = idx[j], idx[j] = t;
    }
    *rows = idx;
    int64_t cap = MAX_VALUES / (ref->G > 0 ? ref->G : 1);
    if (cap > cfg->max_cells) cap = cfg->max_cells;
    return n < cap ? n : cap;
}

ast_mlp_regressor *ast_mlp_regressor_fit(const ast_reference_cells *ref, int dims, const ast_mlp_regressor_config *cfg)
{
    ast_mlp_regressor *m = ast_xcalloc(1, sizeof *m);
    m->cfg = *cfg, m->G = ref->G, m->dims = dims;
    int64_t *rows, n = draw_rows(ref, cfg, &rows);
    float *x = ast_xmalloc((size_t)(n ? n : 1) * ref->G * sizeof *x), *y = ast_xmalloc((size_t)(n ? n : 1) * dims * sizeof *y);
    for (int64_t i = 0; i < n; i++) {
        ref->expr_row(ref->ctx, rows[i], x + i * ref->G);
        for (int k = 0; k < dims; k++) y[i * dims + k] = ref->pos[rows[i] * 3 + k];
    }
    m->x_mean = ast_xmalloc((size_t)ref->G * sizeof *m->x_mean), m->x_sd = ast_xmalloc((size_t)ref->G * sizeof *m->x_sd);
    column_stats(x, n ? n : 1, ref->G, m->x_mean, m->x_sd);
    column_stats(y, n ? n : 1, dims, m->y_mean, m->y_sd);
    standardise(x, n, ref->G, m->x_mean, m->x_sd), standardise(y, n, dims, m->y_mean, m->y_sd);
    m->params = ast_params_new(cfg->seed);
    ast_scope *s = ast_scope_new(m->params, "mlp_regression");
    m->l[0] = layer_new(s, "0", ref->G, cfg->hidden);
    m->l[1] = layer_new(s, "1", cfg->hidden, cfg->hidden);
    m->l[2] = layer_new(s, "2", cfg->hidden, dims);
    m->ctx = ast_ctx_new(cfg->seed);
    int64_t n_val = (int64_t)floor(cfg->val_fraction * (double)n);
    if (n > 0) fit(m, x, y, n - n_val, n);
    free(x), free(y), free(rows);
    return m;
}

void ast_mlp_regressor_predict(ast_mlp_regressor *m, const float *x, int n, float *pos)
{
    if (n <= 0) return;
    float *xs = ast_xmalloc((size_t)n * m->G * sizeof *xs);
    memcpy(xs, x, (size_t)n * m->G * sizeof *xs);
    standardise(xs, n, m->G, m->x_mean, m->x_sd);
    ast_ctx_reset(m->ctx);
    ast_ctx_set_grad(m->ctx, 0);
    ast_tensor *out = forward(m, xs, n);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            pos[i * 3 + k] = k < m->dims ? (float)(out->data[i * m->dims + k] * m->y_sd[k] + m->y_mean[k]) : 0.0f;
    ast_ctx_set_grad(m->ctx, 1);
    free(xs);
}

void ast_mlp_regressor_free(ast_mlp_regressor *m)
{
    if (!m) return;
    ast_ctx_free(m->ctx);
    ast_params_free(m->params);
    free(m->x_mean), free(m->x_sd), free(m);
}

ast_mlp_regressor_config ast_mlp_regressor_defaults(int max_epochs, uint64_t seed)
{
    /* patience 5 of at most max_epochs: the validation loss of these small
     * regressors flattens within tens of epochs; 20,000 cells bound the cost
     * of one fit to a few seconds whatever the reference's size. */
    return (ast_mlp_regressor_config){.hidden = 128, .max_epochs = max_epochs, .patience = 5, .batch = 128, .lr = 1e-3f,
                                      .weight_decay = 1e-4f, .val_fraction = 0.1, .max_cells = 20000, .seed = seed};
}
