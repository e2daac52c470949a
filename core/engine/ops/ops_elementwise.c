/* The CPU kernels of the elementwise ops (ops/dispatch_elementwise.c):
 * broadcasting add/sub/mul/div, the unary activations (affine, relu, gelu,
 * sigmoid, softplus, dropout, silu, exp) and the key mask's attention bias.
 * A broadcast operand's grad sums over the dims it repeats along. */
#include <math.h>

#include "engine/backend.h"
#include "engine/ops/ops_plan.h"
#include "alphast/fastmath.h"

/* ---- broadcasting binary ops ------------------------------------------ */

/* One innermost run of n output elements; a, b (and their grads) advance by
 * sa, sb elements per output element (0 = the operand repeats). */
typedef struct run {
    int64_t n, sa, sb;
    const float *a, *b, *gy;
    float *y, *ga, *gb;
    int assign_a, assign_b; /* backward: that gradient is fresh, write it */
} run;

typedef void (*run_fn)(const run *r);

/* Calls kernel on the parts of the innermost runs that cover output
 * elements [lo, hi), base pointers offset to each part. The merged dims
 * (ops_plan.h): equal shapes collapse to one contiguous run and a trailing
 * vector such as [E] over [B,N,E] to contiguous runs of E, the fast paths
 * every layer hits. */
static void walk_span(const ast_bcast_dims *p, const run *base, run_fn kernel, int64_t lo, int64_t hi)
{
    int last = p->nd - 1;
    int64_t len = p->dim[last];
    for (int64_t k = lo / len; k * len < hi; k++) {
        int64_t oa = 0, ob = 0, rest = k, oy = k * len;
        for (int d = last - 1; d >= 0; d--) {
            int64_t i = rest % p->dim[d];
            rest /= p->dim[d];
            oa += i * p->sa[d];
            ob += i * p->sb[d];
        }
        int64_t from = lo > oy ? lo - oy : 0, to = hi < oy + len ? hi - oy : len;
        oa += from * p->sa[last], ob += from * p->sb[last], oy += from;
        run r = {.n = to - from, .sa = p->sa[last], .sb = p->sb[last], .a = base->a + oa, .b = base->b + ob,
                 .gy = base->gy ? base->gy + oy : NULL, .y = base->y + oy,
                 .ga = base->ga ? base->ga + oa : NULL, .gb = base->gb ? base->gb + ob : NULL,
                 .assign_a = base->assign_a, .assign_b = base->assign_b};
        kernel(&r);
    }
}

typedef struct walk_args {
    const ast_bcast_dims *p;
    const run *base;
    run_fn kernel;
} walk_args;

static void walk_range(void *arg, int64_t lo, int64_t hi)
{
    const walk_args *w = arg;
    walk_span(w->p, w->base, w->kernel, lo, hi);
}

/* Calls kernel on every innermost run, split over the thread pool. A
 * backward into a broadcast operand sums many outputs into one gradient
 * element, so it stays on one thread. */
static void walk(const ast_bcast_dims *p, const run *base, run_fn kernel, int64_t size, int splittable)
{
    if (size == 0) return;
    if (splittable)
        ast_parallel_for(size, AST_PAR_GRAIN, walk_range, &(walk_args){p, base, kernel});
    else
        walk_span(p, base, kernel, 0, size);
}

/* The contiguous case gets its own loop so the compiler vectorises it. */
#define BINARY_FORWARD(name, OP)                                                        \
    static void name(const run *r)                                                      \
    {                                                                                   \
        const float *a = r->a, *b = r->b;                                               \
        float *y = r->y;                                                                \
        if (r->sa == 1 && r->sb == 1)                                                   \
            for (int64_t i = 0; i < r->n; i++) y[i] = a[i] OP b[i];                     \
        else                                                                            \
            for (int64_t i = 0; i < r->n; i++) y[i] = a[i * r->sa] OP b[i * r->sb];     \
    }
BINARY_FORWARD(add_forward, +)
BINARY_FORWARD(sub_forward, -)
BINARY_FORWARD(mul_forward, *)
BINARY_FORWARD(div_forward, /)
#undef BINARY_FORWARD

/* g[i * stride] += sign * gy[i] (= when the gradient is fresh, which is
 * only asked for an operand as big as the output); a zero stride sums the
 * run into one value. */
static void accumulate(int64_t n, const float *gy, float sign, float *g, int64_t stride, int assign)
{
    if (!g) return;
    if (assign)
        for (int64_t i = 0; i < n; i++) g[i * stride] = sign * gy[i];
    else
        for (int64_t i = 0; i < n; i++) g[i * stride] += sign * gy[i];
}

static void add_backward(const run *r)
{
    accumulate(r->n, r->gy, 1.0f, r->ga, r->sa, r->assign_a);
    accumulate(r->n, r->gy, 1.0f, r->gb, r->sb, r->assign_b);
}

static void sub_backward(const run *r)
{
    accumulate(r->n, r->gy, 1.0f, r->ga, r->sa, r->assign_a);
    accumulate(r->n, r->gy, -1.0f, r->gb, r->sb, r->assign_b);
}

static void mul_backward(const run *r)
{
    for (int64_t i = 0; r->ga && i < r->n; i++) {
        float g = r->gy[i] * r->b[i * r->sb];
        r->ga[i * r->sa] = r->assign_a ? g : r->ga[i * r->sa] + g;
    }
    for (int64_t i = 0; r->gb && i < r->n; i++) {
        float g = r->gy[i] * r->a[i * r->sa];
        r->gb[i * r->sb] = r->assign_b ? g : r->gb[i * r->sb] + g;
    }
}

/* d(a/b)/db = -a/b^2 = -y/b. */
static void div_backward(const run *r)
{
    for (int64_t i = 0; r->ga && i < r->n; i++) {
        float g = r->gy[i] / r->b[i * r->sb];
        r->ga[i * r->sa] = r->assign_a ? g : r->ga[i * r->sa] + g;
    }
    for (int64_t i = 0; r->gb && i < r->n; i++) {
        float g = -r->gy[i] * r->y[i] / r->b[i * r->sb];
        r->gb[i * r->sb] = r->assign_b ? g : r->gb[i * r->sb] + g;
    }
}

/* saved: the broadcast's dims. A broadcast operand's gradient sums many
 * outputs, so it comes zeroed (as does an operand's bigger than an empty
 * output, which the walk never reaches); only an operand of the output's
 * size may come fresh (assigns_if_full). */
static void binary_backward(const ast_node *n, const ast_op_grads *g, run_fn kernel)
{
    ast_tensor *a = n->in[0], *b = n->in[1], *y = n->out;
    run base = {.a = a->data, .b = b->data, .y = y->data, .gy = y->grad, .ga = g->g[0], .gb = g->g[1],
                .assign_a = g->assign[0], .assign_b = g->assign[1]};
    int broadcast = (base.ga && a->size != y->size) || (base.gb && b->size != y->size);
    walk(n->saved, &base, kernel, y->size, !broadcast);
}

#define BINARY_KERNELS(name)                                                                              \
    static void name##_node_forward(ast_ctx *c, ast_node *n)                                              \
    {                                                                                                     \
        walk(n->saved, &(run){.a = n->in[0]->data, .b = n->in[1]->data, .y = n->out->data}, name##_forward, \
             n->out->size, 1);                                                                            \
    }                                                                                                     \
    static void name##_node_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)               \
    {                                                                                                     \
        binary_backward(n, g, name##_backward);                                                           \
    }
BINARY_KERNELS(add)
BINARY_KERNELS(sub)
BINARY_KERNELS(mul)
BINARY_KERNELS(div)
#undef BINARY_KERNELS

/* ---- unary ops ---------------------------------------------------------- */

/* farg: scale, shift. */
static void affine_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    const float *gy = n->out->grad;
    for (int64_t i = 0; gx && i < n->out->size; i++) gx[i] += gy[i] * n->farg[0];
}

static void affine_forward(ast_ctx *c, ast_node *n)
{
    const float *x = n->in[0]->data, scale = n->farg[0], shift = n->farg[1];
    for (int64_t i = 0; i < n->out->size; i++) n->out->data[i] = x[i] * scale + shift;
}

/* Arguments of the one-input elementwise kernels run on the thread pool. */
typedef struct unary_args {
    const float *x, *gy;
    float *y; /* forward: the output; backward: the input's gradient */
    float *saved; /* what the forward keeps for the backward */
    int assign; /* backward: the gradient is fresh, write it rather than add */
} unary_args;

/* The input gradient of a unary op's backward, fresh or accumulated. */
static unary_args unary_grad(const ast_node *n, const ast_op_grads *g)
{
    return (unary_args){.x = n->in[0]->data, .gy = n->out->grad, .y = g->g[0], .assign = g->assign[0]};
}

/* Runs range over the elements of a unary op's forward. */
static void unary_forward(ast_node *n, int64_t grain, ast_range_fn range)
{
    ast_parallel_for(n->out->size, grain, range, &(unary_args){.x = n->in[0]->data, .y = n->out->data, .saved = n->saved});
}

/* The gradient at 0 is 0, as in torch. */
static void relu_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict x = a->x, *restrict gy = a->gy;
    float *restrict gx = a->y;
    const int assign = a->assign;
    for (int64_t i = lo; i < hi; i++) {
        float g = x[i] > 0.0f ? gy[i] : 0.0f;
        gx[i] = assign ? g : gx[i] + g;
    }
}

static void relu_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    unary_args a = unary_grad(n, g);
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN, relu_backward_range, &a);
}

/* NaN passes through, as in torch, so a bad value is not silently hidden. */
static void relu_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->y;
    for (int64_t i = lo; i < hi; i++) y[i] = x[i] <= 0.0f ? 0.0f : x[i];
}

static void relu_forward(ast_ctx *c, ast_node *n) { unary_forward(n, AST_PAR_GRAIN, relu_range); }

/* gelu(x) = x Phi(x) and gelu'(x) = Phi(x) + x phi(x), Phi/phi the standard
 * normal cdf/density. The forward saves Phi, so the backward needs one exp
 * rather than another erf. */
static void gelu_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict x = a->x, *restrict gy = a->gy, *restrict cdf = a->saved;
    float *restrict gx = a->y;
    const float inv_sqrt_2pi = 0.3989422804014327f;
    const int assign = a->assign;
    for (int64_t i = lo; i < hi; i++) {
        float g = gy[i] * (cdf[i] + x[i] * inv_sqrt_2pi * ast_expf(-0.5f * x[i] * x[i]));
        gx[i] = assign ? g : gx[i] + g;
    }
}

static void gelu_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    unary_args a = unary_grad(n, g);
    a.saved = n->saved;
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN, gelu_backward_range, &a);
}

static inline float gelu_cdf(float x) { return 0.5f * (1.0f + ast_erff(x * (float)M_SQRT1_2)); }

/* Two loops, with and without Phi kept: a store under a condition in the
 * loop kept GCC from vectorising it, and the scalar erf with its branch
 * made GELU a third of the eval forward (ALPHAST_PROFILE=1, reference
 * size). The same arithmetic either way, so the bits do not depend on grad. */
static void gelu_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->y, *restrict cdf = a->saved;
    if (cdf) {
#pragma omp simd
        for (int64_t i = lo; i < hi; i++) {
            float phi = gelu_cdf(x[i]);
            y[i] = x[i] * phi;
            cdf[i] = phi;
        }
    } else {
#pragma omp simd
        for (int64_t i = lo; i < hi; i++) y[i] = x[i] * gelu_cdf(x[i]);
    }
}

/* saved: Phi, kept only when the node goes on the tape. */
static void gelu_forward(ast_ctx *c, ast_node *n)
{
    if (ast_needs_grad(c, n->in, 1)) n->saved = ast_alloc_uninit(c, (size_t)n->out->size * sizeof(float));
    unary_forward(n, AST_PAR_GRAIN, gelu_range);
}

/* exp of a non-positive argument only, so neither tail overflows;
 * branch-free so the loops over it vectorize. */
static inline float stable_sigmoid(float x)
{
    float e = ast_expf(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

static void sigmoid_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    float *gx = g->g[0];
    const float *y = n->out->data, *gy = n->out->grad;
    for (int64_t i = 0; gx && i < n->out->size; i++) gx[i] += gy[i] * y[i] * (1.0f - y[i]);
}

static void sigmoid_forward(ast_ctx *c, ast_node *n)
{
    for (int64_t i = 0; i < n->out->size; i++) n->out->data[i] = stable_sigmoid(n->in[0]->data[i]);
}

/* torch's defaults (beta 1, threshold 20): identity above the threshold,
 * where log1p(exp(x)) equals x to float precision anyway. */
#define SOFTPLUS_THRESHOLD 20.0f

static void softplus_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict x = a->x, *restrict gy = a->gy;
    float *restrict gx = a->y;
    const int assign = a->assign;
    for (int64_t i = lo; i < hi; i++) {
        float g = x[i] > SOFTPLUS_THRESHOLD ? gy[i] : gy[i] * stable_sigmoid(x[i]);
        gx[i] = assign ? g : gx[i] + g;
    }
}

static void softplus_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    unary_args a = unary_grad(n, g);
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN / 4, softplus_backward_range, &a);
}

/* log1pf is a libm call, so this one runs a quarter of the usual grain per thread. */
static void softplus_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    for (int64_t i = lo; i < hi; i++) a->y[i] = a->x[i] > SOFTPLUS_THRESHOLD ? a->x[i] : log1pf(ast_expf(a->x[i]));
}

static void softplus_forward(ast_ctx *c, ast_node *n) { unary_forward(n, AST_PAR_GRAIN / 4, softplus_range); }

typedef struct dropout_args {
    const float *x, *gy;
    float *y; /* forward: the output; backward: the input's gradient */
    uint64_t key;
    uint32_t drop_below; /* drop where the element's 24-bit hash is below this */
    float scale;
    int assign; /* backward: the gradient is fresh, write it rather than add */
} dropout_args;

/* The mask is a hash of (key, index), not a draw from a sequential stream,
 * so any range of elements can be computed on any thread (ast_mix64; its top
 * 24 bits are a uniform in [0, 2^24)), and the backward hashes again instead
 * of keeping the mask: two multiplies per element rather than a byte of
 * memory per element for the whole step. */
static inline int dropout_keeps(uint64_t key, uint32_t drop_below, int64_t i)
{
    uint64_t z = ast_mix64(key + (uint64_t)i * 0x9e3779b97f4a7c15ull);
    return (uint32_t)(z >> 40) >= drop_below;
}

/* The arguments are read into locals: through `a`, which the stores might
 * alias, they would be reloaded every element and the loops not vectorised. */
static void dropout_range(void *arg, int64_t lo, int64_t hi)
{
    const dropout_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->y;
    const uint64_t key = a->key;
    const uint32_t drop_below = a->drop_below;
    const float scale = a->scale;
    for (int64_t i = lo; i < hi; i++) y[i] = dropout_keeps(key, drop_below, i) ? x[i] * scale : 0.0f;
}

static void dropout_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const dropout_args *a = arg;
    const float *restrict gy = a->gy;
    float *restrict gx = a->y;
    const uint64_t key = a->key;
    const uint32_t drop_below = a->drop_below;
    const float scale = a->scale;
    const int assign = a->assign;
    for (int64_t i = lo; i < hi; i++) {
        float g = dropout_keeps(key, drop_below, i) ? gy[i] * scale : 0.0f;
        gx[i] = assign ? g : gx[i] + g;
    }
}

/* iarg: the mask's key (its bits), drop_below; farg[0]: the scale. */
static void dropout_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    dropout_args a = {.gy = n->out->grad, .y = g->g[0], .key = (uint64_t)n->iarg[0],
                      .drop_below = (uint32_t)n->iarg[1], .scale = n->farg[0], .assign = g->assign[0]};
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN, dropout_backward_range, &a);
}

static void dropout_forward(ast_ctx *c, ast_node *n)
{
    dropout_args a = {.x = n->in[0]->data, .y = n->out->data, .key = (uint64_t)n->iarg[0],
                      .drop_below = (uint32_t)n->iarg[1], .scale = n->farg[0]};
    ast_parallel_for(n->out->size, AST_PAR_GRAIN, dropout_range, &a);
}

/* ---- ABI 2.1: silu, exp, key_mask_bias ------------------------------------ */

/* silu(x) = x sigmoid(x): the same float operations as mul(x, sigmoid(x)),
 * so the two agree bit for bit. Finite for every finite x: sigmoid is in
 * [0, 1], so |silu(x)| <= |x|. */
static void silu_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->y;
    for (int64_t i = lo; i < hi; i++) y[i] = x[i] * stable_sigmoid(x[i]);
}

/* silu'(x) = s + x s (1 - s) = s (1 + x t), s = sigmoid(x), t = 1 - s =
 * sigmoid(-x). Both come from e = exp(-|x|), so t is not the cancelling
 * 1 - s (which loses all digits of x t for large positive x) and nothing
 * overflows: s, t in [0, 1] and s x t is bounded. Recomputing s from x costs
 * one vectorised exp; saving it would cost a tensor and the same reads. */
static void silu_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict x = a->x, *restrict gy = a->gy;
    float *restrict gx = a->y;
    const int assign = a->assign;
    for (int64_t i = lo; i < hi; i++) {
        float e = ast_expf(-fabsf(x[i])), inv = 1.0f / (1.0f + e);
        float s = (x[i] >= 0.0f ? 1.0f : e) * inv, t = (x[i] >= 0.0f ? e : 1.0f) * inv;
        float g = gy[i] * s * (1.0f + x[i] * t);
        gx[i] = assign ? g : gx[i] + g;
    }
}

static void silu_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    unary_args a = unary_grad(n, g);
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN, silu_backward_range, &a);
}

static void silu_forward(ast_ctx *c, ast_node *n) { unary_forward(n, AST_PAR_GRAIN, silu_range); }

/* ast_expf is within 2 ulp of exp wherever the result is a normal float
 * (tests/test_fastmath.c), overflows to +inf above 88.72 where expf does,
 * and returns 0 below -87.34, where expf's result is subnormal (< 1.2e-38
 * absolute): adequate for an op, and it vectorises. */
static void exp_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->y;
    for (int64_t i = lo; i < hi; i++) y[i] = ast_expf(x[i]);
}

/* d e^x / dx = e^x: the output itself, saved for free. */
static void exp_backward_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict y = a->x, *restrict gy = a->gy;
    float *restrict gx = a->y;
    const int assign = a->assign;
    for (int64_t i = lo; i < hi; i++) {
        float g = gy[i] * y[i];
        gx[i] = assign ? g : gx[i] + g;
    }
}

static void exp_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    unary_args a = unary_grad(n, g);
    a.x = n->out->data;
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN, exp_backward_range, &a);
}

static void exp_forward(ast_ctx *c, ast_node *n) { unary_forward(n, AST_PAR_GRAIN, exp_range); }

/* farg[0]: masked_logit, the derivative of every output by its mask element. */
static void key_mask_bias_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    int assign = g->assign[0];
    float *gm = g->g[0];
    const float *gy = n->out->grad, l = n->farg[0];
    for (int64_t i = 0; gm && i < n->out->size; i++) gm[i] = assign ? gy[i] * l : gm[i] + gy[i] * l;
}

/* mask [B, N] -> [B, 1, 1, N], the element order unchanged. m * L - L is
 * affine(reshape(mask), L, -L) operation for operation (x * scale + shift,
 * and adding -L is subtracting L), so it replaces the plugins' hand-written
 * version bit for bit, for any mask values: 1 -> +0, 0 -> -L. A mask has
 * B * N elements, too few to pay for the thread pool. */
static void key_mask_bias_forward(ast_ctx *c, ast_node *n)
{
    const float *m = n->in[0]->data, masked_logit = n->farg[0];
    for (int64_t i = 0; i < n->out->size; i++) n->out->data[i] = m[i] * masked_logit - masked_logit;
}

void ast_cpu_elementwise_kernels(ast_op_kernel *t)
{
#define UNARY(op, fwd, fresh) t[AST_OP_##op] = (ast_op_kernel){.forward = fwd, .backward = op##_backward, .assigns = fresh}
    t[AST_OP_add] = (ast_op_kernel){.forward = add_node_forward, .backward = add_node_backward, .assigns_if_full = 3};
    t[AST_OP_sub] = (ast_op_kernel){.forward = sub_node_forward, .backward = sub_node_backward, .assigns_if_full = 3};
    t[AST_OP_mul] = (ast_op_kernel){.forward = mul_node_forward, .backward = mul_node_backward, .assigns_if_full = 3};
    t[AST_OP_div] = (ast_op_kernel){.forward = div_node_forward, .backward = div_node_backward, .assigns_if_full = 3};
    UNARY(affine, affine_forward, 0);
    UNARY(relu, relu_forward, 1);
    UNARY(gelu, gelu_forward, 1);
    UNARY(sigmoid, sigmoid_forward, 0);
    UNARY(softplus, softplus_forward, 1);
    UNARY(dropout, dropout_forward, 1);
    UNARY(silu, silu_forward, 1);
    UNARY(exp, exp_forward, 1);
    UNARY(key_mask_bias, key_mask_bias_forward, 1);
#undef UNARY
}
