/* Sparse row routing for mixture-of-experts: gather the tokens an expert
 * receives, then scatter its outputs back, weighted by the router. The
 * index arrays are the caller's arena memory and are read again by the
 * backward, never copied. */
#include <string.h>

#include "engine/engine.h"

static void check_indices(const int32_t *idx, int64_t n, int64_t rows, const char *op)
{
    for (int64_t i = 0; i < n; i++)
        AST_ASSERT(idx[i] >= 0 && idx[i] < rows, "%s: index %d at %lld outside [0, %lld)", op, idx[i], (long long)i,
                   (long long)rows);
}

static void add_row(float *dst, const float *src, float scale, int64_t d)
{
    for (int64_t k = 0; k < d; k++) dst[k] += scale * src[k];
}

/* saved: idx; iarg[0] = n. */
static void gather_backward(ast_ctx *c, const ast_node *n)
{
    float *gx = ast_grad(c, n->in[0]);
    const int32_t *idx = n->saved;
    int64_t d = ast_cols(n->in[0]);
    for (int64_t i = 0; i < n->iarg[0]; i++) add_row(gx + idx[i] * d, n->out->grad + i * d, 1.0f, d);
}

typedef struct gather_args {
    const float *x;
    float *y;
    const int32_t *idx;
    int64_t d;
} gather_args;

static void gather_range(void *arg, int64_t lo, int64_t hi)
{
    const gather_args *a = arg;
    for (int64_t i = lo; i < hi; i++) memcpy(a->y + i * a->d, a->x + a->idx[i] * a->d, (size_t)a->d * sizeof(float));
}

ast_tensor *ast_cpu_gather_rows(ast_ctx *c, ast_tensor *x, const int32_t *idx, int64_t n)
{
    int64_t d = ast_cols(x);
    check_indices(idx, n, ast_rows(x), "gather_rows");
    ast_tensor *y = ast_empty(c, 2, (int64_t[]){n, d});
    /* each output row is its own: rows split over the pool (the backward,
     * which may add several rows into one, stays serial) */
    ast_parallel_for(n, ast_row_grain(d), gather_range,
                     &(gather_args){x->data, y->data, idx, d});
    ast_record(c, &(ast_node){.op = "gather_rows", .backward = gather_backward, .out = y, .in = {x}, .n_in = 1,
                              .saved = (void *)idx, .iarg = {n}});
    return y;
}

static float dot(const float *a, const float *b, int64_t d)
{
    float s = 0.0f;
    for (int64_t k = 0; k < d; k++) s += a[k] * b[k];
    return s;
}

/* out[idx[i]] += w[i] src[i]:  dsrc[i] += w[i] dout[idx[i]],
 * dw[i] += <dout[idx[i]], src[i]>. saved: idx. */
static void scatter_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *src = n->in[0], *w = n->in[1];
    float *gs = ast_grad(c, src), *gw = ast_grad(c, w);
    const int32_t *idx = n->saved;
    int64_t d = ast_cols(src);
    for (int64_t i = 0; i < ast_rows(src); i++) {
        const float *dout = n->out->grad + idx[i] * d;
        if (gs) add_row(gs + i * d, dout, w ? w->data[i] : 1.0f, d);
        if (gw) gw[i] += dot(dout, src->data + i * d, d);
    }
}

ast_tensor *ast_cpu_scatter_add_rows(ast_ctx *c, ast_tensor *src, const int32_t *idx, ast_tensor *w, int64_t rows)
{
    char s[64];
    int64_t n = ast_rows(src), d = ast_cols(src);
    AST_ASSERT(!w || w->size == n, "scatter_add_rows: weights %s for %lld source rows",
               w ? ast_shape_str(w, s, sizeof s) : "", (long long)n);
    check_indices(idx, n, rows, "scatter_add_rows");
    ast_tensor *y = ast_zeros(c, 2, (int64_t[]){rows, d});
    for (int64_t i = 0; i < n; i++) add_row(y->data + idx[i] * d, src->data + i * d, w ? w->data[i] : 1.0f, d);
    ast_record(c, &(ast_node){.op = "scatter_add_rows", .backward = scatter_backward, .out = y, .in = {src, w},
                              .n_in = 2, .saved = (void *)idx});
    return y;
}
