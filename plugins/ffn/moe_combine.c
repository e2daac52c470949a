/* The combine of the sparse dispatch as one tape node, the CPU kernel of
 * "moe_combine": the experts' output rows, weighted by the router, are
 * added straight into the layer's [tokens, E] output, so the cost is one
 * pass over the assignments' rows, the tokens split over the host's
 * threads, with no [rows, 1] copy of the routing weights (what the same
 * from ops, moe_combine_ops.c, costs). */
#include "moe.h"

typedef struct combine_saved {
    const int32_t *token;  /* [rows of y] */
    const int32_t *weight; /* [rows of y] */
    int split;             /* no weight row twice: the backward's rows may run on different threads */
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
    const int64_t *first; /* forward: token t's rows are rows[first[t] .. first[t + 1]) */
    const int32_t *rows;
} combine_args;

/* out[token[i]] += w[weight[i]] y[i]:  dy[i] += w[weight[i]] dout[token[i]],
 * dw[weight[i]] += <dout[token[i]], y[i]>. Each row writes its own dy row;
 * rows run on the host's threads when no two share a weight row, which
 * both routers guarantee (a weight belongs to one (token, expert) pair). */
static void combine_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const combine_args *a = arg;
    for (int64_t i = lo; i < hi; i++) {
        const float *dout = a->dout + a->s->token[i] * a->d;
        if (a->gy) add_row(a->gy + i * a->d, dout, a->w[a->s->weight[i]], a->d);
        if (a->gw) a->gw[a->s->weight[i]] += dot(dout, a->y + i * a->d, a->d);
    }
}

/* Items (rows or tokens of d elements) per thread-pool range: about 16k elements. */
static int64_t item_grain(int64_t d) { return d >= 16384 ? 1 : 16384 / (d ? d : 1); }

static void combine_backward(ast_ctx *c, const ast_node *n)
{
    const combine_saved *s = n->saved;
    ast_tensor *y = n->in[0], *w = n->in[1];
    combine_args a = {.s = s, .y = y->data, .w = w->data, .dout = n->out->grad, .gy = ast_grad(c, y),
                      .gw = ast_grad(c, w), .d = y->shape[1]};
    int64_t rows = y->shape[0];
    ast_parallel_for(rows, s->split ? item_grain(a.d) : rows + 1, combine_backward_range, &a);
}

/* Each token's output row gets its rows' contributions in row order (the
 * order of one loop over the rows), from one thread. */
static void combine_range(void *arg, int64_t lo, int64_t hi)
{
    const combine_args *a = arg;
    for (int64_t t = lo; t < hi; t++)
        for (int64_t q = a->first[t]; q < a->first[t + 1]; q++) {
            int32_t i = a->rows[q];
            add_row(a->out + t * a->d, a->y + i * a->d, a->w[a->s->weight[i]], a->d);
        }
}

/* A bad row is a broken routing (a programming error): stop before the
 * backward would write outside the gradients. Returns whether every weight
 * row appears at most once. */
static int check_rows(ast_ctx *c, int64_t tokens, const ast_tensor *y, const ast_tensor *weights,
                      const int32_t *token, const int32_t *weight)
{
    MOE_REQUIRE(y->ndim == 2, "combine: expert output of %d dims, expected [rows, E]", y->ndim);
    unsigned char *seen_weight = ast_alloc(c, (size_t)weights->size);
    int distinct = 1;
    for (int64_t i = 0; i < y->shape[0]; i++) {
        MOE_REQUIRE(token[i] >= 0 && token[i] < tokens && weight[i] >= 0 && weight[i] < weights->size,
                    "combine: row %lld routes token %d with weight %d", (long long)i, token[i], weight[i]);
        distinct &= !seen_weight[weight[i]]++;
    }
    return distinct;
}

/* The rows of y grouped by token, each token's in row order (a counting
 * sort): a->first [tokens + 1] and a->rows [rows]. */
static void rows_by_token(ast_ctx *c, int64_t tokens, const int32_t *token, int64_t rows, combine_args *a)
{
    int64_t *first = ast_alloc(c, (size_t)(tokens + 1) * sizeof *first);
    int64_t *next = ast_alloc_uninit(c, (size_t)tokens * sizeof *next);
    int32_t *by_token = ast_alloc_uninit(c, (size_t)(rows ? rows : 1) * sizeof *by_token);
    for (int64_t i = 0; i < rows; i++) first[token[i] + 1]++;
    for (int64_t t = 0; t < tokens; t++) first[t + 1] += first[t];
    memcpy(next, first, (size_t)tokens * sizeof *next);
    for (int64_t i = 0; i < rows; i++) by_token[next[token[i]]++] = (int32_t)i;
    a->first = first;
    a->rows = by_token;
}

ast_tensor *moe_combine(ast_ctx *c, int64_t tokens, ast_tensor *y, ast_tensor *weights, const int32_t *token,
                        const int32_t *weight)
{
    combine_saved *s = ast_alloc(c, sizeof *s);
    *s = (combine_saved){token, weight, check_rows(c, tokens, y, weights, token, weight)};
    ast_tensor *out = ast_zeros(c, 2, (int64_t[]){tokens, y->shape[1]});
    combine_args a = {.s = s, .y = y->data, .w = weights->data, .out = out->data, .d = out->shape[1]};
    rows_by_token(c, tokens, token, y->shape[0], &a);
    ast_parallel_for(tokens, item_grain(a.d), combine_range, &a);
    ast_record(c, &(ast_node){.op = "moe_combine", .backward = combine_backward, .out = out, .in = {y, weights},
                             .n_in = 2, .saved = s});
    return out;
}
