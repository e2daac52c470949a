/* grouped_linear: one linear per group of consecutive rows (a mixture of
 * experts' tokens, sorted by expert), forward and backward each as one job
 * on the thread pool. The rows of all groups form one line cut into equal
 * parts, one per thread (fewer for small work); a part runs one
 * single-threaded GEMM per group it overlaps. So 64 experts of ~64 rows fill the cores in one
 * hand-off and each expert's weights are packed by one thread, where a
 * linear per expert would split each small GEMM over the threads, one
 * expert after the other. The weight gradients are cut by output rows
 * instead (their sum runs down the group's rows), so no two threads ever
 * write the same element. */
#include <string.h>

#include "engine/backend.h"
#include "engine/ops/ops_plan.h"

/* Multiply-adds below which a second part costs more than it saves: the
 * grain of ast_sgemm (gemm.c), measured at the demo size. */
#define GROUPED_GRAIN_MACS ((int64_t)1 << 19)

typedef struct grouped_saved {
    ast_groups g;
    int parts; /* the split, the same forward and backward */
} grouped_saved;

typedef struct grouped_args {
    const grouped_saved *s;
    int64_t rows, in, out;
    const float *x, *dy;
    float *y, *dx;
    float dx_beta; /* 0 when dx is fresh (assigned), else 1 (added) */
    float **gw, **gb; /* [n] gradient of each weight and bias (NULL: none needed), or NULL: no group's */
} grouped_args;

/* The group holding row r (offsets[g] <= r < offsets[g + 1]: empty groups
 * never hold one), or n when r is past the last row. */
static int group_of(const grouped_saved *s, int64_t r)
{
    int lo = 0, hi = s->g.n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (s->g.offsets[mid + 1] > r) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* Rows [r0, r1) of part p of the row line. */
static void part_rows(const grouped_args *a, int64_t p, int64_t *r0, int64_t *r1)
{
    *r0 = a->rows * p / a->s->parts;
    *r1 = a->rows * (p + 1) / a->s->parts;
}

/* y[r] = x[r] w[g]^T + b[g] for the rows of each part, a GEMM per group. */
static void forward_parts(void *arg, int64_t lo, int64_t hi)
{
    const grouped_args *a = arg;
    const grouped_saved *s = a->s;
    int in = (int)a->in, out = (int)a->out;
    for (int64_t p = lo; p < hi; p++) {
        int64_t r, end;
        part_rows(a, p, &r, &end);
        for (int g = group_of(s, r); r < end; g++) {
            int64_t stop = s->g.offsets[g + 1] < end ? s->g.offsets[g + 1] : end;
            if (stop > r)
                ast_sgemm_bias(0, 1, (int)(stop - r), out, in, 1.0f, a->x + r * in, in, s->g.w[g]->data, in, 0.0f,
                               a->y + r * out, out, s->g.b ? s->g.b[g]->data : NULL);
            r = stop;
        }
    }
}

/* dx[r] (+)= dy[r] w[g] for the rows of part p. */
static void input_grad_part(const grouped_args *a, int64_t p)
{
    const grouped_saved *s = a->s;
    int in = (int)a->in, out = (int)a->out;
    int64_t r, end;
    part_rows(a, p, &r, &end);
    for (int g = group_of(s, r); r < end; g++) {
        int64_t stop = s->g.offsets[g + 1] < end ? s->g.offsets[g + 1] : end;
        if (stop > r)
            ast_sgemm(0, 0, (int)(stop - r), in, out, 1.0f, a->dy + r * out, out, s->g.w[g]->data, in, a->dx_beta,
                      a->dx + r * in, in);
        r = stop;
    }
}

static int64_t ceil_div(int64_t v, int64_t d) { return v <= 0 ? 0 : (v + d - 1) / d; }

/* Output rows [o0, o1) of group g: dw[g] += dy_g^T x_g and db[g] += the
 * column sums of dy_g, in row order. */
static void weight_grad_rows(const grouped_args *a, int g, int64_t o0, int64_t o1)
{
    const grouped_saved *s = a->s;
    int64_t first = s->g.offsets[g], count = s->g.offsets[g + 1] - first, in = a->in, out = a->out;
    const float *dy = a->dy + first * out;
    float *gw = a->gw ? a->gw[g] : NULL, *gb = a->gb ? a->gb[g] : NULL;
    if (gw)
        ast_sgemm(1, 0, (int)(o1 - o0), (int)in, (int)count, 1.0f, dy + o0, (int)out, a->x + first * in, (int)in,
                  1.0f, gw + o0 * in, (int)in);
    for (int64_t r = 0; gb && r < count; r++)
        for (int64_t o = o0; o < o1; o++) gb[o] += dy[r * out + o];
}

/* The weight gradients of part p. Their cost line gives group g the span
 * [offsets[g] * out, offsets[g + 1] * out), one stretch of count_g per
 * output row (the GEMM's inner length); a row belongs to the part where its
 * stretch starts, so the parts cost the same and each row has one owner. */
static void weight_grad_part(const grouped_args *a, int64_t p)
{
    const grouped_saved *s = a->s;
    if (!a->out) return; /* no output rows: nothing to own */
    int64_t line = a->rows * a->out, lo = line * p / s->parts, hi = line * (p + 1) / s->parts;
    for (int g = group_of(s, lo / a->out); g < s->g.n && s->g.offsets[g] * a->out < hi; g++) {
        int64_t base = s->g.offsets[g] * a->out, count = s->g.offsets[g + 1] - s->g.offsets[g];
        if (!count) continue;
        int64_t o0 = ceil_div(lo - base, count), o1 = ceil_div(hi - base, count);
        if (o1 > a->out) o1 = a->out;
        if (o1 > o0) weight_grad_rows(a, g, o0, o1);
    }
}

static void backward_parts(void *arg, int64_t lo, int64_t hi)
{
    const grouped_args *a = arg;
    for (int64_t p = lo; p < hi; p++) {
        if (a->dx) input_grad_part(a, p);
        if (a->gw || a->gb) weight_grad_part(a, p);
    }
}

/* The node's groups and their split into parts (as many as pay for
 * themselves, at most the pool's threads). */
static grouped_saved split_of(const ast_node *n)
{
    grouped_saved s = {.g = *(const ast_groups *)n->saved};
    int64_t parts = ast_rows(n->in[0]) * ast_cols(n->in[0]) * ast_cols(n->out) / GROUPED_GRAIN_MACS;
    int64_t threads = ast_parallel_threads();
    s.parts = (int)(parts < 1 ? 1 : parts > threads ? threads : parts);
    return s;
}

static void grouped_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    grouped_saved s = split_of(n);
    ast_tensor *x = n->in[0];
    grouped_args a = {.s = &s, .rows = ast_rows(x), .in = ast_cols(x), .out = ast_cols(n->out), .x = x->data,
                      .dy = n->out->grad, .dx = g->g[0], .dx_beta = g->assign[0] ? 0.0f : 1.0f, .gw = s.g.gw,
                      .gb = s.g.gb};
    ast_parallel_for(s.parts, 1, backward_parts, &a);
}

static void grouped_forward(ast_ctx *c, ast_node *n)
{
    grouped_saved s = split_of(n);
    ast_tensor *x = n->in[0];
    grouped_args a = {.s = &s, .rows = ast_rows(x), .in = ast_cols(x), .out = ast_cols(n->out), .x = x->data,
                      .y = n->out->data};
    ast_parallel_for(s.parts, 1, forward_parts, &a);
}

void ast_cpu_grouped_kernels(ast_op_kernel *t)
{
    t[AST_OP_grouped_linear] = (ast_op_kernel){.forward = grouped_forward, .backward = grouped_backward, .assigns = 1};
}
