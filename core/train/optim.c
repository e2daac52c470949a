/* AdamW with optional AMSGrad (torch.optim.AdamW semantics), clipping and
 * learning-rate schedules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/optim.h"

ast_adamw *ast_adamw_new_part(ast_params *p, const ast_adamw_config *cfg, int64_t first, int64_t count)
{
    ast_adamw *o = ast_xcalloc(1, sizeof *o);
    int n = ast_params_count(p);
    o->cfg = *cfg;
    o->params = p;
    o->first = first, o->count = count;
    o->lo = ast_xcalloc((size_t)n, sizeof *o->lo);
    o->len = ast_xcalloc((size_t)n, sizeof *o->len);
    o->m = ast_xcalloc((size_t)n, sizeof *o->m);
    o->v = ast_xcalloc((size_t)n, sizeof *o->v);
    o->vmax = ast_xcalloc((size_t)n, sizeof *o->vmax);
    int64_t at = 0; /* where parameter i starts in the flattened parameters */
    for (int i = 0; i < n; at += ast_params_at(p, i)->size, i++) {
        int64_t size = ast_params_at(p, i)->size, from = first > at ? first : at;
        int64_t to = first + count < at + size ? first + count : at + size;
        if (to <= from) continue;
        o->lo[i] = from - at, o->len[i] = to - from;
        o->m[i] = ast_xcalloc((size_t)o->len[i], sizeof(float));
        o->v[i] = ast_xcalloc((size_t)o->len[i], sizeof(float));
        if (cfg->amsgrad) o->vmax[i] = ast_xcalloc((size_t)o->len[i], sizeof(float));
    }
    return o;
}

ast_adamw *ast_adamw_new(ast_params *p, const ast_adamw_config *cfg)
{
    return ast_adamw_new_part(p, cfg, 0, ast_params_numel(p));
}

void ast_adamw_free(ast_adamw *o)
{
    if (!o) return;
    for (int i = 0; i < ast_params_count(o->params); i++) {
        free(o->m[i]);
        free(o->v[i]);
        free(o->vmax[i]);
    }
    free(o->m);
    free(o->v);
    free(o->vmax);
    free(o->lo);
    free(o->len);
    free(o);
}

static int all_zero(const float *g, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (g[i] != 0.0f) return 0;
    return 1;
}

typedef struct adamw_args {
    float *p, *m, *v, *vmax;
    const float *g;
    float beta1, beta2, eps, decay, step_size, bc2_sqrt;
} adamw_args;

/* Comparisons rather than fmaxf, and no branch on AMSGrad inside a loop,
 * so the update vectorises; blocks of 1024 keep the three passes in cache. */
static void adamw_range(void *arg, int64_t lo, int64_t hi)
{
    const adamw_args *a = arg;
    float *restrict p = a->p, *restrict m = a->m, *restrict v = a->v, *restrict vmax = a->vmax;
    const float *restrict g = a->g;
    for (int64_t b = lo; b < hi; b += 1024) {
        int64_t e = b + 1024 < hi ? b + 1024 : hi;
        for (int64_t j = b; j < e; j++) {
            m[j] = a->beta1 * m[j] + (1.0f - a->beta1) * g[j];
            v[j] = a->beta2 * v[j] + (1.0f - a->beta2) * g[j] * g[j];
        }
        if (vmax)
            for (int64_t j = b; j < e; j++) vmax[j] = v[j] > vmax[j] ? v[j] : vmax[j];
        const float *restrict vhat = vmax ? vmax : v;
        for (int64_t j = b; j < e; j++)
            p[j] = p[j] * a->decay - a->step_size * m[j] / (sqrtf(vhat[j]) / a->bc2_sqrt + a->eps);
    }
}

static void update_param(const ast_adamw *o, int i, float lr, float bc1, float bc2_sqrt)
{
    ast_tensor *t = ast_params_at(o->params, i);
    const ast_adamw_config *c = &o->cfg;
    adamw_args a = {t->data + o->lo[i], o->m[i], o->v[i], o->vmax[i], t->grad + o->lo[i], c->beta1, c->beta2, c->eps,
                    1.0f - lr * c->weight_decay, lr / bc1, bc2_sqrt};
    ast_parallel_for(o->len[i], AST_PAR_GRAIN, adamw_range, &a);
}

void ast_adamw_step(ast_adamw *o, float lr)
{
    o->step++;
    float bc1 = 1.0f - powf(o->cfg.beta1, (float)o->step);
    float bc2_sqrt = sqrtf(1.0f - powf(o->cfg.beta2, (float)o->step));
    for (int i = 0; i < ast_params_count(o->params); i++) {
        ast_tensor *t = ast_params_at(o->params, i);
        if (o->len[i] && !all_zero(t->grad, t->size)) update_param(o, i, lr, bc1, bc2_sqrt);
    }
}

/* Sums of squares over fixed blocks, added up in block order: the norm has
 * the same bits for any thread count. Eight lanes per block so the loop
 * vectorises without reassociating a single sum. */
#define NORM_BLOCK 8192

typedef struct sumsq_args {
    const float *g;
    int64_t n;
    double *block_sums;
} sumsq_args;

static void sumsq_range(void *arg, int64_t lo, int64_t hi)
{
    const sumsq_args *a = arg;
    for (int64_t blk = lo; blk < hi; blk++) {
        int64_t from = blk * NORM_BLOCK, to = from + NORM_BLOCK < a->n ? from + NORM_BLOCK : a->n, i = from;
        double lane[8] = {0};
        for (; i + 8 <= to; i += 8)
            for (int l = 0; l < 8; l++) lane[l] += (double)a->g[i + l] * a->g[i + l];
        for (; i < to; i++) lane[0] += (double)a->g[i] * a->g[i];
        double s = 0.0;
        for (int l = 0; l < 8; l++) s += lane[l];
        a->block_sums[blk] = s;
    }
}

static double sum_squares(const float *g, int64_t n)
{
    int64_t blocks = (n + NORM_BLOCK - 1) / NORM_BLOCK;
    sumsq_args a = {g, n, ast_xmalloc((size_t)(blocks ? blocks : 1) * sizeof(double))};
    ast_parallel_for(blocks, AST_PAR_GRAIN / NORM_BLOCK, sumsq_range, &a);
    double s = 0.0;
    for (int64_t b = 0; b < blocks; b++) s += a.block_sums[b];
    free(a.block_sums);
    return s;
}

double ast_grad_norm(const ast_params *p)
{
    double sq = 0.0;
    for (int i = 0; i < ast_params_count(p); i++) {
        const ast_tensor *t = ast_params_at(p, i);
        sq += sum_squares(t->grad, t->size);
    }
    return sqrt(sq);
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

double ast_clip_grad_norm(ast_params *p, double max_norm)
{
    double norm = ast_grad_norm(p);
    /* torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when below 1 */
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
        for (int i = 0; i < ast_params_count(p); i++) {
            ast_tensor *t = ast_params_at(p, i);
            ast_parallel_for(t->size, AST_PAR_GRAIN, scale_range, &(scale_args){t->grad, (float)coef});
        }
    return norm;
}

float ast_lr_at(const ast_lr_schedule *s, int64_t step, int epoch)
{
    if (s->warmup_steps > 0 && step < s->warmup_steps) return s->lr * (float)(step + 1) / (float)s->warmup_steps;
    if (s->kind == AST_LR_CONSTANT || s->t_max <= 0) return s->lr;
    double e = s->per_step ? (double)(step - s->warmup_steps) : (double)epoch;
    return (float)(s->eta_min + (s->lr - s->eta_min) * (1.0 + cos(M_PI * e / (double)s->t_max)) / 2.0);
}
