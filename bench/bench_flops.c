/* FLOPs of the model's matrix products, counted from the architecture
 * (docs/model.md §2), not from the code that runs them: 2 M N K per GEMM, plus
 * the attention cores (linear: K^T V and Q C; softmax: Q K^T and A V).
 * Elementwise work, norms and softmaxes are not counted, so GFLOP/s is a
 * lower bound on the arithmetic actually done. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define WRAP_HIDDEN 64 /* attention-wrapper MLP width, hard-coded in the reference */
#define POS_DIM 3
#define FF_MULT 4      /* lucidrains feed-forward */

static double lin(int64_t rows, int64_t in, int64_t out) { return 2.0 * (double)rows * (double)in * (double)out; }

static const char *opt(const ast_optsrc *o, int n, const char *key, const char *def)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(o[i].key, key)) return o[i].value;
    return def;
}

static int gate_width(const ast_model_config *cfg)
{
    const char *g = opt(cfg->attention_opts, cfg->n_attention_opts, "gate_type", "headwise");
    if (!strcmp(g, "headwise")) return cfg->num_heads;
    return strcmp(g, "elementwise") ? 0 : cfg->d_model;
}

double bench_flops_attention(const ast_model_config *cfg, const char *attention, int64_t sets, int64_t cells)
{
    int64_t E = cfg->d_model, M = sets * cells, dh = E / cfg->num_heads;
    if (!strcmp(attention, "linear"))
        return 4 * lin(M, E, E) + lin(M, E, FF_MULT * E) + lin(M, FF_MULT * E, E) + 4.0 * (double)M * E * dh;
    return lin(M, E, E + gate_width(cfg)) + 3 * lin(M, E, E) + 4.0 * (double)sets * cells * cells * E;
}

double bench_flops_ffn(const ast_model_config *cfg, const char *ffn, int num_experts, int top_k, int expert_width,
                       int64_t tokens)
{
    int64_t E = cfg->d_model;
    if (!strcmp(ffn, "dense")) return lin(tokens, E, cfg->d_ff) + lin(tokens, cfg->d_ff, E);
    return lin(tokens, E, num_experts) + top_k * (lin(tokens, E, expert_width) + lin(tokens, expert_width, E));
}

static double wrapper(const ast_model_config *cfg, int64_t B, int64_t M)
{
    int64_t E = cfg->d_model, T = cfg->d_time, W = WRAP_HIDDEN;
    return lin(M, E, W) + lin(M, W, E) + lin(M, POS_DIM + 1, W) + lin(M, W, POS_DIM) + lin(B, T, T) +
           lin(M, E + T + POS_DIM, E) + lin(M, E, POS_DIM) + lin(M, E, E);
}

static double ffn_of(const ast_model_config *cfg, int64_t M)
{
    if (strcmp(cfg->ffn, "moe")) return bench_flops_ffn(cfg, "dense", 0, 0, 0, M);
    int n = atoi(opt(cfg->ffn_opts, cfg->n_ffn_opts, "num_experts", "8"));
    int k = atoi(opt(cfg->ffn_opts, cfg->n_ffn_opts, "top_k", "2"));
    int f = !strcmp(opt(cfg->ffn_opts, cfg->n_ffn_opts, "expert_hidden", "split"), "full") ? cfg->d_ff
                                                                                            : cfg->d_ff / n;
    return bench_flops_ffn(cfg, "moe", n, k, f > 1 ? f : 1, M);
}

double bench_flops_model_forward(const bench_model_case *mc)
{
    const ast_model_config *c = &mc->cfg;
    int64_t B = mc->sets, M = (int64_t)mc->sets * mc->cells;
    int64_t G = c->num_genes, E = c->d_model, Hp = c->out_pos_hidden;
    double f = lin(M, G, c->expr_hidden) + lin(M, c->expr_hidden, E) + lin(B, 1, c->time_hidden) +
               lin(B, c->time_hidden, c->d_time) + lin(M, 1, c->pos_hidden) + lin(M, c->pos_hidden, 1);
    f += lin(M, E, c->out_expr_hidden) + lin(M, c->out_expr_hidden, G) + lin(M, E, Hp) +
         lin(M, Hp + POS_DIM + 1, Hp) + lin(M, Hp, 1);
    double layer = wrapper(c, B, M) + bench_flops_attention(c, c->attention, B, mc->cells) + ffn_of(c, M) +
                   lin(B, c->d_time, c->d_ff_time) + lin(B, c->d_ff_time, c->d_time);
    return f + c->num_layers * layer;
}

/* Forward, then the backward's two GEMMs per forward GEMM (the input's and
 * the weight's gradient), less the input gradient of the expression's first
 * layer: nothing needs the gradient of the noisy expression. (The inputs of
 * width 1-4, time and positions, are under 0.1 % and stay counted.) */
double bench_flops_model_step(const bench_model_case *mc)
{
    int64_t M = (int64_t)mc->sets * mc->cells;
    return BENCH_STEP_FLOPS(bench_flops_model_forward(mc)) - lin(M, mc->cfg.num_genes, mc->cfg.expr_hidden);
}
