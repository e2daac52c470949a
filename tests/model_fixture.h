/* Shared by the model tests: configurations with plugin options. */
#ifndef ALPHAST_TEST_MODEL_FIXTURE_H
#define ALPHAST_TEST_MODEL_FIXTURE_H

#include "model/model.h"

/* Appends one plugin option (key, YAML value) to the attention or FFN list. */
void mf_attn_opt(ast_model_config *cfg, const char *key, const char *value);
void mf_ffn_opt(ast_model_config *cfg, const char *key, const char *value);

/* The plugins of the spec's configurations: gated softmax attention with
 * QK RMSNorm and a gate type, MoE with n experts, top-k and an expert width
 * "split" (F / n, HEAD) or "full" (F, legacy). */
void mf_gated(ast_model_config *cfg, const char *gate_type);
void mf_moe(ast_model_config *cfg, const char *experts, const char *top_k, const char *expert_hidden);

/* ast_model_new that fails the test with the error message. */
ast_model *mf_model(const ast_model_config *cfg, uint64_t seed);

#endif
