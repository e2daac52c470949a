/* One expert, Expert(x) = w2(Dropout(ReLU(w1(x)))) (docs/model.md §2.7), used both
 * for the routed experts and for the always-on shared ones. The routed
 * experts run together: their tokens, sorted by expert, go through one
 * grouped_linear per layer, so the cost follows the activated parameters
 * rather than the number of experts. */
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

/* Lists the routed experts' parameters by layer for grouped_linear (they
 * stay separate parameters under the reference's names); 0, or -1 out of
 * memory. */
int moe_experts_group(moe *m)
{
    int n = m->o.num_experts;
    ast_tensor **t = calloc(4 * (size_t)n, sizeof *t);
    if (!t) return -1;
    m->w1 = t, m->b1 = t + n, m->w2 = t + 2 * n, m->b2 = t + 3 * n;
    for (int j = 0; j < n; j++) {
        m->w1[j] = m->experts[j].w1.weight, m->b1[j] = m->experts[j].w1.bias;
        m->w2[j] = m->experts[j].w2.weight, m->b2[j] = m->experts[j].w2.bias;
    }
    return 0;
}

/* Every routed expert on its rows of x (sorted by expert: expert e owns
 * rows [offset[e], offset[e + 1])). The same per-row arithmetic as
 * moe_expert_forward on each expert's block; dropout draws one mask for
 * all the rows instead of one per expert. */
ast_tensor *moe_experts_forward(const moe *m, ast_ctx *c, ast_tensor *x, const int64_t *offset)
{
    int n = m->o.num_experts;
    ast_tensor *hid = ast_relu(c, ast_grouped_linear(c, x, offset, n, m->w1, m->b1));
    return ast_grouped_linear(c, ast_dropout(c, hid, m->dropout), offset, n, m->w2, m->b2);
}

int64_t moe_expert_numel(const moe_expert *e)
{
    return e->w1.weight->size + e->w1.bias->size + e->w2.weight->size + e->w2.bias->size;
}
