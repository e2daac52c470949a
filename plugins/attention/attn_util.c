#include <math.h>
#include <stdio.h>

#include "attn_util.h"

void attn_linear_params(const ast_host *h, ast_scope *s, const char *name, int in, int out,
                        ast_tensor **w, ast_tensor **b)
{
    char full[256];
    float bound = 1.0f / sqrtf((float)in);
    snprintf(full, sizeof full, "%s.weight", name);
    *w = h->param(s, full, 2, (int64_t[]){out, in}, AST_INIT_UNIFORM, bound);
    if (!b) return;
    snprintf(full, sizeof full, "%s.bias", name);
    *b = h->param(s, full, 1, (int64_t[]){out}, AST_INIT_UNIFORM, bound);
}

int attn_check_dims(const ast_layer_dims *d, const char *plugin, char *err, size_t errlen)
{
    if (d->d_model > 0 && d->heads > 0 && d->d_model % d->heads == 0) return 1;
    snprintf(err, errlen,
             "attention '%s': d_model %d is not a positive multiple of num_heads %d; "
             "choose num_heads dividing d_model",
             plugin, d->d_model, d->heads);
    return 0;
}
