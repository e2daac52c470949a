/* One expert, Expert(x) = w2(Dropout(ReLU(w1(x)))) (docs/model.md §2.7), used both
 * for the routed experts and for the always-on shared ones. */
#include <stdio.h>

#include "moe.h"

/* Registers <prefix>.<j>.w1.{weight,bias} [hidden, E] and w2 [E, hidden], in that order. */
void moe_expert_init(ast_scope *s, const char *prefix, int j, int d_model, int hidden, moe_expert *e)
{
    char base[224];
    snprintf(base, sizeof base, "%s.%d.w1", prefix, j);
    e->w1 = ast_linear_params(s, base, d_model, hidden, 1);
    snprintf(base, sizeof base, "%s.%d.w2", prefix, j);
    e->w2 = ast_linear_params(s, base, hidden, d_model, 1);
}

ast_tensor *moe_expert_forward(const moe *m, ast_ctx *c, const moe_expert *e, ast_tensor *x)
{
    ast_tensor *hid = ast_relu(c, ast_linear(c, x, e->w1.weight, e->w1.bias));
    return ast_linear(c, ast_dropout(c, hid, m->dropout), e->w2.weight, e->w2.bias);
}

int64_t moe_expert_numel(const moe_expert *e)
{
    return e->w1.weight->size + e->w1.bias->size + e->w2.weight->size + e->w2.bias->size;
}
