/* AdamW with optional AMSGrad (torch.optim.AdamW semantics), clipping and
 * learning-rate schedules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alphast/optim.h"

ast_adamw *ast_adamw_new(ast_params *p, const ast_adamw_config *cfg)
{
    ast_adamw *o = ast_xcalloc(1, sizeof *o);
    int n = ast_params_count(p);
    o->cfg = *cfg;
    o->params = p;
    o->m = ast_xcalloc((size_t)n, sizeof *o->m);
    o->v = ast_xcalloc((size_t)n, sizeof *o->v);
    o->vmax = ast_xcalloc((size_t)n, sizeof *o->vmax);
    for (int i = 0; i < n; i++) {
        size_t size = (size_t)ast_params_at(p, i)->size;
        o->m[i] = ast_xcalloc(size, sizeof(float));
        o->v[i] = ast_xcalloc(size, sizeof(float));
        if (cfg->amsgrad) o->vmax[i] = ast_xcalloc(size, sizeof(float));
    }
    return o;
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
    adamw_args a = {t->data, o->m[i], o->v[i], o->vmax[i], t->grad, c->beta1, c->beta2, c->eps,
                    1.0f - lr * c->weight_decay, lr / bc1, bc2_sqrt};
    ast_parallel_for(t->size, AST_PAR_GRAIN, adamw_range, &a);
}

void ast_adamw_step(ast_adamw *o, float lr)
{
    o->step++;
    float bc1 = 1.0f - powf(o->cfg.beta1, (float)o->step);
    float bc2_sqrt = sqrtf(1.0f - powf(o->cfg.beta2, (float)o->step));
    for (int i = 0; i < ast_params_count(o->params); i++) {
        ast_tensor *t = ast_params_at(o->params, i);
        if (!all_zero(t->grad, t->size)) update_param(o, i, lr, bc1, bc2_sqrt);
    }
}

double ast_grad_norm(const ast_params *p)
{
    double sq = 0.0;
    for (int i = 0; i < ast_params_count(p); i++) {
        const ast_tensor *t = ast_params_at(p, i);
        for (int64_t j = 0; j < t->size; j++) sq += (double)t->grad[j] * t->grad[j];
    }
    return sqrt(sq);
}

double ast_clip_grad_norm(ast_params *p, double max_norm)
{
    double norm = ast_grad_norm(p);
    /* torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when below 1 */
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
        for (int i = 0; i < ast_params_count(p); i++) {
            ast_tensor *t = ast_params_at(p, i);
            for (int64_t j = 0; j < t->size; j++) t->grad[j] *= (float)coef;
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
