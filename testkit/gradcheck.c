#include <math.h>
#include <stdlib.h>

#include "engine/backend.h"
#include "gradcheck.h"

ast_tensor *gc_input(ast_params *p, const char *name, int ndim, const int64_t *shape, float scale)
{
    ast_scope *s = ast_scope_new(p, "");
    return ast_param(s, name, ndim, shape, AST_INIT_NORMAL, scale);
}

/* Fixed projection weights: a hash of the index mapped to [-1, 1]. */
static float proj(int64_t i)
{
    uint64_t z = (uint64_t)i * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    z ^= z >> 29;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* L = sum_i r_i y_i, with y copied to the host first. */
static double project(ast_ctx *c, const ast_tensor *y)
{
    float *v = ast_xmalloc((size_t)(y->size > 0 ? y->size : 1) * sizeof *v);
    ast_tensor_read(c, y, 0, y->size, v);
    double l = 0.0;
    for (int64_t i = 0; i < y->size; i++) l += (double)proj(i) * v[i];
    free(v);
    return l;
}

static double eval_loss(ast_ctx *c, gc_forward f, ast_tensor *const *in, void *ud)
{
    ast_ctx_reset(c);
    ast_rng_seed(ast_ctx_rng(c), 1234); /* same dropout masks every call */
    return project(c, f(c, in, ud));
}

/* The analytic gradients: the tape's, from dL/dy = r. */
static void analytic(ast_ctx *c, gc_forward f, ast_tensor *const *in, int n_in, void *ud)
{
    const ast_backend *b = ast_ctx_backend(c);
    for (int k = 0; k < n_in; k++) b->zero(b, in[k]->grad, (size_t)in[k]->size * sizeof(float));
    ast_ctx_reset(c);
    ast_rng_seed(ast_ctx_rng(c), 1234);
    ast_tensor *y = f(c, in, ud);
    float *seed = ast_alloc(c, (size_t)y->size * sizeof(float));
    for (int64_t i = 0; i < y->size; i++) seed[i] = proj(i);
    ast_backward_seed(c, y, seed);
}

/* in[k]'s data or gradient on the host. */
static float *host_copy(ast_ctx *c, const ast_tensor *t, int grad)
{
    ast_tensor view = *t;
    if (grad) view.data = t->grad;
    float *v = ast_xmalloc((size_t)(t->size > 0 ? t->size : 1) * sizeof *v);
    ast_tensor_read(c, &view, 0, t->size, v);
    return v;
}

/* Element i of x set to v, on whichever backend holds it. */
static void poke(ast_ctx *c, ast_tensor *x, int64_t i, float v) { ast_tensor_write(c, x, i, 1, &v); }

gc_result gc_check(gc_forward f, ast_tensor *const *in, int n_in, void *ud, float h, double floor)
{
    return gc_check_on(ast_backend_cpu(), f, in, n_in, ud, h, floor);
}

gc_result gc_check_on(const ast_backend *b, gc_forward f, ast_tensor *const *in, int n_in, void *ud, float h,
                      double floor)
{
    gc_result res = {0};
    ast_ctx *c = ast_ctx_new_on(b, 0);
    analytic(c, f, in, n_in, ud);
    ast_ctx_set_grad(c, 0);
    for (int k = 0; k < n_in; k++) {
        float *data = host_copy(c, in[k], 0), *grad = host_copy(c, in[k], 1);
        for (int64_t i = 0; i < in[k]->size; i++) {
            poke(c, in[k], i, data[i] + h);
            double lp = eval_loss(c, f, in, ud);
            poke(c, in[k], i, data[i] - h);
            double lm = eval_loss(c, f, in, ud);
            poke(c, in[k], i, data[i]);
            double num = (lp - lm) / (2.0 * h), ana = grad[i];
            double den = fmax(fmax(fabs(num), fabs(ana)), floor);
            double err = fabs(num - ana) / den;
            if (err > res.max_err || (k == 0 && i == 0)) {
                res.max_err = err;
                res.worst_input = k;
                res.worst_index = i;
                res.analytic = ana;
                res.numeric = num;
            }
        }
        free(data);
        free(grad);
    }
    ast_ctx_free(c);
    return res;
}
