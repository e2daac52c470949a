/* What training tests share: a tiny config over the bundled STARmap data,
 * loaded, preprocessed and split, with its model and training settings. */
#ifndef ALPHAST_TEST_TRAIN_FIXTURE_H
#define ALPHAST_TEST_TRAIN_FIXTURE_H

#include "config/config.h"
#include "train/train.h"

/* The smallest model the tests train: one layer, widths of 4 and 8. */
#define TINY_MODEL_YAML                                                                                      \
    "mlp_in_expression_setting: {mlp_in_expression_dims: 8, mlp_out_expression_dims: 8}\n"                  \
    "mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 4, mlp_out_diffusion_time_dims: 4}\n"      \
    "PositionMLP_setting: {hidden_dims: 4}\n"                                                               \
    "TransformerLayer_setting: {num_layers: 1, num_heads: 2, dim_ff_expression: 8, dim_ff_diffusion_time: 4}\n" \
    "mlp_out_expression_setting: {hidden_dims: 8}\n"                                                        \
    "mlp_out_position_norm_setting: {hidden_dims: 4}\n"

typedef struct train_setup {
    ast_cfg *cfg;
    ast_dataset d;
    ast_split sp[3];
    ast_train_config tc;
    ast_model_config mc;
} train_setup;

/* yaml: the config text; overrides: NULL-terminated "key=value" list (may
 * be NULL). Any failure fails the test with its message. Progress is off. */
void train_setup_open(train_setup *s, const char *yaml, const char *const *overrides);
void train_setup_close(train_setup *s);

/* A fresh directory /tmp/alphast-<tag>-XXXXXX (one of 4 rotating buffers). */
char *train_tmp_dir(const char *tag);

/* Trains s's config in dir (resuming from its checkpoint, if it holds
 * one; train_tmp_dir for a fresh one): its step losses (malloc'd, *n of
 * them), its result in *r and, unless graph is NULL, whether its step was
 * replayed as a CUDA graph. */
double *train_setup_losses(const train_setup *s, const char *dir, int64_t *n, ast_train_result *r, int *graph);

#endif
