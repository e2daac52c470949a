/* alphast/loss.h: the diffusion training loss (spec §4.2 step 5). */
#ifndef ALPHAST_LOSS_H
#define ALPHAST_LOSS_H

#include "alphast/model.h"

typedef struct ast_loss_config {
    float lambda_expression; /* loss.lambda_expression (1.0) */
    float lambda_position;   /* loss.lambda_position (1.0) */
    int use_distance_matrix; /* loss.use_distance_matrix (1): compare pairwise distances */
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
    ast_tensor *position;   /* distance-matrix MSE, or direct MSE */
    ast_tensor *moe_aux;    /* sum of the losses plugins published (NULL if none) */
} ast_loss_parts;

/* Compares the model's x0 predictions with the clean targets expression
 * [B,N,G] and positions [B,N,3]; mask [B,N] (NULL = all valid). The
 * plugins' extra losses (ast_ctx_extra_loss) are added to the total. */
ast_loss_parts ast_diffusion_loss(ast_ctx *c, const ast_loss_config *lc, const ast_model_out *pred,
                                  ast_tensor *expression, ast_tensor *positions, ast_tensor *mask);

#endif
