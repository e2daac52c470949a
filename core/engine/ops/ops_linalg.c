/* linear, matmul and batched matmul: forward and backward through
 * ast_gemm (row-major), in the context's precision: float32 (OpenBLAS) or
 * bf16 operands with float32 accumulation (oneDNN) for every GEMM, forward
 * and backward. Each backward adds into the input grads. */

#include "engine/engine.h"
#include "engine/ops/ops_plan.h"

/* The bias gradient of a linear, on the thread pool: dy summed down the
 * rows, split by column so each column sums in row order on one thread.
 * (The forward's bias goes in with the GEMM: ast_gemm.) */
typedef struct bias_args {
    const float *src;
    float *dst;
    int64_t rows, out;
} bias_args;

static void bias_grad_range(void *arg, int64_t lo, int64_t hi)
{
    const bias_args *a = arg;
    for (int64_t r = 0; r < a->rows; r++)
        for (int64_t o = lo; o < hi; o++) a->dst[o] += a->src[r * a->out + o];
}

/* y[R, out] = x[R, in] W[out, in]^T + b */
static void linear_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2], *y = n->out;
    int rows = (int)ast_rows(x), in = (int)ast_cols(x), out = (int)ast_cols(y);
    int fresh;
    ast_precision p = ast_ctx_precision(c);
    float *gx = ast_grad_fresh(c, x, &fresh), *gw = ast_grad(c, w), *gb = ast_grad(c, b);
    if (gx) ast_gemm(p, 0, 0, rows, in, out, y->grad, out, w->data, in, fresh ? 0.0f : 1.0f, gx, in, NULL);
    if (gw) ast_gemm(p, 1, 0, out, in, rows, y->grad, out, x->data, in, 1.0f, gw, in, NULL);
    if (gb) ast_parallel_for(out, ast_row_grain(rows), bias_grad_range, &(bias_args){y->grad, gb, rows, out});
}

ast_tensor *ast_cpu_linear(ast_ctx *c, ast_tensor *x, ast_tensor *w, ast_tensor *b)
{
    int64_t in = ast_cols(x), out = w->shape[0], shape[AST_MAX_DIMS];
    ast_plan_linear(x, w, b, shape);
    ast_tensor *y = ast_empty(c, x->ndim, shape);
    int rows = (int)ast_rows(x);
    ast_gemm(ast_ctx_precision(c), 0, 1, rows, (int)out, (int)in, x->data, (int)in, w->data, (int)in, 0.0f, y->data,
             (int)out, b ? b->data : NULL);
    ast_record(c, &(ast_node){.op = "linear", .backward = linear_backward, .out = y, .in = {x, w, b}, .n_in = 3});
    return y;
}


static void mm_forward(ast_precision p, const ast_mm_shape *s, const float *a, const float *b, float *cmat)
{
    int lda = s->ta ? (int)s->m : (int)s->k, ldb = s->tb ? (int)s->k : (int)s->n;
    for (int64_t i = 0; i < s->batch; i++)
        ast_gemm(p, s->ta, s->tb, (int)s->m, (int)s->n, (int)s->k, a + i * s->m * s->k, lda, b + i * s->k * s->n,
                 ldb, 0.0f, cmat + i * s->m * s->n, (int)s->n, NULL);
}

/* dA = dC op(B)^T (laid out as A is), dB = op(A)^T dC (laid out as B is). */
static void mm_backward(ast_ctx *c, const ast_node *n)
{
    const ast_mm_shape *s = n->saved;
    ast_tensor *a = n->in[0], *b = n->in[1];
    int fresh_a, fresh_b;
    float *ga = ast_grad_fresh(c, a, &fresh_a), *gb = ast_grad_fresh(c, b, &fresh_b), *gc = n->out->grad;
    float beta_a = fresh_a ? 0.0f : 1.0f, beta_b = fresh_b ? 0.0f : 1.0f; /* b == a: fresh_b is 0 */
    int m = (int)s->m, nn = (int)s->n, k = (int)s->k;
    ast_precision p = ast_ctx_precision(c);
    for (int64_t i = 0; i < s->batch; i++) {
        const float *dc = gc + i * s->m * s->n, *ad = a->data + i * s->m * s->k, *bd = b->data + i * s->k * s->n;
        if (ga) {
            float *g = ga + i * s->m * s->k;
            if (!s->ta) /* dA[M,K] = dC[M,N] op(B)^T */
                ast_gemm(p, 0, !s->tb, m, k, nn, dc, nn, bd, s->tb ? k : nn, beta_a, g, k, NULL);
            else /* A stored [K,M]: dA = op(B) dC^T */
                ast_gemm(p, s->tb, 1, k, m, nn, bd, s->tb ? k : nn, dc, nn, beta_a, g, m, NULL);
        }
        if (gb) {
            float *g = gb + i * s->k * s->n;
            if (!s->tb) /* dB[K,N] = op(A)^T dC */
                ast_gemm(p, !s->ta, 0, k, nn, m, ad, s->ta ? m : k, dc, nn, beta_b, g, nn, NULL);
            else /* B stored [N,K]: dB = dC^T op(A) */
                ast_gemm(p, 1, s->ta, nn, k, m, dc, nn, ad, s->ta ? m : k, beta_b, g, k, NULL);
        }
    }
}

ast_tensor *ast_cpu_bmm(ast_ctx *c, ast_tensor *a, ast_tensor *b, int trans_a, int trans_b)
{
    int64_t shape[AST_MAX_DIMS];
    ast_mm_shape *s = ast_plan_bmm(c, a, b, trans_a, trans_b, shape);
    ast_tensor *y = ast_empty(c, a->ndim, shape);
    mm_forward(ast_ctx_precision(c), s, a->data, b->data, y->data);
    ast_record(c, &(ast_node){.op = "bmm", .backward = mm_backward, .out = y, .in = {a, b}, .n_in = 2, .saved = s});
    return y;
}

ast_tensor *ast_cpu_matmul(ast_ctx *c, ast_tensor *a, ast_tensor *b)
{
    AST_ASSERT(a->ndim == 2 && b->ndim == 2, "matmul takes 2-D tensors (use bmm for batches)");
    return ast_bmm(c, a, b, 0, 0);
}
