/* The reference feed-forward block (docs/model.md §2.3 step 4):
 * f = Lin_e2(Dropout(GELU(Lin_e1(x)))), Lin_e1 = Linear(E, F), Lin_e2 = Linear(F, E).
 * Parameter names are the reference's, relative to the layer scope. */
#include <stdlib.h>

#include "alphast/plugin_api.h"

typedef struct dense_ffn {
    ast_weights lin1, lin2;
    float dropout;
} dense_ffn;

static void *dense_create(const ast_create_args *a, char *err, size_t errlen)
{
    dense_ffn *f = calloc(1, sizeof *f);
    AST_REQUIRE(f, err, errlen, "ffn 'dense': out of memory");
    const ast_layer_dims *d = a->dims;
    f->dropout = d->dropout;
    f->lin1 = ast_linear_params(a->scope, "lin_expression_features_1", d->d_model, d->d_ff, 1);
    f->lin2 = ast_linear_params(a->scope, "lin_expression_features_2", d->d_ff, d->d_model, 1);
    return f;
}

static ast_tensor *dense_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *args)
{
    (void)args;
    const dense_ffn *f = self;
    ast_tensor *hid = ast_gelu(c, ast_linear(c, x, f->lin1.weight, f->lin1.bias));
    return ast_linear(c, ast_dropout(c, hid, f->dropout), f->lin2.weight, f->lin2.bias);
}

AST_PLUGIN(AST_KIND_FFN, "dense", "1.0", "GELU feed-forward E -> F -> E (the reference FFN)", .create = dense_create,
           .forward = dense_forward)
