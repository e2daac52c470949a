/* The four ablation configs of compare_configs.py (docs/model.md §10.1) at the demo
 * size (BASE_CONFIG, B = 4 sets of 50 cells, G = 100) and at the size of
 * the reference config.yaml (docs/model.md §1; B = 4 sets of 512 cells, G = 2000). */
#include <string.h>

#include "bench.h"

static const ast_optsrc gated_opts[] = {{"gate_type", "headwise", "bench"}, {"use_qk_norm", "true", "bench"}};
static const ast_optsrc moe_opts[] = {
    {"num_experts", "4", "bench"}, {"top_k", "2", "bench"}, {"load_balance_weight", "0.01", "bench"}};

static void reference_size(ast_model_config *cfg)
{
    cfg->num_genes = 2000;
    cfg->expr_hidden = 128;
    cfg->d_model = 256;
    cfg->time_hidden = 64;
    cfg->d_time = 64;
    cfg->pos_hidden = 64;
    cfg->num_layers = 6;
    cfg->num_heads = 8;
    cfg->d_ff = 1024;
    cfg->d_ff_time = 256;
    cfg->out_expr_hidden = 512;
    cfg->out_pos_hidden = 128;
}

static void set_plugins(ast_model_config *cfg, int gated, int moe)
{
    cfg->attention = gated ? "gated" : "linear";
    cfg->n_attention_opts = gated ? 2 : 0;
    memcpy(cfg->attention_opts, gated_opts, sizeof gated_opts);
    cfg->ffn = moe ? "moe" : "dense";
    cfg->n_ffn_opts = moe ? 3 : 0;
    memcpy(cfg->ffn_opts, moe_opts, sizeof moe_opts);
}

int bench_model_case_init(bench_model_case *c, const char *which, const char *size)
{
    static const char *const names[] = {"baseline", "gated", "moe", "gated_moe"};
    int idx = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(which, names[i])) idx = i;
    int demo = !strcmp(size, "demo");
    if (idx < 0 || (!demo && strcmp(size, "reference"))) return -1;

    memset(c, 0, sizeof *c);
    snprintf(c->config, sizeof c->config, "%s", which);
    snprintf(c->size, sizeof c->size, "%s", size);
    snprintf(c->name, sizeof c->name, "%s/%s", size, which);
    ast_model_config_base(&c->cfg, 100);
    if (!demo) reference_size(&c->cfg);
    set_plugins(&c->cfg, idx == 1 || idx == 3, idx >= 2);
    c->sets = 4;
    c->cells = demo ? 50 : 512;
    c->position_loss = AST_POS_LOSS_DISTANCE; /* the twin's (torch_twin.py diffusion_loss) */
    c->time_graph = 1;
    return 0;
}
