/* The CPU kernels of the shape ops (ops/dispatch_shape.c): reshape's
 * backward, the permutations' strided copy, concat and slice on the last
 * axis, each on the thread pool by rows. */
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
 * (a permutation reaches every element once, so the pool's rows of dst
 * touch disjoint elements of src). */
enum { PERM_FORWARD, PERM_BACKWARD_ADD, PERM_BACKWARD_ASSIGN };

typedef struct perm_args {
    const ast_perm_plan *p;
    float *src, *dst;
    int mode;
} perm_args;

/* Rows [lo, hi) of dst, a row being its last axis (i0, i1, i2 fixed). */
static void permute_range(void *arg, int64_t lo, int64_t hi)
{
    const perm_args *a = arg;
    const int64_t *d = a->p->dim, *s = a->p->stride;
    for (int64_t r = lo; r < hi; r++) {
        int64_t i2 = r % d[2], i1 = r / d[2] % d[1], i0 = r / d[2] / d[1];
        float *row = a->src + i0 * s[0] + i1 * s[1] + i2 * s[2], *out = a->dst + r * d[3];
        if (a->mode == PERM_BACKWARD_ADD)
            for (int64_t i3 = 0; i3 < d[3]; i3++) row[i3 * s[3]] += out[i3];
        else if (a->mode == PERM_BACKWARD_ASSIGN)
            for (int64_t i3 = 0; i3 < d[3]; i3++) row[i3 * s[3]] = out[i3];
        else
            for (int64_t i3 = 0; i3 < d[3]; i3++) out[i3] = row[i3 * s[3]];
    }
}

static void permute_walk(const ast_perm_plan *p, float *src, float *dst, int mode)
{
    const int64_t *d = p->dim;
    ast_parallel_for(d[0] * d[1] * d[2], ast_row_grain(d[3]), permute_range, &(perm_args){p, src, dst, mode});
}

static void permute_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    if (gx) permute_walk(n->saved, gx, n->out->grad, g->assign[0] ? PERM_BACKWARD_ASSIGN : PERM_BACKWARD_ADD);
}

static void permute_forward(ast_ctx *c, ast_node *n) { permute_walk(n->saved, n->in[0]->data, n->out->data, PERM_FORWARD); }

/* A block of `cols` columns between two row-major matrices, on the pool
 * by rows: dst[r, :cols] = (or, add: +=) src[r, :cols]; dst and src start
 * at the block and step by their own row widths. */
typedef struct block_args {
    float *dst;
    const float *src;
    int64_t dst_width, src_width, cols;
    int add;
} block_args;

static void block_range(void *arg, int64_t lo, int64_t hi)
{
    const block_args *a = arg;
    for (int64_t r = lo; r < hi; r++) {
        float *d = a->dst + r * a->dst_width;
        const float *src = a->src + r * a->src_width;
        if (a->add)
            add_into(d, src, a->cols);
        else
            memcpy(d, src, (size_t)a->cols * sizeof(float));
    }
}

static void move_block(float *dst, int64_t dst_width, const float *src, int64_t src_width, int64_t rows, int64_t cols,
                       int add)
{
    ast_parallel_for(rows, ast_row_grain(cols), block_range, &(block_args){dst, src, dst_width, src_width, cols, add});
}

static void concat_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *gs)
{
    int64_t rows = ast_rows(n->out), width = ast_cols(n->out), off = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t cols = ast_cols(n->in[k]);
        if (gs->g[k]) move_block(gs->g[k], cols, n->out->grad + off, width, rows, cols, 1);
        off += cols;
    }
}

static void concat_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *y = n->out;
    int64_t rows = ast_rows(y), width = ast_cols(y), off = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t cols = ast_cols(n->in[k]);
        move_block(y->data + off, width, n->in[k]->data, cols, rows, cols, 0);
        off += cols;
    }
}

static void slice_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    int64_t len = ast_cols(n->out), width = ast_cols(n->in[0]);
    if (g->g[0]) move_block(g->g[0] + n->iarg[0], width, n->out->grad, len, ast_rows(n->in[0]), len, 1);
}

/* iarg[0] = start. */
static void slice_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0];
    int64_t width = ast_cols(x), len = ast_cols(n->out);
    move_block(n->out->data, len, x->data + n->iarg[0], width, ast_rows(x), len, 0);
}

void ast_cpu_shape_kernels(ast_op_kernel *t)
{
    t[AST_OP_reshape] = (ast_op_kernel){.backward = reshape_backward, .assigns = 1};
    t[AST_OP_permute] = t[AST_OP_split_heads] = t[AST_OP_merge_heads] =
        (ast_op_kernel){.forward = permute_forward, .backward = permute_backward, .assigns = 1};
    t[AST_OP_concat] = (ast_op_kernel){.forward = concat_forward, .backward = concat_backward};
    t[AST_OP_slice] = (ast_op_kernel){.forward = slice_forward, .backward = slice_backward};
}
