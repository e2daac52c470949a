/* Shape ops: reshape (a view), permutations (permute, split_heads,
 * merge_heads share one strided copy), concat and slice on the last axis.
 * Each backward adds into the input grads. */
#include <string.h>

#include "engine/engine.h"
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

static void reshape_backward(ast_ctx *c, const ast_node *n)
{
    int fresh;
    float *gx = ast_grad_fresh(c, n->in[0], &fresh);
    if (gx) ast_parallel_for(n->out->size, AST_PAR_GRAIN, copy_range, &(copy_args){gx, n->out->grad, !fresh});
}

/* The output shares x->data, so a reshape costs no copy; it gets its own
 * grad buffer because the tape accumulates per tensor. */
ast_tensor *ast_cpu_reshape(ast_ctx *c, ast_tensor *x, int ndim, const int64_t *shape)
{
    ast_check_reshape(x, ndim, shape);
    ast_tensor *y = ast_alloc(c, sizeof *y);
    y->ndim = ndim;
    memcpy(y->shape, shape, (size_t)ndim * sizeof *shape);
    y->size = x->size;
    y->data = x->data;
    ast_record(c, &(ast_node){.op = "reshape", .backward = reshape_backward, .out = y, .in = {x}, .n_in = 1});
    return y;
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

static void permute_backward(ast_ctx *c, const ast_node *n)
{
    int fresh;
    float *gx = ast_grad_fresh(c, n->in[0], &fresh);
    if (gx) permute_walk(n->saved, gx, n->out->grad, fresh ? PERM_BACKWARD_ASSIGN : PERM_BACKWARD_ADD);
}

static ast_tensor *permuted_copy(ast_ctx *c, const char *op, ast_tensor *x, int view_ndim, const int64_t *view,
                                 const int *perm, int out_ndim, const int64_t *out_shape)
{
    ast_perm_plan *p = ast_plan_permute(c, view_ndim, view, perm);
    ast_tensor *y = ast_empty(c, out_ndim, out_shape);
    permute_walk(p, x->data, y->data, PERM_FORWARD);
    ast_record(c, &(ast_node){.op = op, .backward = permute_backward, .out = y, .in = {x}, .n_in = 1, .saved = p});
    return y;
}

ast_tensor *ast_cpu_permute(ast_ctx *c, ast_tensor *x, const int *perm)
{
    int64_t shape[AST_MAX_DIMS];
    ast_permuted_shape(x, perm, shape);
    return permuted_copy(c, "permute", x, x->ndim, x->shape, perm, x->ndim, shape);
}

static const int SWAP_HEADS_AND_TOKENS[4] = {0, 2, 1, 3};

/* x [B,N,H*dh] seen as [B,N,H,dh], then tokens and heads swapped. */
ast_tensor *ast_cpu_split_heads(ast_ctx *c, ast_tensor *x, int heads)
{
    char s1[64];
    AST_ASSERT(x->ndim == 3 && heads > 0 && x->shape[2] % heads == 0, "split_heads: %s into %d heads",
               ast_shape_str(x, s1, sizeof s1), heads);
    int64_t b = x->shape[0], n = x->shape[1], dh = x->shape[2] / heads;
    return permuted_copy(c, "split_heads", x, 4, (int64_t[]){b, n, heads, dh}, SWAP_HEADS_AND_TOKENS, 4,
                         (int64_t[]){b, heads, n, dh});
}

/* x [B,H,N,dh] to [B,N,H,dh], stored as [B,N,H*dh] (head-major features). */
ast_tensor *ast_cpu_merge_heads(ast_ctx *c, ast_tensor *x)
{
    char s1[64];
    AST_ASSERT(x->ndim == 4, "merge_heads: %s is not [B,H,N,dh]", ast_shape_str(x, s1, sizeof s1));
    const int64_t *s = x->shape;
    return permuted_copy(c, "merge_heads", x, 4, s, SWAP_HEADS_AND_TOKENS, 3, (int64_t[]){s[0], s[2], s[1] * s[3]});
}

static void concat_backward(ast_ctx *c, const ast_node *n)
{
    int64_t rows = ast_rows(n->out), width = ast_cols(n->out), off = 0;
    for (int k = 0; k < n->n_in; k++) {
        int64_t cols = ast_cols(n->in[k]);
        float *g = ast_grad(c, n->in[k]);
        for (int64_t r = 0; g && r < rows; r++) add_into(g + r * cols, n->out->grad + r * width + off, cols);
        off += cols;
    }
}

ast_tensor *ast_cpu_concat(ast_ctx *c, ast_tensor *const *xs, int n)
{
    int64_t shape[AST_MAX_DIMS], width = ast_concat_shape(xs, n, shape);
    ast_tensor *y = ast_empty(c, xs[0]->ndim, shape);
    ast_node node = {.op = "concat", .backward = concat_backward, .out = y, .n_in = n};
    int64_t rows = ast_rows(y), off = 0;
    for (int k = 0; k < n; k++) {
        int64_t cols = ast_cols(xs[k]);
        for (int64_t r = 0; r < rows; r++)
            memcpy(y->data + r * width + off, xs[k]->data + r * cols, (size_t)cols * sizeof(float));
        off += cols;
        node.in[k] = xs[k];
    }
    ast_record(c, &node);
    return y;
}

static void slice_backward(ast_ctx *c, const ast_node *n)
{
    float *gx = ast_grad(c, n->in[0]);
    int64_t rows = ast_rows(n->in[0]), len = ast_cols(n->out), width = ast_cols(n->in[0]), start = n->iarg[0];
    for (int64_t r = 0; gx && r < rows; r++) add_into(gx + r * width + start, n->out->grad + r * len, len);
}

ast_tensor *ast_cpu_slice(ast_ctx *c, ast_tensor *x, int64_t start, int64_t len)
{
    int64_t width = ast_cols(x), shape[AST_MAX_DIMS];
    ast_slice_shape(x, start, len, shape);
    ast_tensor *y = ast_empty(c, x->ndim, shape);
    int64_t rows = ast_rows(x);
    for (int64_t r = 0; r < rows; r++)
        memcpy(y->data + r * len, x->data + r * width + start, (size_t)len * sizeof(float));
    ast_record(c, &(ast_node){.op = "slice", .backward = slice_backward, .out = y, .in = {x}, .n_in = 1,
                              .iarg = {start}});
    return y;
}
