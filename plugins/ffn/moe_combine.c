/* The combine of the sparse dispatch as one tape node per expert: the
 * expert's output rows, weighted by the router, are added straight into
 * the layer's [tokens, E] output. Every expert's node adds into the same
 * output tensor, so the cost is one pass over the expert's own rows, not
 * over a [tokens, E] buffer per expert (what a scatter into zeros followed
 * by a sum costs, forward and backward). Sharing the output is sound
 * because the combine is linear in it: each node's backward reads only
 * its rows of dL/dout, which is complete once every consumer of the
 * output has run, i.e. before any of these nodes in reverse tape order. */
#include "moe.h"

typedef struct combine_saved {
    const ast_host *h;
    const int32_t *token;  /* [rows of y] */
    const int32_t *weight; /* [rows of y] */
} combine_saved;

static void add_row(float *dst, const float *src, float scale, int64_t d)
{
    for (int64_t k = 0; k < d; k++) dst[k] += scale * src[k];
}

static float dot(const float *a, const float *b, int64_t d)
{
    float s = 0.0f;
    for (int64_t k = 0; k < d; k++) s += a[k] * b[k];
    return s;
}

/* out[token[i]] += w[weight[i]] y[i]:  dy[i] += w[weight[i]] dout[token[i]],
 * dw[weight[i]] += <dout[token[i]], y[i]>. */
static void combine_backward(ast_ctx *c, const ast_node *n)
{
    const combine_saved *s = n->saved;
    ast_tensor *y = n->in[0], *w = n->in[1];
    float *gy = s->h->grad(c, y), *gw = s->h->grad(c, w);
    int64_t d = y->shape[1];
    for (int64_t i = 0; i < y->shape[0]; i++) {
        const float *dout = n->out->grad + s->token[i] * d;
        if (gy) add_row(gy + i * d, dout, w->data[s->weight[i]], d);
        if (gw) gw[s->weight[i]] += dot(dout, y->data + i * d, d);
    }
}

/* A bad row is a broken routing (a programming error): stop before the
 * backward would write outside the gradients. */
static void check_rows(const ast_host *h, const ast_tensor *out, const ast_tensor *y, const ast_tensor *weights,
                       const int32_t *token, const int32_t *weight)
{
    MOE_REQUIRE(h, out->ndim == 2 && y->ndim == 2 && y->shape[1] == out->shape[1],
                "combine: expert output [%lld, %lld] into [%lld, %lld]", (long long)y->shape[0],
                (long long)y->shape[1], (long long)out->shape[0], (long long)out->shape[1]);
    for (int64_t i = 0; i < y->shape[0]; i++)
        MOE_REQUIRE(h, token[i] >= 0 && token[i] < out->shape[0] && weight[i] >= 0 && weight[i] < weights->size,
                    "combine: row %lld routes token %d with weight %d", (long long)i, token[i], weight[i]);
}

void moe_combine(const ast_host *h, ast_ctx *c, ast_tensor *out, ast_tensor *y, ast_tensor *weights,
                 const int32_t *token, const int32_t *weight)
{
    check_rows(h, out, y, weights, token, weight);
    int64_t d = out->shape[1];
    for (int64_t i = 0; i < y->shape[0]; i++)
        add_row(out->data + token[i] * d, y->data + i * d, weights->data[weight[i]], d);
    combine_saved *s = h->alloc(c, sizeof *s);
    *s = (combine_saved){h, token, weight};
    h->record(c, &(ast_node){.op = "moe_combine", .backward = combine_backward, .out = out, .in = {y, weights},
                             .n_in = 2, .saved = s});
}
