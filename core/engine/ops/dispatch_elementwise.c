/* Elementwise ops: broadcasting add/sub/mul/div, the unary activations
 * (affine, relu, gelu, sigmoid, softplus, dropout, silu, exp) and the key
 * mask's attention bias. Shapes, broadcast plans, outputs and tape nodes;
 * the kernels are the backends' (ops/ops_elementwise.c,
 * cuda/ops_elementwise.cu). A broadcast operand's gradient sums over the
 * dims it repeats along. */
#include <math.h>

#include "engine/kernels.h"
#include "engine/ops/ops_plan.h"

/* saved: the ast_bcast_dims (ops_plan.h). */
static ast_tensor *binary(ast_ctx *c, int op, ast_tensor *a, ast_tensor *b)
{
    int64_t out[AST_MAX_DIMS];
    ast_bcast_dims *dims = ast_alloc(c, sizeof *dims);
    ast_plan_broadcast(ast_op_name(op), a, b, out, dims);
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    return ast_op_run(c, op, &(ast_node){.out = ast_empty(c, nd, out + AST_MAX_DIMS - nd), .in = {a, b}, .n_in = 2,
                                         .saved = dims});
}

ast_tensor *ast_add(ast_ctx *c, ast_tensor *a, ast_tensor *b) { return binary(c, AST_OP_add, a, b); }
ast_tensor *ast_sub(ast_ctx *c, ast_tensor *a, ast_tensor *b) { return binary(c, AST_OP_sub, a, b); }
ast_tensor *ast_mul(ast_ctx *c, ast_tensor *a, ast_tensor *b) { return binary(c, AST_OP_mul, a, b); }
ast_tensor *ast_div(ast_ctx *c, ast_tensor *a, ast_tensor *b) { return binary(c, AST_OP_div, a, b); }

/* The outputs of unary ops: each op writes every element. farg as the op's
 * kernels read it. */
static ast_tensor *unary(ast_ctx *c, int op, ast_tensor *x, float farg0, float farg1)
{
    return ast_op_run(c, op, &(ast_node){.out = ast_empty(c, x->ndim, x->shape), .in = {x}, .n_in = 1,
                                         .farg = {farg0, farg1}});
}

/* farg: scale, shift. */
ast_tensor *ast_affine(ast_ctx *c, ast_tensor *x, float scale, float shift)
{
    return unary(c, AST_OP_affine, x, scale, shift);
}

ast_tensor *ast_relu(ast_ctx *c, ast_tensor *x) { return unary(c, AST_OP_relu, x, 0.0f, 0.0f); }
ast_tensor *ast_gelu(ast_ctx *c, ast_tensor *x) { return unary(c, AST_OP_gelu, x, 0.0f, 0.0f); }
ast_tensor *ast_sigmoid(ast_ctx *c, ast_tensor *x) { return unary(c, AST_OP_sigmoid, x, 0.0f, 0.0f); }
ast_tensor *ast_softplus(ast_ctx *c, ast_tensor *x) { return unary(c, AST_OP_softplus, x, 0.0f, 0.0f); }
ast_tensor *ast_silu(ast_ctx *c, ast_tensor *x) { return unary(c, AST_OP_silu, x, 0.0f, 0.0f); }
ast_tensor *ast_exp(ast_ctx *c, ast_tensor *x) { return unary(c, AST_OP_exp, x, 0.0f, 0.0f); }

/* Returns x itself when it is the identity, so eval draws nothing from the
 * RNG and costs nothing. One key from the step's RNG per call (ast_ctx_key)
 * keys the mask: iarg[0] the key's bits (a host kernel's), saved its slot
 * in backend memory (a device kernel's: a graph's replay brings a new one),
 * iarg[1] drop_below (drop where the element's 24-bit hash is below it),
 * farg[0] the scale. */
ast_tensor *ast_dropout(ast_ctx *c, ast_tensor *x, float p)
{
    AST_ASSERT(p >= 0.0f && p <= 1.0f, "dropout probability %g is outside [0, 1]", (double)p);
    if (!ast_training(c) || p == 0.0f) return x;
    const uint64_t *key_at;
    uint64_t key = ast_ctx_key(c, &key_at);
    int64_t drop_below = (int64_t)ceil((double)p * 16777216.0);
    return ast_op_run(c, AST_OP_dropout, &(ast_node){.out = ast_empty(c, x->ndim, x->shape), .in = {x}, .n_in = 1,
                                                     .saved = (void *)key_at, .iarg = {(int64_t)key, drop_below},
                                                     .farg = {p < 1.0f ? 1.0f / (1.0f - p) : 0.0f}});
}

/* mask [B, N] -> [B, 1, 1, N], the element order unchanged. farg[0]:
 * masked_logit, the derivative of every output by its mask element. */
ast_tensor *ast_key_mask_bias(ast_ctx *c, ast_tensor *mask, float masked_logit)
{
    char s[64];
    AST_ASSERT(mask->ndim == 2, "key_mask_bias: mask %s is not [B, N]", ast_shape_str(mask, s, sizeof s));
    AST_ASSERT(isfinite(masked_logit), "key_mask_bias: masked_logit %g is not finite", (double)masked_logit);
    ast_tensor *y = ast_empty(c, 4, (int64_t[]){mask->shape[0], 1, 1, mask->shape[1]});
    return ast_op_run(c, AST_OP_key_mask_bias, &(ast_node){.out = y, .in = {mask}, .n_in = 1, .farg = {masked_logit}});
}
