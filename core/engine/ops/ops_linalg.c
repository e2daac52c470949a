/* The CPU kernels of linear and batched matmul (ops/dispatch_linalg.c):
 * forward and backward through ast_gemm (row-major), in the context's
 * precision: float32 (OpenBLAS) or bf16 operands with float32 accumulation
 * (oneDNN) for every GEMM, forward and backward. */

#include "engine/backend.h"
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
static void linear_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *x = n->in[0], *y = n->out;
    int rows = (int)ast_rows(x), in = (int)ast_cols(x), out = (int)ast_cols(y);
    float *gx = g->g[0], *gw = g->g[1], *gb = g->g[2];
    ast_precision p = ast_ctx_precision(c);
    if (gx) ast_gemm(p, 0, 0, rows, in, out, y->grad, out, n->in[1]->data, in, g->assign[0] ? 0.0f : 1.0f, gx, in, NULL);
    if (gw) ast_gemm(p, 1, 0, out, in, rows, y->grad, out, x->data, in, 1.0f, gw, in, NULL);
    if (gb) ast_parallel_for(out, ast_row_grain(rows), bias_grad_range, &(bias_args){y->grad, gb, rows, out});
}

static void linear_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    int rows = (int)ast_rows(x), in = (int)ast_cols(x), out = (int)w->shape[0];
    ast_gemm(ast_ctx_precision(c), 0, 1, rows, out, in, x->data, in, w->data, in, 0.0f, n->out->data, out,
             b ? b->data : NULL);
}

static void mm_forward(ast_ctx *c, ast_node *n)
{
    const ast_mm_shape *s = n->saved;
    const float *a = n->in[0]->data, *b = n->in[1]->data;
    float *cmat = n->out->data;
    ast_precision p = ast_ctx_precision(c);
    int lda = s->ta ? (int)s->m : (int)s->k, ldb = s->tb ? (int)s->k : (int)s->n;
    for (int64_t i = 0; i < s->batch; i++)
        ast_gemm(p, s->ta, s->tb, (int)s->m, (int)s->n, (int)s->k, a + i * s->m * s->k, lda, b + i * s->k * s->n,
                 ldb, 0.0f, cmat + i * s->m * s->n, (int)s->n, NULL);
}

/* dA = dC op(B)^T (laid out as A is), dB = op(A)^T dC (laid out as B is). */
static void mm_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    const ast_mm_shape *s = n->saved;
    ast_tensor *a = n->in[0], *b = n->in[1];
    float *ga = g->g[0], *gb = g->g[1], *gc = n->out->grad;
    float beta_a = g->assign[0] ? 0.0f : 1.0f, beta_b = g->assign[1] ? 0.0f : 1.0f; /* b == a: assign[1] is 0 */
    int m = (int)s->m, nn = (int)s->n, k = (int)s->k;
    ast_precision p = ast_ctx_precision(c);
    for (int64_t i = 0; i < s->batch; i++) {
        const float *dc = gc + i * s->m * s->n, *ad = a->data + i * s->m * s->k, *bd = b->data + i * s->k * s->n;
        if (ga) {
            float *d = ga + i * s->m * s->k;
            if (!s->ta) /* dA[M,K] = dC[M,N] op(B)^T */
                ast_gemm(p, 0, !s->tb, m, k, nn, dc, nn, bd, s->tb ? k : nn, beta_a, d, k, NULL);
            else /* A stored [K,M]: dA = op(B) dC^T */
                ast_gemm(p, s->tb, 1, k, m, nn, bd, s->tb ? k : nn, dc, nn, beta_a, d, m, NULL);
        }
        if (gb) {
            float *d = gb + i * s->k * s->n;
            if (!s->tb) /* dB[K,N] = op(A)^T dC */
                ast_gemm(p, !s->ta, 0, k, nn, m, ad, s->ta ? m : k, dc, nn, beta_b, d, nn, NULL);
            else /* B stored [N,K]: dB = dC^T op(A) */
                ast_gemm(p, 1, s->ta, nn, k, m, dc, nn, ad, s->ta ? m : k, beta_b, d, k, NULL);
        }
    }
}

void ast_cpu_linalg_kernels(ast_op_kernel *t)
{
    t[AST_OP_linear] = (ast_op_kernel){.forward = linear_forward, .backward = linear_backward, .assigns = 1};
    t[AST_OP_bmm] = (ast_op_kernel){.forward = mm_forward, .backward = mm_backward, .assigns = 3};
}
