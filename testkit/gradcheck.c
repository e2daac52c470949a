#include <math.h>
#include <string.h>

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

static double eval_loss(ast_ctx *c, gc_forward f, ast_tensor *const *in, void *ud)
{
    ast_ctx_reset(c);
    ast_rng_seed(ast_ctx_rng(c), 1234); /* same dropout masks every call */
    ast_tensor *y = f(c, in, ud);
    double l = 0.0;
    for (int64_t i = 0; i < y->size; i++) l += (double)proj(i) * y->data[i];
    return l;
}

gc_result gc_check(gc_forward f, ast_tensor *const *in, int n_in, void *ud, float h, double floor)
{
    gc_result res = {0};
    ast_ctx *c = ast_ctx_new(0);

    for (int k = 0; k < n_in; k++) memset(in[k]->grad, 0, (size_t)in[k]->size * sizeof(float));
    ast_ctx_reset(c);
    ast_rng_seed(ast_ctx_rng(c), 1234);
    ast_tensor *y = f(c, in, ud);
    float *seed = ast_alloc(c, (size_t)y->size * sizeof(float));
    for (int64_t i = 0; i < y->size; i++) seed[i] = proj(i);
    ast_backward_seed(c, y, seed);

    ast_ctx_set_grad(c, 0);
    for (int k = 0; k < n_in; k++) {
        for (int64_t i = 0; i < in[k]->size; i++) {
            float keep = in[k]->data[i];
            in[k]->data[i] = keep + h;
            double lp = eval_loss(c, f, in, ud);
            in[k]->data[i] = keep - h;
            double lm = eval_loss(c, f, in, ud);
            in[k]->data[i] = keep;
            double num = (lp - lm) / (2.0 * h), ana = in[k]->grad[i];
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
    }
    ast_ctx_free(c);
    return res;
}
