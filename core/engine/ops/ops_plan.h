/* ops_plan.h (core-internal): the front end that the CPU ops (ops/) and
 * the CUDA ops (cuda/) share: shape checks and the plans (batched GEMM,
 * permutation, broadcast, groups) worked out on the host before any data
 * moves, so both backends reject the same input with the same message.
 * Plain C that nvcc's C++ also compiles: static inline, casts on ast_alloc,
 * no designated initialisers or compound literals. */
#ifndef ALPHAST_OPS_PLAN_H
#define ALPHAST_OPS_PLAN_H

#include <string.h>

#include "engine/engine.h"

/* ---- linear and bmm ------------------------------------------------------ */

/* Checks x [.., in], w [out, in] and b [out] (or NULL); fills shape with
 * y's, [.., out]. */
static inline void ast_plan_linear(const ast_tensor *x, const ast_tensor *w, const ast_tensor *b, int64_t *shape)
{
    char s1[64], s2[64];
    int64_t in = ast_cols(x), out = w->shape[0];
    AST_ASSERT(w->ndim == 2 && w->shape[1] == in, "linear: x %s does not fit weight %s",
               ast_shape_str(x, s1, sizeof s1), ast_shape_str(w, s2, sizeof s2));
    AST_ASSERT(!b || (b->ndim == 1 && b->shape[0] == out), "linear: bias %s for %lld outputs",
               ast_shape_str(b, s1, sizeof s1), (long long)out);
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = out;
}

/* C = op(A) op(B) per batch, op = optional transpose of the last two axes. */
typedef struct ast_mm_shape {
    int64_t batch, m, n, k;
    int ta, tb;
} ast_mm_shape;

/* Checks a and b, fills shape with C's; the plan lives in the (host) arena
 * for the backward. */
static inline ast_mm_shape *ast_plan_bmm(ast_ctx *c, const ast_tensor *a, const ast_tensor *b, int trans_a,
                                         int trans_b, int64_t *shape)
{
    char s1[64], s2[64];
    AST_ASSERT(a->ndim >= 2 && a->ndim == b->ndim, "bmm: a %s and b %s need the same rank >= 2",
               ast_shape_str(a, s1, sizeof s1), ast_shape_str(b, s2, sizeof s2));
    int d = a->ndim;
    ast_mm_shape *s = (ast_mm_shape *)ast_alloc(c, sizeof *s);
    s->ta = trans_a != 0;
    s->tb = trans_b != 0;
    s->m = a->shape[d - 2 + s->ta];
    s->k = a->shape[d - 1 - s->ta];
    s->n = b->shape[d - 1 - s->tb];
    int64_t kb = b->shape[d - 2 + s->tb];
    s->batch = 1;
    for (int i = 0; i < d - 2; i++) {
        AST_ASSERT(a->shape[i] == b->shape[i], "bmm: batch dims of %s and %s differ",
                   ast_shape_str(a, s1, sizeof s1), ast_shape_str(b, s2, sizeof s2));
        s->batch *= a->shape[i];
    }
    AST_ASSERT(kb == s->k, "bmm: inner dims of %s and %s differ", ast_shape_str(a, s1, sizeof s1),
               ast_shape_str(b, s2, sizeof s2));
    for (int i = 0; i < d - 2; i++) shape[i] = a->shape[i];
    shape[d - 2] = s->m;
    shape[d - 1] = s->n;
    return s;
}

/* ---- shape ops ------------------------------------------------------------- */

static inline void ast_check_reshape(const ast_tensor *x, int ndim, const int64_t *shape)
{
    char s1[64];
    AST_ASSERT(ndim >= 1 && ndim <= AST_MAX_DIMS, "reshape to %d dims (1..%d allowed)", ndim, AST_MAX_DIMS);
    AST_ASSERT(ast_shape_size(ndim, shape) == x->size, "reshape: %s has %lld elements, target has %lld",
               ast_shape_str(x, s1, sizeof s1), (long long)x->size, (long long)ast_shape_size(ndim, shape));
}

/* A permuted copy, padded to 4 dims: output element (i0,i1,i2,i3) in
 * row-major order reads the source at sum_k i_k * stride[k]. */
typedef struct ast_perm_plan {
    int64_t dim[AST_MAX_DIMS];
    int64_t stride[AST_MAX_DIMS];
} ast_perm_plan;

/* view: the source's shape as the permutation sees it (ndim dims). */
static inline ast_perm_plan *ast_plan_permute(ast_ctx *c, int ndim, const int64_t *view, const int *perm)
{
    int pad = AST_MAX_DIMS - ndim;
    int64_t src_stride[AST_MAX_DIMS], s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        src_stride[i] = s;
        s *= view[i];
    }
    ast_perm_plan *p = (ast_perm_plan *)ast_alloc(c, sizeof *p);
    for (int i = 0; i < pad; i++) p->dim[i] = 1;
    for (int i = 0; i < ndim; i++) {
        p->dim[pad + i] = view[perm[i]];
        p->stride[pad + i] = src_stride[perm[i]];
    }
    return p;
}

/* Checks that perm permutes x's axes; fills shape with the output's. */
static inline void ast_permuted_shape(const ast_tensor *x, const int *perm, int64_t *shape)
{
    int seen[AST_MAX_DIMS] = {0};
    for (int i = 0; i < x->ndim; i++) {
        AST_ASSERT(perm[i] >= 0 && perm[i] < x->ndim && !seen[perm[i]], "permute: perm is not a permutation of 0..%d",
                   x->ndim - 1);
        seen[perm[i]] = 1;
        shape[i] = x->shape[perm[i]];
    }
}

/* Checks the inputs of a concat on the last axis; fills shape with the
 * output's and returns its width. */
static inline int64_t ast_concat_shape(ast_tensor *const *xs, int n, int64_t *shape)
{
    char s1[64], s2[64];
    AST_ASSERT(n >= 1 && n <= AST_NODE_MAX_IN, "concat of %d tensors (1..%d allowed)", n, AST_NODE_MAX_IN);
    int64_t width = 0;
    int nd = xs[0]->ndim;
    for (int k = 0; k < n; k++) {
        int same = xs[k]->ndim == nd;
        for (int i = 0; same && i < nd - 1; i++) same = xs[k]->shape[i] == xs[0]->shape[i];
        AST_ASSERT(same, "concat: %s and %s differ before the last axis", ast_shape_str(xs[0], s1, sizeof s1),
                   ast_shape_str(xs[k], s2, sizeof s2));
        width += ast_cols(xs[k]);
    }
    memcpy(shape, xs[0]->shape, (size_t)nd * sizeof *shape);
    shape[nd - 1] = width;
    return width;
}

/* Checks that columns [start, start + len) lie within x's last axis; fills
 * shape with the slice's. */
static inline void ast_slice_shape(const ast_tensor *x, int64_t start, int64_t len, int64_t *shape)
{
    char s1[64];
    AST_ASSERT(start >= 0 && len >= 0 && start + len <= ast_cols(x), "slice: columns [%lld, %lld) of %s",
               (long long)start, (long long)(start + len), ast_shape_str(x, s1, sizeof s1));
    memcpy(shape, x->shape, (size_t)x->ndim * sizeof *shape);
    shape[x->ndim - 1] = len;
}

/* ---- broadcasting -------------------------------------------------------- */

/* The output's dims after merging neighbours that both operands traverse
 * contiguously (or both repeat), with each operand's stride per dim (0 =
 * it repeats): equal shapes become one contiguous dim, a trailing vector
 * [E] over [B,N,E] the two dims [B*N, E]. */
typedef struct ast_bcast_dims {
    int nd;
    int64_t dim[AST_MAX_DIMS], sa[AST_MAX_DIMS], sb[AST_MAX_DIMS];
} ast_bcast_dims;

static inline void ast_bcast_append(ast_bcast_dims *p, int64_t dim, int64_t sa, int64_t sb)
{
    int last = p->nd - 1;
    if (p->nd > 0 && p->sa[last] == sa * dim && p->sb[last] == sb * dim) {
        p->dim[last] *= dim;
        p->sa[last] = sa;
        p->sb[last] = sb;
        return;
    }
    p->dim[p->nd] = dim;
    p->sa[p->nd] = sa;
    p->sb[p->nd] = sb;
    p->nd++;
}

/* Row-major strides of t's shape right-aligned to AST_MAX_DIMS dims (shape
 * padded with leading 1s), 0 along its size-1 dims. */
static inline void ast_bcast_strides(const ast_tensor *t, int64_t *shape, int64_t *stride)
{
    int pad = AST_MAX_DIMS - t->ndim;
    int64_t s = 1;
    for (int i = AST_MAX_DIMS - 1; i >= 0; i--) {
        shape[i] = i < pad ? 1 : t->shape[i - pad];
        stride[i] = shape[i] == 1 ? 0 : s;
        s *= shape[i];
    }
}

/* Checks that a and b broadcast (op names the op in the message), fills
 * out[AST_MAX_DIMS] with the padded broadcast shape and p with the dims. */
static inline void ast_plan_broadcast(const char *op, const ast_tensor *a, const ast_tensor *b, int64_t *out,
                                      ast_bcast_dims *p)
{
    char s1[64], s2[64];
    int64_t as[AST_MAX_DIMS], bs[AST_MAX_DIMS], sa[AST_MAX_DIMS], sb[AST_MAX_DIMS];
    ast_bcast_strides(a, as, sa);
    ast_bcast_strides(b, bs, sb);
    for (int i = 0; i < AST_MAX_DIMS; i++) {
        AST_ASSERT(as[i] == bs[i] || as[i] == 1 || bs[i] == 1, "%s: shapes %s and %s do not broadcast", op,
                   ast_shape_str(a, s1, sizeof s1), ast_shape_str(b, s2, sizeof s2));
        out[i] = as[i] == 1 ? bs[i] : as[i];
    }
    p->nd = 0;
    for (int i = 0; i < AST_MAX_DIMS; i++)
        if (out[i] != 1) ast_bcast_append(p, out[i], sa[i], sb[i]);
    if (p->nd == 0) ast_bcast_append(p, 1, 0, 0);
}

/* ---- grouped_linear -------------------------------------------------------- */

/* One linear per group of consecutive rows, as the node keeps it. */
typedef struct ast_groups {
    int64_t *offsets;    /* [n + 1]: group g owns rows [offsets[g], offsets[g + 1]) */
    ast_tensor **w, **b; /* [n] each; b NULL: no bias */
    int n;
    /* [n] each, the gradients of w and b (NULL entries: none needed; NULL:
     * no group's), zeroed: filled by the dispatch before the backward
     * kernel runs (ops/dispatch_grouped.c). */
    float **gw, **gb;
} ast_groups;

static inline void ast_check_groups(const ast_tensor *x, const int64_t *offsets, int n, ast_tensor *const *w,
                                    ast_tensor *const *b)
{
    char s1[64], s2[64];
    int64_t rows = ast_rows(x), in = ast_cols(x);
    AST_ASSERT(n >= 1 && w, "grouped_linear: %d groups (at least 1, each with a weight)", n);
    for (int g = 0; g < n; g++) AST_ASSERT(w[g], "grouped_linear: group %d has no weight", g);
    AST_ASSERT(offsets[0] == 0 && offsets[n] == rows, "grouped_linear: offsets run from %lld to %lld for %lld rows",
               (long long)offsets[0], (long long)offsets[n], (long long)rows);
    AST_ASSERT(rows < (1ll << 31), "grouped_linear: %lld rows (at most 2^31 - 1)", (long long)rows);
    for (int g = 0; g < n; g++) {
        AST_ASSERT(offsets[g] <= offsets[g + 1], "grouped_linear: offsets[%d] = %lld > offsets[%d] = %lld", g,
                   (long long)offsets[g], g + 1, (long long)offsets[g + 1]);
        AST_ASSERT(w[g]->ndim == 2 && w[g]->shape[1] == in && w[g]->shape[0] == w[0]->shape[0],
                   "grouped_linear: x %s does not fit weight %d %s (every weight must be [%lld, %lld])",
                   ast_shape_str(x, s1, sizeof s1), g, ast_shape_str(w[g], s2, sizeof s2),
                   (long long)w[0]->shape[0], (long long)in);
        AST_ASSERT(!b || (b[g] && b[g]->ndim == 1 && b[g]->shape[0] == w[0]->shape[0]),
                   "grouped_linear: bias %d %s for %lld outputs", g,
                   b[g] ? ast_shape_str(b[g], s1, sizeof s1) : "NULL", (long long)w[0]->shape[0]);
    }
}

/* The first of n tensors that needs a gradient, else the first: the node
 * holds x and one weight and one bias in in[] (ast_record looks there to
 * decide whether to record), all of them in the saved ast_groups. */
static inline ast_tensor *ast_groups_representative(ast_tensor *const *t, int n)
{
    if (!t) return NULL;
    for (int i = 0; i < n; i++)
        if (t[i]->flags & AST_REQUIRES_GRAD) return t[i];
    return t[0];
}

/* Copies the arrays into the (host) arena: they outlive the call, the
 * caller's may not. */
static inline void ast_save_groups(ast_ctx *c, ast_groups *s, const int64_t *offsets, int n, ast_tensor *const *w,
                                   ast_tensor *const *b)
{
    s->n = n;
    s->offsets = (int64_t *)memcpy(ast_alloc(c, (size_t)(n + 1) * sizeof *offsets), offsets,
                                   (size_t)(n + 1) * sizeof *offsets);
    s->w = (ast_tensor **)memcpy(ast_alloc(c, (size_t)n * sizeof *w), w, (size_t)n * sizeof *w);
    s->b = b ? (ast_tensor **)memcpy(ast_alloc(c, (size_t)n * sizeof *b), b, (size_t)n * sizeof *b) : NULL;
}

#endif
