#include <criterion/criterion.h>

#include "model_fixture.h"

static void push(ast_optsrc *list, int *n, const char *key, const char *value)
{
    cr_assert_lt(*n, AST_MAX_PLUGIN_OPTS);
    list[(*n)++] = (ast_optsrc){key, value, "test"};
}

void mf_attn_opt(ast_model_config *cfg, const char *key, const char *value)
{
    push(cfg->attention_opts, &cfg->n_attention_opts, key, value);
}

void mf_ffn_opt(ast_model_config *cfg, const char *key, const char *value)
{
    push(cfg->ffn_opts, &cfg->n_ffn_opts, key, value);
}

void mf_gated(ast_model_config *cfg, const char *gate_type)
{
    cfg->attention = "gated";
    mf_attn_opt(cfg, "gate_type", gate_type);
    mf_attn_opt(cfg, "use_qk_norm", "true");
}

void mf_moe(ast_model_config *cfg, const char *experts, const char *top_k, const char *expert_hidden)
{
    cfg->ffn = "moe";
    mf_ffn_opt(cfg, "num_experts", experts);
    mf_ffn_opt(cfg, "top_k", top_k);
    mf_ffn_opt(cfg, "expert_hidden", expert_hidden);
}

ast_model *mf_model(const ast_model_config *cfg, uint64_t seed)
{
    ast_error e = {""};
    ast_model *m = ast_model_new(cfg, seed, &e);
    cr_assert_not_null(m, "model (%s + %s): %s", cfg->attention, cfg->ffn, e.msg);
    return m;
}
