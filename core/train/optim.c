/* AdamW with optional AMSGrad (torch.optim.AdamW semantics), clipping and
 * learning-rate schedules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/optim.h"

/* Zeroed backend memory for n floats (the moments live beside the parameters). */
static float *moment_new(const ast_backend *b, int64_t n)
{
    float *x = b->buffer_alloc(b, (size_t)n * sizeof(float));
    AST_ASSERT(x, "out of %s memory for %lld optimiser moments", b->name, (long long)n);
    b->zero(b, x, (size_t)n * sizeof(float));
    return x;
}

ast_adamw *ast_adamw_new_part(ast_params *p, const ast_adamw_config *cfg, int64_t first, int64_t count)
{
    ast_adamw *o = ast_xcalloc(1, sizeof *o);
    const ast_backend *b = ast_params_backend(p);
    int n = ast_params_count(p);
    o->cfg = *cfg;
    o->hyper_host = b->host_alloc(b, sizeof *o->hyper_host);
    o->hyper = b->memory == AST_MEM_HOST ? o->hyper_host : b->buffer_alloc(b, sizeof *o->hyper);
    o->sumsq = b->buffer_alloc(b, sizeof *o->sumsq);
    AST_ASSERT(o->hyper_host && o->hyper && o->sumsq, "out of %s memory for the optimiser's scalars", b->name);
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
        o->m[i] = moment_new(b, o->len[i]);
        o->v[i] = moment_new(b, o->len[i]);
        if (cfg->amsgrad) o->vmax[i] = moment_new(b, o->len[i]);
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
    const ast_backend *b = ast_params_backend(o->params);
    for (int i = 0; i < ast_params_count(o->params); i++) {
        if (o->m[i]) b->buffer_free(b, o->m[i]);
        if (o->v[i]) b->buffer_free(b, o->v[i]);
        if (o->vmax[i]) b->buffer_free(b, o->vmax[i]);
    }
    if (o->hyper != o->hyper_host) b->buffer_free(b, o->hyper);
    b->host_free(b, o->hyper_host);
    b->buffer_free(b, o->sumsq);
    free(o->m);
    free(o->v);
    free(o->vmax);
    free(o->lo);
    free(o->len);
    free(o);
}

void ast_adamw_stage(ast_adamw *o, float lr)
{
    const ast_backend *b = ast_params_backend(o->params);
    if (b->memory != AST_MEM_HOST) b->synchronize(b); /* the last update's copy has read the constants */
    o->step++;
    const ast_adamw_config *c = &o->cfg;
    float bc1 = 1.0f - powf(c->beta1, (float)o->step);
    *o->hyper_host = (ast_adamw_hyper){c->beta1, c->beta2, c->eps, 1.0f - lr * c->weight_decay, lr / bc1,
                                       sqrtf(1.0f - powf(c->beta2, (float)o->step))};
}

/* Every parameter's gradient as a list of arrays, for the backend's
 * sum_squares and clip. */
typedef struct grad_arrays {
    float **xs;
    int64_t *ns;
    int n;
} grad_arrays;

static grad_arrays grads_of(const ast_params *p)
{
    grad_arrays g = {.n = ast_params_count(p)};
    g.xs = ast_xcalloc((size_t)g.n + 1, sizeof *g.xs);
    g.ns = ast_xcalloc((size_t)g.n + 1, sizeof *g.ns);
    for (int i = 0; i < g.n; i++) {
        g.xs[i] = ast_params_at(p, i)->grad;
        g.ns[i] = ast_params_at(p, i)->size;
    }
    return g;
}

static void grads_free(grad_arrays *g) { free(g->xs), free(g->ns); }

/* The constants to the backend, then the update, gated by sumsq and loss. */
static void queue_adamw(ast_adamw *o, const double *sumsq, const float *loss)
{
    const ast_backend *b = ast_params_backend(o->params);
    if (o->hyper != o->hyper_host) b->to_backend(b, o->hyper, o->hyper_host, sizeof *o->hyper);
    int n = ast_params_count(o->params);
    ast_adamw_job *jobs = ast_xcalloc((size_t)n, sizeof *jobs);
    for (int i = 0; i < n; i++) {
        ast_tensor *t = ast_params_at(o->params, i);
        jobs[i] = (ast_adamw_job){t->data + o->lo[i], o->m[i], o->v[i], o->vmax[i], t->grad + o->lo[i], o->len[i],
                                  t->grad, t->size};
    }
    b->adamw(b, jobs, n, o->hyper, sumsq, loss);
    free(jobs);
}

void ast_adamw_step(ast_adamw *o, float lr)
{
    ast_adamw_stage(o, lr);
    queue_adamw(o, NULL, NULL);
}

void ast_adamw_queue(ast_adamw *o, double clip_norm, const float *loss)
{
    grad_arrays g = grads_of(o->params);
    const ast_backend *b = ast_params_backend(o->params);
    b->sum_squares(b, g.xs, g.ns, g.n, o->sumsq);
    if (clip_norm > 0) b->clip(b, g.xs, g.ns, g.n, o->sumsq, (float)clip_norm);
    grads_free(&g);
    queue_adamw(o, o->sumsq, loss);
}

double ast_adamw_norm(const ast_adamw *o)
{
    const ast_backend *b = ast_params_backend(o->params);
    double sq;
    b->to_host(b, &sq, o->sumsq, sizeof sq);
    return sqrt(sq);
}

double ast_grad_norm(const ast_params *p)
{
    grad_arrays g = grads_of(p);
    double sq = ast_backend_sum_squares(ast_params_backend(p), g.xs, g.ns, g.n, 0.0f);
    grads_free(&g);
    return sqrt(sq);
}

double ast_clip_grad_norm(ast_params *p, double max_norm)
{
    grad_arrays g = grads_of(p);
    double sq = ast_backend_sum_squares(ast_params_backend(p), g.xs, g.ns, g.n, (float)max_norm);
    grads_free(&g);
    return sqrt(sq);
}

float ast_lr_at(const ast_lr_schedule *s, int64_t step, int epoch)
{
    if (s->warmup_steps > 0 && step < s->warmup_steps) return s->lr * (float)(step + 1) / (float)s->warmup_steps;
    if (s->kind == AST_LR_CONSTANT || s->t_max <= 0) return s->lr;
    double e = s->per_step ? (double)(step - s->warmup_steps) : (double)epoch;
    return (float)(s->eta_min + (s->lr - s->eta_min) * (1.0 + cos(M_PI * e / (double)s->t_max)) / 2.0);
}
