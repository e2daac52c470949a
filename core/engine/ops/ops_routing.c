/* The CPU kernels of sparse row routing (ops/dispatch_routing.c). */
#include <string.h>

#include "engine/backend.h"

static void add_row(float *dst, const float *src, float scale, int64_t d)
{
    for (int64_t k = 0; k < d; k++) dst[k] += scale * src[k];
}

/* saved: idx; iarg[0] = n. */
static void gather_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
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

static void gather_forward(ast_ctx *c, ast_node *n)
{
    int64_t d = ast_cols(n->in[0]);
    /* each output row is its own: rows split over the pool (the backward,
     * which may add several rows into one, stays serial) */
    ast_parallel_for(n->iarg[0], ast_row_grain(d), gather_range,
                     &(gather_args){n->in[0]->data, n->out->data, n->saved, d});
}

static float dot(const float *a, const float *b, int64_t d)
{
    float s = 0.0f;
    for (int64_t k = 0; k < d; k++) s += a[k] * b[k];
    return s;
}

/* out[idx[i]] += w[i] src[i]:  dsrc[i] += w[i] dout[idx[i]],
 * dw[i] += <dout[idx[i]], src[i]>. saved: idx. */
static void scatter_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *src = n->in[0], *w = n->in[1];
    float *gs = g->g[0], *gw = g->g[1];
    const int32_t *idx = n->saved;
    int64_t d = ast_cols(src);
    for (int64_t i = 0; i < ast_rows(src); i++) {
        const float *dout = n->out->grad + idx[i] * d;
        if (gs) add_row(gs + i * d, dout, w ? w->data[i] : 1.0f, d);
        if (gw) gw[i] += dot(dout, src->data + i * d, d);
    }
}

static void scatter_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *src = n->in[0], *w = n->in[1], *y = n->out;
    const int32_t *idx = n->saved;
    int64_t d = ast_cols(src);
    memset(y->data, 0, (size_t)y->size * sizeof *y->data);
    for (int64_t i = 0; i < ast_rows(src); i++) add_row(y->data + idx[i] * d, src->data + i * d, w ? w->data[i] : 1.0f, d);
}

void ast_cpu_routing_kernels(ast_op_kernel *t)
{
    t[AST_OP_gather_rows] = (ast_op_kernel){.forward = gather_forward, .backward = gather_backward};
    t[AST_OP_scatter_add_rows] = (ast_op_kernel){.forward = scatter_forward, .backward = scatter_backward};
}
