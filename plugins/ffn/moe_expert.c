/* One expert, Expert(x) = w2(Dropout(ReLU(w1(x)))) (docs/model.md §2.7), used both
 * for the routed experts and for the always-on shared ones. */
#include <math.h>
#include <stdio.h>

#include "moe.h"

/* PyTorch's default Linear(in, out): weight and bias U(+-1/sqrt(in)). */
static void linear_params(const ast_host *h, ast_scope *s, const char *base, int in, int out, ast_tensor **w,
                          ast_tensor **b)
{
    char name[256];
    float a = 1.0f / sqrtf((float)in);
    snprintf(name, sizeof name, "%s.weight", base);
    *w = h->param(s, name, 2, (int64_t[]){out, in}, AST_INIT_UNIFORM, a);
    snprintf(name, sizeof name, "%s.bias", base);
    *b = h->param(s, name, 1, (int64_t[]){out}, AST_INIT_UNIFORM, a);
}

/* Registers <prefix>.<j>.w1.{weight,bias} [hidden, E] and w2 [E, hidden], in that order. */
void moe_expert_init(const ast_host *h, ast_scope *s, const char *prefix, int j, int d_model, int hidden,
                     moe_expert *e)
{
    char base[224];
    snprintf(base, sizeof base, "%s.%d.w1", prefix, j);
    linear_params(h, s, base, d_model, hidden, &e->w1, &e->b1);
    snprintf(base, sizeof base, "%s.%d.w2", prefix, j);
    linear_params(h, s, base, hidden, d_model, &e->w2, &e->b2);
}

ast_tensor *moe_expert_forward(const moe *m, ast_ctx *c, const moe_expert *e, ast_tensor *x)
{
    const ast_host *h = m->h;
    ast_tensor *hid = h->ops->relu(c, h->ops->linear(c, x, e->w1, e->b1));
    return h->ops->linear(c, h->ops->dropout(c, hid, m->dropout), e->w2, e->b2);
}

int64_t moe_expert_numel(const moe_expert *e) { return e->w1->size + e->b1->size + e->w2->size + e->b2->size; }
