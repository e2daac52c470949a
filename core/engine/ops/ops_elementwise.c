/* Elementwise ops: broadcasting add/sub/mul/div, the unary activations
 * (affine, relu, gelu, sigmoid, softplus, dropout, silu, exp) and the key
 * mask's attention bias. Each backward adds into the input grads; a
 * broadcast operand's grad sums over the dims it repeats along. */
#include <math.h>

#include "engine/engine.h"
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

typedef struct binary_op {
    const char *name;
    run_fn forward, backward;
} binary_op;

/* The op and its merged dims (ops_plan.h): equal shapes collapse to one
 * contiguous run and a trailing vector such as [E] over [B,N,E] to
 * contiguous runs of E, the fast paths every layer hits. */
typedef struct binary_plan {
    const binary_op *op;
    ast_bcast_dims dims;
} binary_plan;

/* Fills out[AST_MAX_DIMS] with the padded broadcast shape. */
static binary_plan *plan_binary(ast_ctx *c, const binary_op *op, const ast_tensor *a, const ast_tensor *b,
                                int64_t *out)
{
    binary_plan *p = ast_alloc(c, sizeof *p);
    p->op = op;
    ast_plan_broadcast(op->name, a, b, out, &p->dims);
    return p;
}

/* Calls kernel on the parts of the innermost runs that cover output
 * elements [lo, hi), base pointers offset to each part. */
static void walk_span(const binary_plan *p, const run *base, run_fn kernel, int64_t lo, int64_t hi)
{
    int last = p->dims.nd - 1;
    int64_t len = p->dims.dim[last];
    for (int64_t k = lo / len; k * len < hi; k++) {
        int64_t oa = 0, ob = 0, rest = k, oy = k * len;
        for (int d = last - 1; d >= 0; d--) {
            int64_t i = rest % p->dims.dim[d];
            rest /= p->dims.dim[d];
            oa += i * p->dims.sa[d];
            ob += i * p->dims.sb[d];
        }
        int64_t from = lo > oy ? lo - oy : 0, to = hi < oy + len ? hi - oy : len;
        oa += from * p->dims.sa[last], ob += from * p->dims.sb[last], oy += from;
        run r = {.n = to - from, .sa = p->dims.sa[last], .sb = p->dims.sb[last], .a = base->a + oa, .b = base->b + ob,
                 .gy = base->gy ? base->gy + oy : NULL, .y = base->y + oy,
                 .ga = base->ga ? base->ga + oa : NULL, .gb = base->gb ? base->gb + ob : NULL,
                 .assign_a = base->assign_a, .assign_b = base->assign_b};
        kernel(&r);
    }
}

typedef struct walk_args {
    const binary_plan *p;
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
static void walk(const binary_plan *p, const run *base, run_fn kernel, int64_t size, int splittable)
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

static const binary_op OP_ADD = {"add", add_forward, add_backward};
static const binary_op OP_SUB = {"sub", sub_forward, sub_backward};
static const binary_op OP_MUL = {"mul", mul_forward, mul_backward};
static const binary_op OP_DIV = {"div", div_forward, div_backward};

static void binary_node_backward(ast_ctx *c, const ast_node *n)
{
    const binary_plan *p = n->saved;
    ast_tensor *a = n->in[0], *b = n->in[1], *y = n->out;
    run base = {.a = a->data, .b = b->data, .y = y->data, .gy = y->grad};
    /* A broadcast operand's gradient sums many outputs, so it must start at
     * 0; so must an operand's bigger than an empty output, which the walk
     * never reaches. Only an operand of the output's size is written whole. */
    base.ga = a->size != y->size ? ast_grad(c, a) : ast_grad_fresh(c, a, &base.assign_a);
    base.gb = b->size != y->size ? ast_grad(c, b) : ast_grad_fresh(c, b, &base.assign_b);
    int broadcast = (base.ga && a->size != y->size) || (base.gb && b->size != y->size);
    walk(p, &base, p->op->backward, y->size, !broadcast);
}

static ast_tensor *binary(ast_ctx *c, const binary_op *op, ast_tensor *a, ast_tensor *b)
{
    int64_t out[AST_MAX_DIMS];
    binary_plan *p = plan_binary(c, op, a, b, out);
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    ast_tensor *y = ast_empty(c, nd, out + AST_MAX_DIMS - nd);
    walk(p, &(run){.a = a->data, .b = b->data, .y = y->data}, op->forward, y->size, 1);
    ast_record(c, &(ast_node){.op = op->name, .backward = binary_node_backward, .out = y, .in = {a, b}, .n_in = 2,
                              .saved = p});
    return y;
}

ast_tensor *ast_cpu_add(ast_ctx *c, ast_tensor *a, ast_tensor *b) { return binary(c, &OP_ADD, a, b); }
ast_tensor *ast_cpu_sub(ast_ctx *c, ast_tensor *a, ast_tensor *b) { return binary(c, &OP_SUB, a, b); }
ast_tensor *ast_cpu_mul(ast_ctx *c, ast_tensor *a, ast_tensor *b) { return binary(c, &OP_MUL, a, b); }
ast_tensor *ast_cpu_div(ast_ctx *c, ast_tensor *a, ast_tensor *b) { return binary(c, &OP_DIV, a, b); }

/* ---- unary ops ---------------------------------------------------------- */

/* The outputs of unary ops: each op writes every element. */
static ast_tensor *same_shape(ast_ctx *c, const ast_tensor *x) { return ast_empty(c, x->ndim, x->shape); }

static void record_unary(ast_ctx *c, const char *op, ast_backward_fn backward, ast_tensor *x, ast_tensor *y)
{
    ast_record(c, &(ast_node){.op = op, .backward = backward, .out = y, .in = {x}, .n_in = 1});
}

static void affine_backward(ast_ctx *c, const ast_node *n)
{
    float *gx = ast_grad(c, n->in[0]);
    const float *gy = n->out->grad;
    for (int64_t i = 0; gx && i < n->out->size; i++) gx[i] += gy[i] * n->farg[0];
}

ast_tensor *ast_cpu_affine(ast_ctx *c, ast_tensor *x, float scale, float shift)
{
    ast_tensor *y = same_shape(c, x);
    for (int64_t i = 0; i < x->size; i++) y->data[i] = x->data[i] * scale + shift;
    ast_record(c, &(ast_node){.op = "affine", .backward = affine_backward, .out = y, .in = {x}, .n_in = 1,
                              .farg = {scale}});
    return y;
}

/* Arguments of the one-input elementwise kernels run on the thread pool. */
typedef struct unary_args {
    const float *x, *gy;
    float *y; /* forward: the output; backward: the input's gradient */
    float *saved; /* what the forward keeps for the backward */
    int assign; /* backward: the gradient is fresh, write it rather than add */
} unary_args;

/* The input gradient of a unary op's backward, fresh or accumulated. */
static unary_args unary_grad(ast_ctx *c, const ast_node *n)
{
    unary_args a = {.x = n->in[0]->data, .gy = n->out->grad};
    a.y = ast_grad_fresh(c, n->in[0], &a.assign);
    return a;
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

static void relu_backward(ast_ctx *c, const ast_node *n)
{
    unary_args a = unary_grad(c, n);
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

ast_tensor *ast_cpu_relu(ast_ctx *c, ast_tensor *x)
{
    ast_tensor *y = same_shape(c, x);
    ast_parallel_for(x->size, AST_PAR_GRAIN, relu_range, &(unary_args){.x = x->data, .y = y->data});
    record_unary(c, "relu", relu_backward, x, y);
    return y;
}

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

static void gelu_backward(ast_ctx *c, const ast_node *n)
{
    unary_args a = unary_grad(c, n);
    a.saved = n->saved;
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN, gelu_backward_range, &a);
}

static void gelu_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    const float *restrict x = a->x;
    float *restrict y = a->y, *restrict cdf = a->saved;
    for (int64_t i = lo; i < hi; i++) {
        float phi = 0.5f * (1.0f + ast_erff(x[i] * (float)M_SQRT1_2));
        y[i] = x[i] * phi;
        if (cdf) cdf[i] = phi;
    }
}

ast_tensor *ast_cpu_gelu(ast_ctx *c, ast_tensor *x)
{
    ast_tensor *y = same_shape(c, x);
    float *cdf = ast_needs_grad(c, &x, 1) ? ast_alloc_uninit(c, (size_t)x->size * sizeof *cdf) : NULL;
    ast_parallel_for(x->size, AST_PAR_GRAIN, gelu_range, &(unary_args){.x = x->data, .y = y->data, .saved = cdf});
    ast_record(c, &(ast_node){.op = "gelu", .backward = gelu_backward, .out = y, .in = {x}, .n_in = 1, .saved = cdf});
    return y;
}

/* exp of a non-positive argument only, so neither tail overflows;
 * branch-free so the loops over it vectorize. */
static inline float stable_sigmoid(float x)
{
    float e = ast_expf(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

static void sigmoid_backward(ast_ctx *c, const ast_node *n)
{
    float *gx = ast_grad(c, n->in[0]);
    const float *y = n->out->data, *gy = n->out->grad;
    for (int64_t i = 0; gx && i < n->out->size; i++) gx[i] += gy[i] * y[i] * (1.0f - y[i]);
}

ast_tensor *ast_cpu_sigmoid(ast_ctx *c, ast_tensor *x)
{
    ast_tensor *y = same_shape(c, x);
    for (int64_t i = 0; i < x->size; i++) y->data[i] = stable_sigmoid(x->data[i]);
    record_unary(c, "sigmoid", sigmoid_backward, x, y);
    return y;
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

static void softplus_backward(ast_ctx *c, const ast_node *n)
{
    unary_args a = unary_grad(c, n);
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN / 4, softplus_backward_range, &a);
}

/* log1pf is a libm call, so this one runs a quarter of the usual grain per thread. */
static void softplus_range(void *arg, int64_t lo, int64_t hi)
{
    const unary_args *a = arg;
    for (int64_t i = lo; i < hi; i++) a->y[i] = a->x[i] > SOFTPLUS_THRESHOLD ? a->x[i] : log1pf(ast_expf(a->x[i]));
}

ast_tensor *ast_cpu_softplus(ast_ctx *c, ast_tensor *x)
{
    ast_tensor *y = same_shape(c, x);
    ast_parallel_for(x->size, AST_PAR_GRAIN / 4, softplus_range, &(unary_args){.x = x->data, .y = y->data});
    record_unary(c, "softplus", softplus_backward, x, y);
    return y;
}

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
static void dropout_backward(ast_ctx *c, const ast_node *n)
{
    dropout_args a = {.gy = n->out->grad, .key = (uint64_t)n->iarg[0], .drop_below = (uint32_t)n->iarg[1],
                      .scale = n->farg[0]};
    a.y = ast_grad_fresh(c, n->in[0], &a.assign);
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN, dropout_backward_range, &a);
}

/* Returns x itself when it is the identity, so eval draws nothing from the
 * RNG and costs nothing. One key from the step's RNG per call (ast_ctx_key)
 * keys the mask. */
ast_tensor *ast_cpu_dropout(ast_ctx *c, ast_tensor *x, float p)
{
    AST_ASSERT(p >= 0.0f && p <= 1.0f, "dropout probability %g is outside [0, 1]", (double)p);
    if (!ast_training(c) || p == 0.0f) return x;
    const uint64_t *key_at; /* a device kernel's; this one takes the key itself */
    dropout_args a = {.x = x->data,
                      .key = ast_ctx_key(c, &key_at),
                      .drop_below = (uint32_t)ceil((double)p * 16777216.0),
                      .scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f};
    ast_tensor *y = same_shape(c, x);
    a.y = y->data;
    ast_parallel_for(x->size, AST_PAR_GRAIN, dropout_range, &a);
    ast_record(c, &(ast_node){.op = "dropout", .backward = dropout_backward, .out = y, .in = {x}, .n_in = 1,
                              .iarg = {(int64_t)a.key, a.drop_below}, .farg = {a.scale}});
    return y;
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

static void silu_backward(ast_ctx *c, const ast_node *n)
{
    unary_args a = unary_grad(c, n);
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN, silu_backward_range, &a);
}

ast_tensor *ast_cpu_silu(ast_ctx *c, ast_tensor *x)
{
    ast_tensor *y = same_shape(c, x);
    ast_parallel_for(x->size, AST_PAR_GRAIN, silu_range, &(unary_args){.x = x->data, .y = y->data});
    record_unary(c, "silu", silu_backward, x, y);
    return y;
}

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

static void exp_backward(ast_ctx *c, const ast_node *n)
{
    unary_args a = unary_grad(c, n);
    a.x = n->out->data;
    if (a.y) ast_parallel_for(n->out->size, AST_PAR_GRAIN, exp_backward_range, &a);
}

ast_tensor *ast_cpu_exp(ast_ctx *c, ast_tensor *x)
{
    ast_tensor *y = same_shape(c, x);
    ast_parallel_for(x->size, AST_PAR_GRAIN, exp_range, &(unary_args){.x = x->data, .y = y->data});
    record_unary(c, "exp", exp_backward, x, y);
    return y;
}

/* farg[0]: masked_logit, the derivative of every output by its mask element. */
static void key_mask_bias_backward(ast_ctx *c, const ast_node *n)
{
    int assign;
    float *gm = ast_grad_fresh(c, n->in[0], &assign);
    const float *gy = n->out->grad, l = n->farg[0];
    for (int64_t i = 0; gm && i < n->out->size; i++) gm[i] = assign ? gy[i] * l : gm[i] + gy[i] * l;
}

/* mask [B, N] -> [B, 1, 1, N], the element order unchanged. m * L - L is
 * affine(reshape(mask), L, -L) operation for operation (x * scale + shift,
 * and adding -L is subtracting L), so it replaces the plugins' hand-written
 * version bit for bit, for any mask values: 1 -> +0, 0 -> -L. A mask has
 * B * N elements, too few to pay for the thread pool. */
ast_tensor *ast_cpu_key_mask_bias(ast_ctx *c, ast_tensor *mask, float masked_logit)
{
    char s[64];
    AST_ASSERT(mask->ndim == 2, "key_mask_bias: mask %s is not [B, N]", ast_shape_str(mask, s, sizeof s));
    AST_ASSERT(isfinite(masked_logit), "key_mask_bias: masked_logit %g is not finite", (double)masked_logit);
    ast_tensor *y = ast_empty(c, 4, (int64_t[]){mask->shape[0], 1, 1, mask->shape[1]});
    const float *m = mask->data;
    for (int64_t i = 0; i < mask->size; i++) y->data[i] = m[i] * masked_logit - masked_logit;
    ast_record(c, &(ast_node){.op = "key_mask_bias", .backward = key_mask_bias_backward, .out = y, .in = {mask},
                              .n_in = 1, .farg = {masked_logit}});
    return y;
}
