/* alphast/loss.h: the diffusion training loss (docs/model.md §4.2 step 5). */
#ifndef ALPHAST_LOSS_H
#define ALPHAST_LOSS_H

#include "model/model.h"

/* How predicted positions are compared with the clean ones (loss.position_loss). */
typedef enum ast_pos_loss {
    AST_POS_LOSS_ALIGNED,  /* MSE after the optimal rigid alignment per set (ast_aligned_mse) */
    AST_POS_LOSS_DISTANCE, /* MSE of the pairwise distances per set (the reference) */
    AST_POS_LOSS_MSE       /* MSE of the coordinates as they are */
} ast_pos_loss;

typedef struct ast_loss_config {
    float lambda_expression;    /* loss.lambda_expression (1.0) */
    float lambda_position;      /* loss.lambda_position (1.0) */
    ast_pos_loss position_loss; /* loss.position_loss (aligned) */
    /* Which modalities were noised (training mode): only those enter the total. */
    int expression_noised;
    int positions_noised;
} ast_loss_config;

/* The defaults above, joint mode (both modalities noised). */
void ast_loss_config_default(ast_loss_config *lc);

/* Scalars [1] on the step's tape; total is what backward starts from. */
typedef struct ast_loss_parts {
    ast_tensor *total;
    ast_tensor *expression; /* MSE over valid cells */
    ast_tensor *position;   /* aligned MSE, distance-matrix MSE or direct MSE */
    ast_tensor *moe_aux;    /* sum of the losses plugins published (NULL if none) */
} ast_loss_parts;

/* Compares the model's x0 predictions with the clean targets expression
 * [B,N,G] and positions [B,N,3]; mask [B,N] (NULL = all valid). The
 * plugins' extra losses (ast_model_extra_loss) are added to the total. */
ast_loss_parts ast_diffusion_loss(ast_ctx *c, const ast_loss_config *lc, const ast_model_out *pred,
                                  ast_tensor *expression, ast_tensor *positions, ast_tensor *mask);

/* Position MSE up to a rigid motion: per set b of pred, target [B, N, 3]
 * with n_b = sum_i m_i >= 2 (mask [B, N] of weights m_i, NULL = all 1),
 * both centred over the valid cells and pred turned by the orthogonal R_b
 * (reflections allowed: chirality is not identifiable from expression)
 * that minimises L_b = sum_i m_i |R_b p_i - q_i|^2 / (3 n_b). Returns the
 * mean of L_b over those sets ([1]; 0 if none). The gradient flows into
 * pred only, not into target or mask. */
ast_tensor *ast_aligned_mse(ast_ctx *c, ast_tensor *pred, ast_tensor *target, ast_tensor *mask);

#endif
