/* Fused attention: linear_attention, the core of lucidrains' linear
 * attention in one op. Shapes, output and tape node; the kernels are the
 * backends' (ops/ops_attention.c). A backend without them runs the same
 * computation as the unfused ops. */
#include <math.h>

#include "engine/kernels.h"

/* Keys [B, H, N, dh] softmaxed over the cells, each cell's logits shifted
 * by its bias (B N values: [B, 1, N, 1] on the key axis). */
static ast_tensor *key_softmax(ast_ctx *c, ast_tensor *k, ast_tensor *bias)
{
    if (bias) k = ast_add(c, k, ast_reshape(c, bias, 4, (int64_t[]){k->shape[0], 1, k->shape[2], 1}));
    return ast_softmax(c, k, 2);
}

static ast_tensor *unfused(ast_ctx *c, ast_tensor *q, ast_tensor *k, ast_tensor *v, ast_tensor *bias, int heads)
{
    q = ast_split_heads(c, q, heads), k = ast_split_heads(c, k, heads), v = ast_split_heads(c, v, heads);
    q = ast_affine(c, ast_softmax(c, q, -1), 1.0f / sqrtf((float)q->shape[3]), 0.0f);
    ast_tensor *context = ast_bmm(c, key_softmax(c, k, bias), v, 1, 0); /* [B, H, dh, dh] */
    return ast_merge_heads(c, ast_bmm(c, q, context, 0, 0));
}

static void check_shapes(const ast_tensor *q, const ast_tensor *k, const ast_tensor *v, const ast_tensor *bias, int heads)
{
    char s1[64], s2[64], s3[64];
    AST_ASSERT(q->ndim == 3 && ast_same_shape(q, k) && ast_same_shape(q, v), "linear_attention: q %s, k %s, v %s",
               ast_shape_str(q, s1, sizeof s1), ast_shape_str(k, s2, sizeof s2), ast_shape_str(v, s3, sizeof s3));
    AST_ASSERT(heads > 0 && q->shape[2] % heads == 0, "linear_attention: %d heads do not divide q %s", heads,
               ast_shape_str(q, s1, sizeof s1));
    AST_ASSERT(!bias || bias->size == q->shape[0] * q->shape[1], "linear_attention: bias %s for q %s",
               ast_shape_str(bias, s1, sizeof s1), ast_shape_str(q, s2, sizeof s2));
    AST_ASSERT(!bias || !(bias->flags & AST_REQUIRES_GRAD), "linear_attention: the bias gets no gradient");
}

/* iarg[0] = heads; farg[0] = dh^-1/2. */
ast_tensor *ast_linear_attention(ast_ctx *c, ast_tensor *q, ast_tensor *k, ast_tensor *v, ast_tensor *bias, int heads)
{
    check_shapes(q, k, v, bias, heads);
    if (!ast_op_supported(c, AST_OP_linear_attention)) return unfused(c, q, k, v, bias, heads);
    float scale = 1.0f / sqrtf((float)(q->shape[2] / heads));
    return ast_op_run(c, AST_OP_linear_attention, &(ast_node){.out = ast_empty(c, 3, q->shape), .in = {q, k, v, bias},
                                                              .n_in = bias ? 4 : 3, .iarg = {heads}, .farg = {scale}});
}
