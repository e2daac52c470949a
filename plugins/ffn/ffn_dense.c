/* The reference feed-forward block (docs/model.md §2.3 step 4):
 * f = Lin_e2(Dropout(GELU(Lin_e1(x)))), Lin_e1 = Linear(E, F), Lin_e2 = Linear(F, E).
 * Parameter names are the reference's, relative to the layer scope. */
#include <math.h>
#include <stdlib.h>

#include "alphast/plugin.h"

typedef struct dense_ffn {
    const ast_host *h;
    ast_tensor *w1, *b1, *w2, *b2;
    float dropout;
} dense_ffn;

/* PyTorch's default Linear(in, out) init: weight and bias U(+-1/sqrt(in)). */
static void linear_params(const ast_host *h, ast_scope *s, const char *wname, const char *bname,
                          int in, int out, ast_tensor **w, ast_tensor **b)
{
    float a = 1.0f / sqrtf((float)in);
    *w = h->param(s, wname, 2, (int64_t[]){out, in}, AST_INIT_UNIFORM, a);
    *b = h->param(s, bname, 1, (int64_t[]){out}, AST_INIT_UNIFORM, a);
}

static void *dense_create(const ast_create_args *a, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    dense_ffn *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    const ast_layer_dims *d = a->dims;
    f->h = a->host;
    f->dropout = d->dropout;
    linear_params(f->h, a->scope, "lin_expression_features_1.weight", "lin_expression_features_1.bias",
                  d->d_model, d->d_ff, &f->w1, &f->b1);
    linear_params(f->h, a->scope, "lin_expression_features_2.weight", "lin_expression_features_2.bias",
                  d->d_ff, d->d_model, &f->w2, &f->b2);
    return f;
}

static void dense_destroy(void *self) { free(self); }

static ast_tensor *dense_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *args)
{
    (void)args;
    dense_ffn *f = self;
    const ast_host *h = f->h;
    ast_tensor *hid = h->ops->gelu(c, h->ops->linear(c, x, f->w1, f->b1));
    return h->ops->linear(c, h->ops->dropout(c, hid, f->dropout), f->w2, f->b2);
}

static const ast_plugin_desc dense_desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_FFN, "dense", "1.0", "GELU feed-forward E -> F -> E (the reference FFN)"),
    .options = NULL,
    .n_options = 0,
    .create = dense_create,
    .destroy = dense_destroy,
    .forward = dense_forward,
};

AST_PLUGIN_DEFINE(dense_desc)
