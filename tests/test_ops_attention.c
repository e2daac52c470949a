/* linear_attention: the fused CPU kernel against the unfused ops it
 * replaces (the front end's path for a backend without the kernel), with
 * and without a key mask, across several blocks of cells; gradients
 * against finite differences, inputs distinct and shared; no cells. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "backend_without.h"
#include "engine/backend.h"
#include "gradcheck.h"

/* Both paths normalise with the same softmax loops; what differs is the
 * summation order of the GEMMs (K^T v over N = 70 cells, then dh = 4
 * terms per output, directly on [B, N, E] or on split heads). With O(1)
 * inputs the outputs are O(0.1-1) and the sums' float32 rounding is a few
 * 1e-7; gradients sum up to 70 products of O(1): 1e-5 absolute leaves
 * 10x room while a wrong term gives O(0.1). */
#define PARTS_TOL 1e-5f
/* Central differences with h = 1e-2 through two softmaxes and three
 * products of O(1) values, relative to gradients floored at 1e-2:
 * truncation (h^2 f''' / 6) and float32 rounding of L / h stay under 1e-3;
 * a wrong term (a missing scale, a transposed context) gives O(1). */
#define GRAD_H 1e-2f
#define GRAD_FLOOR 1e-2
#define GRAD_TOL 1e-2

enum { B = 2, N = 70, E = 12, H = 3 };

/* The CPU backend without the fused kernel, as the CUDA backend is. */
static const ast_backend *unfused_backend(void)
{
    static ast_backend b;
    static ast_op_kernel kernels[AST_N_OPS];
    return cpu_backend_without(&b, kernels, AST_OP_linear_attention, "unfused");
}

/* Set 1's last `pad` cells masked: key bias [B, 1, 1, N]. */
static ast_tensor *key_bias(ast_ctx *c, int64_t n, int pad)
{
    float m[2 * N];
    for (int64_t i = 0; i < B * n; i++) m[i] = i >= B * n - pad ? 0.0f : 1.0f;
    return ast_key_mask_bias(c, ast_tensor_from(c, 2, (int64_t[]){B, n}, m), 1e9f);
}

typedef struct run_out {
    float y[B * N * E], g[3][B * N * E];
} run_out;

static void run(const ast_backend *be, ast_tensor *const *in, int pad, run_out *o)
{
    ast_ctx *c = ast_ctx_new_on(be, 1);
    for (int i = 0; i < 3; i++) memset(in[i]->grad, 0, (size_t)in[i]->size * sizeof(float));
    ast_tensor *y = ast_linear_attention(c, in[0], in[1], in[2], pad ? key_bias(c, N, pad) : NULL, H);
    memcpy(o->y, y->data, sizeof o->y);
    ast_backward(c, ast_sum(c, ast_mul(c, y, in[0]))); /* a loss whose gradient differs per element */
    for (int i = 0; i < 3; i++) memcpy(o->g[i], in[i]->grad, sizeof o->g[i]);
    ast_ctx_free(c);
}

static void assert_close(const float *a, const float *b, const char *what, int pad)
{
    for (int i = 0; i < B * N * E; i++)
        cr_assert(fabsf(a[i] - b[i]) < PARTS_TOL, "%s, %d masked: [%d] fused %g, parts %g", what, pad, i, a[i], b[i]);
}

Test(ops_attention, fused_matches_its_parts)
{
    ast_params *p = ast_params_new(7);
    int64_t shape[3] = {B, N, E};
    ast_tensor *in[3] = {gc_input(p, "q", 3, shape, 1.0f), gc_input(p, "k", 3, shape, 1.0f), gc_input(p, "v", 3, shape, 1.0f)};
    static run_out fused, parts;
    for (int pad = 0; pad <= 9; pad += 9) {
        run(ast_backend_cpu(), in, pad, &fused);
        run(unfused_backend(), in, pad, &parts);
        assert_close(fused.y, parts.y, "output", pad);
        static const char *const names[3] = {"dq", "dk", "dv"};
        for (int i = 0; i < 3; i++) assert_close(fused.g[i], parts.g[i], names[i], pad);
    }
    ast_params_free(p);
}

/* With grad off the kernel keeps nothing and gives the same bits. */
Test(ops_attention, grad_off_gives_the_same_bits)
{
    ast_params *p = ast_params_new(8);
    int64_t shape[3] = {B, N, E};
    ast_tensor *q = gc_input(p, "q", 3, shape, 1.0f), *k = gc_input(p, "k", 3, shape, 1.0f);
    float y[2][B * N * E];
    for (int grad = 0; grad < 2; grad++) {
        ast_ctx *c = ast_ctx_new(0);
        ast_ctx_set_grad(c, grad);
        memcpy(y[grad], ast_linear_attention(c, q, k, q, key_bias(c, N, 5), H)->data, sizeof y[grad]);
        ast_ctx_free(c);
    }
    cr_assert_arr_eq(y[0], y[1], sizeof y[0]);
    ast_params_free(p);
}

/* share: 0 distinct inputs; 1 v is k; 2 q, k and v one tensor. */
typedef struct attn_case {
    int pad, share;
} attn_case;

static ast_tensor *fwd_attention(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const attn_case *f = ud;
    ast_tensor *k = f->share == 2 ? in[0] : in[1], *v = f->share ? k : in[2];
    return ast_linear_attention(c, in[0], k, v, f->pad ? key_bias(c, 9, f->pad) : NULL, 2);
}

Test(ops_attention, gradients)
{
    const attn_case cases[] = {{0, 0}, {3, 0}, {2, 1}, {0, 2}};
    for (int t = 0; t < 4; t++) {
        ast_params *p = ast_params_new(40 + t);
        int64_t shape[3] = {B, 9, 6};
        ast_tensor *in[3] = {gc_input(p, "q", 3, shape, 1.0f), gc_input(p, "k", 3, shape, 1.0f),
                             gc_input(p, "v", 3, shape, 1.0f)};
        gc_result r = gc_check(fwd_attention, in, 3, (void *)&cases[t], GRAD_H, GRAD_FLOOR);
        cr_assert_lt(r.max_err, GRAD_TOL, "case %d: input %d[%lld] analytic %g numeric %g", t, r.worst_input,
                     (long long)r.worst_index, r.analytic, r.numeric);
        ast_params_free(p);
    }
}

/* Sets of no cells: an empty output and empty gradients, no softmax over
 * an empty axis. */
Test(ops_attention, no_cells)
{
    ast_params *p = ast_params_new(9);
    int64_t shape[3] = {B, 0, E};
    ast_tensor *q = gc_input(p, "q", 3, shape, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = ast_linear_attention(c, q, q, q, NULL, H);
    cr_assert_eq(y->size, 0);
    ast_backward(c, ast_sum(c, y));
    ast_ctx_free(c);
    ast_params_free(p);
}
