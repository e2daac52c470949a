/* The diffusion loss (docs/model.md §4.2 step 5): expression MSE over valid cells,
 * and for positions the aligned MSE (the engine's op aligned_mse), the distance-matrix
 * MSE per set or the direct MSE; the local-structure losses on request
 * (loss_structure.c); plus the plugins' extra losses (MoE load balance). */
#include "model/loss.h"
#include "model/model_internal.h"

void ast_loss_config_default(ast_loss_config *lc)
{
    *lc = (ast_loss_config){.lambda_expression = 1.0f, .lambda_position = 1.0f,
                            .position_loss = AST_POS_LOSS_ALIGNED, .structure = AST_STRUCTURE_NONE,
                            .lambda_structure = 0.1f, .structure_k = 10, .nca_temperature = 1.0f,
                            .expression_noised = 1, .positions_noised = 1};
}

/* w[b,i,j] = m_i m_j / (n_b^2 S) for the S sets with n_b >= 2 valid cells,
 * 0 elsewhere: sum(w * (D^ - D)^2) is then the mean over those sets of each
 * set's mean squared distance error over its valid pairs (0 if S = 0).
 * Built from ops where the mask is (a device keeps it there, so the step
 * reads nothing back); counts are integers, exact in float32. */
static ast_tensor *pair_weights(ast_ctx *c, ast_tensor *mask, int64_t b_n, int64_t n_n)
{
    ast_tensor *m = mask ? mask : model_all_valid(c, b_n, n_n);
    ast_tensor *nb = ast_sum_axis(c, m, 1); /* [B, 1] */
    /* 1 for n_b >= 2, else 0: min(relu(n_b - 1), 1) = 1 - relu(1 - relu(n_b - 1)) */
    ast_tensor *two_or_more = ast_affine(c, ast_relu(c, ast_affine(c, ast_relu(c, ast_affine(c, nb, 1.0f, -1.0f)),
                                                                      -1.0f, 1.0f)), -1.0f, 1.0f);
    ast_tensor *safe = model_at_least_one(c, nb);
    ast_tensor *sets = model_at_least_one(c, ast_sum(c, two_or_more));
    ast_tensor *per_set = ast_div(c, ast_div(c, two_or_more, ast_mul(c, safe, safe)), sets);
    ast_tensor *m3 = ast_reshape(c, m, 3, (int64_t[]){b_n, n_n, 1});
    ast_tensor *pairs = ast_bmm(c, m3, m3, 0, 1); /* m_i m_j: 0 or 1 */
    return ast_mul(c, pairs, ast_reshape(c, per_set, 3, (int64_t[]){b_n, 1, 1}));
}

static ast_tensor *distance_matrix_loss(ast_ctx *c, ast_tensor *pred, ast_tensor *target, ast_tensor *mask)
{
    ast_tensor *diff = ast_sub(c, ast_pdist(c, pred), ast_pdist(c, target));
    ast_tensor *w = pair_weights(c, mask, pred->shape[0], pred->shape[1]);
    return ast_sum(c, ast_mul(c, ast_mul(c, diff, diff), w));
}

static ast_tensor *position_loss(ast_ctx *c, ast_pos_loss kind, ast_tensor *pred, ast_tensor *target,
                                 ast_tensor *mask)
{
    switch (kind) {
    case AST_POS_LOSS_ALIGNED: return ast_aligned_mse(c, pred, target, mask);
    case AST_POS_LOSS_DISTANCE: return distance_matrix_loss(c, pred, target, mask);
    case AST_POS_LOSS_MSE: return ast_mse(c, pred, target, mask);
    }
    AST_ASSERT(0, "loss: unknown position loss %d", (int)kind);
    return NULL;
}

/* The structure losses loss.structure names, summed (NULL for none). */
static ast_tensor *structure_loss(ast_ctx *c, const ast_loss_config *lc, ast_tensor *pred, ast_tensor *target,
                                  ast_tensor *mask)
{
    ast_tensor *sum = NULL;
    for (int kind = AST_STRUCTURE_NCA; kind <= AST_STRUCTURE_EDGE_LOG_RATIO; kind <<= 1) {
        if (!(lc->structure & kind)) continue;
        ast_tensor *l = ast_structure_loss(c, (ast_structure)kind, pred, target, mask, lc->structure_k, lc->nca_temperature);
        sum = sum ? ast_add(c, sum, l) : l;
    }
    return sum;
}

static ast_tensor *weighted_sum(ast_ctx *c, ast_tensor *acc, ast_tensor *term, float weight)
{
    ast_tensor *t = ast_affine(c, term, weight, 0.0f);
    return acc ? ast_add(c, acc, t) : t;
}

ast_loss_parts ast_diffusion_loss(ast_ctx *c, const ast_loss_config *lc, const ast_model_out *pred,
                                  ast_tensor *expression, ast_tensor *positions, ast_tensor *mask)
{
    char s1[64], s2[64];
    AST_ASSERT(ast_same_shape(pred->expression, expression) && ast_same_shape(pred->positions, positions),
               "loss: targets %s / %s do not match the predictions", ast_shape_str(expression, s1, sizeof s1),
               ast_shape_str(positions, s2, sizeof s2));
    ast_loss_parts p = {0};
    p.expression = ast_mse(c, pred->expression, expression, mask);
    p.position = position_loss(c, lc->position_loss, pred->positions, positions, mask);
    /* Like the position loss, not weighted by t: the sampler's first step,
     * from pure noise, predicts x0 too and needs neighbourhoods most. */
    if (lc->positions_noised) p.structure = structure_loss(c, lc, pred->positions, positions, mask);
    p.moe_aux = ast_model_extra_loss(c);

    ast_tensor *total = NULL;
    if (lc->expression_noised) total = weighted_sum(c, total, p.expression, lc->lambda_expression);
    if (lc->positions_noised) total = weighted_sum(c, total, p.position, lc->lambda_position);
    if (p.structure) total = weighted_sum(c, total, p.structure, lc->lambda_structure);
    if (!total) total = ast_zeros(c, 1, (int64_t[]){1});
    p.total = p.moe_aux ? ast_add(c, total, p.moe_aux) : total;
    return p;
}

ast_tensor *ast_model_extra_loss(ast_ctx *c)
{
    ast_tensor *sum = NULL;
    for (int i = 0; i < ast_ctx_n_losses(c); i++) sum = sum ? ast_add(c, sum, ast_ctx_loss(c, i)) : ast_ctx_loss(c, i);
    return sum;
}
