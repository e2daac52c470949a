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
    const int32_t *token;  /* [rows of y] */
    const int32_t *weight; /* [rows of y] */
    int split;             /* no token and no weight twice: rows may run on different threads */
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

typedef struct combine_args {
    const combine_saved *s;
    const float *y, *w, *dout;
    float *out, *gy, *gw;
    int64_t d;
} combine_args;

/* out[token[i]] += w[weight[i]] y[i]:  dy[i] += w[weight[i]] dout[token[i]],
 * dw[weight[i]] += <dout[token[i]], y[i]>. Rows run on the host's threads
 * when no two share a token or a weight (so no output either), which top-k
 * routing guarantees: a token picks an expert at most once. */
static void combine_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const combine_args *a = arg;
    for (int64_t i = lo; i < hi; i++) {
        const float *dout = a->dout + a->s->token[i] * a->d;
        if (a->gy) add_row(a->gy + i * a->d, dout, a->w[a->s->weight[i]], a->d);
        if (a->gw) a->gw[a->s->weight[i]] += dot(dout, a->y + i * a->d, a->d);
    }
}

/* Rows per thread-pool range: about 16k elements; all of them when rows
 * may share an output. */
static int64_t row_grain(const combine_saved *s, int64_t rows, int64_t d)
{
    if (!s->split) return rows + 1;
    return d >= 16384 ? 1 : 16384 / (d ? d : 1);
}

static void combine_backward(ast_ctx *c, const ast_node *n)
{
    const combine_saved *s = n->saved;
    ast_tensor *y = n->in[0], *w = n->in[1];
    combine_args a = {s, y->data, w->data, n->out->grad, NULL, ast_grad(c, y), ast_grad(c, w), y->shape[1]};
    ast_parallel_for(y->shape[0], row_grain(s, y->shape[0], a.d), combine_backward_range, &a);
}

static void combine_range(void *arg, int64_t lo, int64_t hi)
{
    const combine_args *a = arg;
    for (int64_t i = lo; i < hi; i++)
        add_row(a->out + a->s->token[i] * a->d, a->y + i * a->d, a->w[a->s->weight[i]], a->d);
}

/* A bad row is a broken routing (a programming error): stop before the
 * backward would write outside the gradients. Returns whether every token
 * and every weight appears at most once. */
static int check_rows(ast_ctx *c, const ast_tensor *out, const ast_tensor *y, const ast_tensor *weights,
                      const int32_t *token, const int32_t *weight)
{
    MOE_REQUIRE(out->ndim == 2 && y->ndim == 2 && y->shape[1] == out->shape[1],
                "combine: expert output [%lld, %lld] into [%lld, %lld]", (long long)y->shape[0],
                (long long)y->shape[1], (long long)out->shape[0], (long long)out->shape[1]);
    unsigned char *seen_token = ast_alloc(c, (size_t)out->shape[0]), *seen_weight = ast_alloc(c, (size_t)weights->size);
    int distinct = 1;
    for (int64_t i = 0; i < y->shape[0]; i++) {
        MOE_REQUIRE(token[i] >= 0 && token[i] < out->shape[0] && weight[i] >= 0 && weight[i] < weights->size,
                    "combine: row %lld routes token %d with weight %d", (long long)i, token[i], weight[i]);
        distinct &= !seen_token[token[i]]++ & !seen_weight[weight[i]]++;
    }
    return distinct;
}

void moe_combine(ast_ctx *c, ast_tensor *out, ast_tensor *y, ast_tensor *weights, const int32_t *token,
                 const int32_t *weight)
{
    combine_saved *s = ast_alloc(c, sizeof *s);
    *s = (combine_saved){token, weight, check_rows(c, out, y, weights, token, weight)};
    combine_args a = {.s = s, .y = y->data, .w = weights->data, .out = out->data, .d = out->shape[1]};
    ast_parallel_for(y->shape[0], row_grain(s, y->shape[0], a.d), combine_range, &a);
    ast_record(c, &(ast_node){.op = "moe_combine", .backward = combine_backward, .out = out, .in = {y, weights},
                             .n_in = 2, .saved = s});
}
