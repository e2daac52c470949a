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

/* Which local-structure losses join the total (loss.structure): flags. */
typedef enum ast_structure {
    AST_STRUCTURE_NONE = 0,
    AST_STRUCTURE_NCA = 1,            /* soft neighbour retrieval of the true kNN */
    AST_STRUCTURE_EDGE_LOG_RATIO = 2, /* log-ratios of the true kNN edges' lengths */
    AST_STRUCTURE_BOTH = 3
} ast_structure;

typedef struct ast_loss_config {
    float lambda_expression;    /* loss.lambda_expression (1.0) */
    float lambda_position;      /* loss.lambda_position (1.0) */
    ast_pos_loss position_loss; /* loss.position_loss (aligned) */
    ast_structure structure;    /* loss.structure (none) */
    float lambda_structure;     /* loss.lambda_structure (0.1), on each structure loss */
    int structure_k;            /* loss.structure_k (10): the true neighbours per cell */
    float nca_temperature;      /* loss.nca_temperature (1.0): tau of ast_structure_loss */
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
    ast_tensor *structure;  /* the structure losses, unweighted sum (NULL if none) */
    ast_tensor *moe_aux;    /* sum of the losses plugins published (NULL if none) */
} ast_loss_parts;

/* Compares the model's x0 predictions with the clean targets expression
 * [B,N,G] and positions [B,N,3]; mask [B,N] (NULL = all valid). The
 * plugins' extra losses (ast_model_extra_loss) are added to the total. */
ast_loss_parts ast_diffusion_loss(ast_ctx *c, const ast_loss_config *lc, const ast_model_out *pred,
                                  ast_tensor *expression, ast_tensor *positions, ast_tensor *mask);

/* The position MSE up to a rigid motion is the engine's op ast_aligned_mse
 * (alphast/ops.def): per set, both centred over the valid cells and pred
 * turned by the orthogonal R (reflections allowed: chirality is not
 * identifiable from expression) that fits it best; on every backend, so a
 * device step never waits for the host. */

/* A local-structure loss on positions pred against target [B, N, 3], per set
 * b over its n_b >= 2 valid cells (mask [B, N], 0 = padding, NULL = all
 * valid), each cell's true neighbours its min(k, n_b - 1) nearest by target:
 * - AST_STRUCTURE_NCA: L_b = -mean_i log sum_{j in kNN(i)} p_ij, p_ij the
 *   softmax over j != i of -|p_i - p_j|^2 / t, t = tau * (mean squared true
 *   kNN edge) * S(pred) / S(target), S the mean squared pairwise distance;
 * - AST_STRUCTURE_EDGE_LOG_RATIO: L_b = mean over the kNN edges of
 *   (r_e - mean r)^2, r_e = log |p_i - p_j| - log |q_i - q_j|.
 * Both are invariant to a rotation, reflection, shift or scaling of pred
 * (loss_structure.c argues each). Returns the mean of L_b over the sets
 * with a scale ([1]; 0 if none); the gradient flows into pred only. */
ast_tensor *ast_structure_loss(ast_ctx *c, ast_structure kind, ast_tensor *pred, ast_tensor *target,
                               ast_tensor *mask, int k, double tau);

#endif
