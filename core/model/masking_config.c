/* The masking.* keys (docs/model.md §5, §9.4, plus mask_conditioning and
 * reconstruction_target) into an ast_masking_config. */
#include <string.h>

#include "model/masking.h"

void ast_masking_config_default(ast_masking_config *mc)
{
    *mc = (ast_masking_config){.expression_mask_ratio = 0.4f, .position_mask_ratio = 0.33f,
                               .strategy = AST_MASK_RANDOM, .mask_expression = 1, .mask_position = 1,
                               .reconstruction_weight = 0.5f, .masking_probability = 0.5f,
                               .progressive_steps = 10000, .target = AST_RECON_CLEAN};
}

static ast_mask_strategy strategy_of(const char *name)
{
    return !strcmp(name, "block") ? AST_MASK_BLOCK : !strcmp(name, "structured") ? AST_MASK_STRUCTURED : AST_MASK_RANDOM;
}

int ast_masking_covers(const ast_masking_config *mc, ast_train_mode mode, int modality)
{
    int on = modality == AST_MOD_EXPR ? mc->mask_expression : mc->mask_position;
    return on && (ast_mode_noises(mode, modality) || mc->mask_conditioning);
}

/* An enabled module that can mask nothing only adds G + 3 idle parameters:
 * almost certainly not what the config meant. */
static int check_something_masked(const ast_cfg *cfg, ast_train_mode mode, const ast_masking_config *mc, ast_error *e)
{
    if (!mc->enable || ast_masking_covers(mc, mode, AST_MOD_EXPR) || ast_masking_covers(mc, mode, AST_MOD_POS))
        return 0;
    const ast_cfg_node *at = ast_cfg_get(cfg, "masking.enable");
    ast_error_set(e, "%s: masking.enable: nothing can be masked in training_mode %s with mask_expression %s and "
                  "mask_position %s (the clean conditioning modality needs masking.mask_conditioning: true); "
                  "enable the generated modality's switch or set masking.enable: false",
                  at ? at->where : "config", ast_mode_name(mode), mc->mask_expression ? "true" : "false",
                  mc->mask_position ? "true" : "false");
    return -1;
}

int ast_masking_config_from_cfg(const ast_cfg *cfg, ast_train_mode mode, ast_masking_config *mc, ast_error *e)
{
    ast_masking_config_default(mc);
    mc->enable = ast_cfg_bool(cfg, "masking.enable");
    mc->expression_mask_ratio = (float)ast_cfg_float(cfg, "masking.expression_mask_ratio");
    mc->position_mask_ratio = (float)ast_cfg_float(cfg, "masking.position_mask_ratio");
    mc->strategy = strategy_of(ast_cfg_str(cfg, "masking.mask_strategy"));
    mc->mask_expression = ast_cfg_bool(cfg, "masking.mask_expression");
    mc->mask_position = ast_cfg_bool(cfg, "masking.mask_position");
    mc->reconstruction_weight = (float)ast_cfg_float(cfg, "masking.reconstruction_weight");
    mc->masking_probability = (float)ast_cfg_float(cfg, "masking.masking_probability");
    mc->progressive = ast_cfg_bool(cfg, "masking.progressive_masking");
    mc->progressive_steps = ast_cfg_int(cfg, "masking.progressive_steps");
    mc->mask_conditioning = ast_cfg_bool(cfg, "masking.mask_conditioning");
    mc->target = strcmp(ast_cfg_str(cfg, "masking.reconstruction_target"), "input") ? AST_RECON_CLEAN : AST_RECON_INPUT;
    return check_something_masked(cfg, mode, mc, e);
}
