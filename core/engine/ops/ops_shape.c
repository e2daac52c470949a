/* The CPU kernels of the shape ops (ops/dispatch_shape.c): reshape's
 * backward, the permutations' strided copy, concat and slice on the last
 * axis. */
#include <string.h>

#include "engine/backend.h"
#include "engine/ops/ops_plan.h"

static void add_into(float *g, const float *d, int64_t n)
{
    for (int64_t i = 0; i < n; i++) g[i] += d[i];
}

typedef struct copy_args {
    float *dst;
    const float *src;
    int add; /* add into dst rather than copy */
} copy_args;

static void copy_range(void *arg, int64_t lo, int64_t hi)
{
    const copy_args *a = arg;
    if (a->add)
        add_into(a->dst + lo, a->src + lo, hi - lo);
    else
        memcpy(a->dst + lo, a->src + lo, (size_t)(hi - lo) * sizeof(float));
}

static void reshape_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    if (gx) ast_parallel_for(n->out->size, AST_PAR_GRAIN, copy_range, &(copy_args){gx, n->out->grad, !g->assign[0]});
}

/* Forward copies src into dst (dst[o] = src[at(o)]); backward adds the
 * other way (src[at(o)] += dst[o]), or copies when src is a fresh gradient
 * (a permutation reaches every element once). */
enum { PERM_FORWARD, PERM_BACKWARD_ADD, PERM_BACKWARD_ASSIGN };

static void permute_walk(const ast_perm_plan *p, float *src, float *dst, int mode)
{
    const int64_t *d = p->dim, *s = p->stride;
    int64_t o = 0;
    for (int64_t i0 = 0; i0 < d[0]; i0++)
        for (int64_t i1 = 0; i1 < d[1]; i1++)
            for (int64_t i2 = 0; i2 < d[2]; i2++) {
                float *row = src + i0 * s[0] + i1 * s[1] + i2 * s[2];
                if (mode == PERM_BACKWARD_ADD)
                    for (int64_t i3 = 0; i3 < d[3]; i3++) row[i3 * s[3]] += dst[o++];
                else if (mode == PERM_BACKWARD_ASSIGN)
                    for (int64_t i3 = 0; i3 < d[3]; i3++) row[i3 * s[3]] = dst[o++];
                else
                    for (int64_t i3 = 0; i3 < d[3]; i3++) dst[o++] = row[i3 * s[3]];
            }
}

static void permute_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    if (gx) permute_walk(n->saved, gx, n->out->grad, g->assign[0] ? PERM_BACKWARD_ASSIGN : PERM_BACKWARD_ADD);
}

static void permute_forward(ast_ctx *c, ast_node *n) { permute_walk(n->saved, n->in[0]->data, n->out->data, PERM_FORWARD); }

static void concat_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *gs)
{
    int64_t rows = ast_rows(n->out), width = ast_cols(n->out), off = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t cols = ast_cols(n->in[k]);
        float *g = gs->g[k];
        for (int64_t r = 0; g && r < rows; r++) add_into(g + r * cols, n->out->grad + r * width + off, cols);
        off += cols;
    }
}

static void concat_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *y = n->out;
    int64_t rows = ast_rows(y), width = ast_cols(y), off = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t cols = ast_cols(n->in[k]);
        for (int64_t r = 0; r < rows; r++)
            memcpy(y->data + r * width + off, n->in[k]->data + r * cols, (size_t)cols * sizeof(float));
        off += cols;
    }
}

static void slice_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    int64_t rows = ast_rows(n->in[0]), len = ast_cols(n->out), width = ast_cols(n->in[0]), start = n->iarg[0];
    for (int64_t r = 0; gx && r < rows; r++) add_into(gx + r * width + start, n->out->grad + r * len, len);
}

/* iarg[0] = start. */
static void slice_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0];
    int64_t width = ast_cols(x), len = ast_cols(n->out), start = n->iarg[0];
    for (int64_t r = 0; r < ast_rows(x); r++)
        memcpy(n->out->data + r * len, x->data + r * width + start, (size_t)len * sizeof(float));
}

void ast_cpu_shape_kernels(ast_op_kernel *t)
{
    t[AST_OP_reshape] = (ast_op_kernel){.backward = reshape_backward, .assigns = 1};
    t[AST_OP_permute] = t[AST_OP_split_heads] = t[AST_OP_merge_heads] =
        (ast_op_kernel){.forward = permute_forward, .backward = permute_backward, .assigns = 1};
    t[AST_OP_concat] = (ast_op_kernel){.forward = concat_forward, .backward = concat_backward};
    t[AST_OP_slice] = (ast_op_kernel){.forward = slice_forward, .backward = slice_backward};
}
