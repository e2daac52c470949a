/* alphast/model.h: the AlphaSTomics network (docs/model.md §2) around its attention
 * and FFN plugins. */
#ifndef ALPHAST_MODEL_H
#define ALPHAST_MODEL_H

#include "config/config.h"
#include "engine/engine.h"
#include "plugin/loader.h"
#include "model/prior.h"

/* Sizes and choices, as the config's model blocks give them (docs/model.md §1). */
typedef struct ast_model_config {
    int num_genes;      /* G */
    int expr_hidden;    /* Ei  mlp_in_expression_setting.mlp_in_expression_dims */
    int d_model;        /* E   mlp_in_expression_setting.mlp_out_expression_dims */
    int time_hidden;    /* Ti  mlp_in_diffusion_time_setting.mlp_in_diffusion_time_dims */
    int d_time;         /* T   mlp_in_diffusion_time_setting.mlp_out_diffusion_time_dims */
    int pos_hidden;     /* P   PositionMLP_setting.hidden_dims */
    int num_layers;     /* L */
    int num_heads;      /* H */
    int d_ff;           /* F   dim_ff_expression */
    int d_ff_time;      /* Ft  dim_ff_diffusion_time */
    int out_expr_hidden;/* Ho  mlp_out_expression_setting.hidden_dims */
    int out_pos_hidden; /* Hp  mlp_out_position_norm_setting.hidden_dims */
    float dropout;      /* p */
    float ln_eps;       /* layer_norm_eps */
    /* 1 (default): the node mask is honoured everywhere inside the network;
     * 0: as the reference, padded cells influence valid ones (docs/model.md §2.9). */
    int honour_mask;

    const char *attention; /* plugin name: "linear", "gated", ... */
    ast_optsrc attention_opts[AST_MAX_PLUGIN_OPTS];
    int n_attention_opts;
    const char *ffn;       /* "dense", "moe", ... */
    ast_optsrc ffn_opts[AST_MAX_PLUGIN_OPTS];
    int n_ffn_opts;

    const char *device; /* the backend the model runs on (engine/backend.h); NULL: "cpu" */

    /* The structural prior (docs/model.md §2.12): per set, an embedding of
     * its expression (kind NONE: off; dims 0: the data's, else 3). */
    ast_prior_config prior;
    int prior_inputs;   /* offered to every cell's token as input channels */
    int prior_residual; /* x0 = prior + gain * the position head, gain learned from 0 */
} ast_model_config;

/* The model's sizes and plugins (docs/model.md §1) for G = num_genes. The reference
 * switches still work: TransformerLayer_setting.use_gated_attention selects
 * attention gated (options gate_type, use_qk_norm) or linear; use_moe
 * selects ffn moe (num_experts, top_k <- moe_top_k, load_balance_weight <-
 * moe_load_balance_loss_weight) or dense. `attention:` / `ffn:` name the
 * plugin directly and must agree with a switch that is also written; an
 * option given both ways is an error. Checks E % H == 0. Strings in `out`
 * point into cfg: keep it alive. 0 on success, -1 with e set. */
int ast_cfg_model(const ast_cfg *cfg, int num_genes, ast_model_config *out, ast_error *e);

/* The prior's axes when the config leaves them to the data (model.prior_dims
 * 0): the data's coordinate dimensions (2 or 3; 0 leaves the default, 3). */
void ast_model_config_data_dims(ast_model_config *cfg, int coord_dims);

/* BASE_CONFIG of compare_configs.py (docs/model.md §10) with G genes, linear + dense. */
void ast_model_config_base(ast_model_config *cfg, int num_genes);

typedef struct ast_model ast_model;

/* Loads the plugins, validates their options and registers every
 * parameter under its PyTorch state_dict name (docs/model.md §2.10), initialised
 * as PyTorch does from `seed`. NULL with e set on failure. */
ast_model *ast_model_new(const ast_model_config *cfg, uint64_t seed, ast_error *e);
void ast_model_free(ast_model *m);
ast_params *ast_model_params(ast_model *m);
const ast_model_config *ast_model_cfg(const ast_model *m);
/* The backend the model's steps run on: make their contexts with
 * ast_ctx_new_on(ast_model_backend(m), seed). */
const ast_backend *ast_model_backend(const ast_model *m);
/* Moves the parameters into the backend's memory (config key `device`),
 * once every parameter is registered (a trainer's mask tokens too) and
 * before an optimiser is made or a step runs; later calls do nothing. -1
 * with e naming `device` and the fix when the backend cannot run here (a
 * CUDA build without a visible GPU). Counting parameters needs no place. */
int ast_model_place(ast_model *m, ast_error *e);

/* Total parameters, and those active per token (MoE: router + top-k experts). */
int64_t ast_model_param_count(const ast_model *m);
int64_t ast_model_active_param_count(const ast_model *m);

typedef struct ast_model_out {
    ast_tensor *expression; /* [B, N, G] x0 prediction, masked */
    ast_tensor *positions;  /* [B, N, 3] x0 prediction, masked and centred */
} ast_model_out;

/* One forward pass (docs/model.md §2.1): expression [B,N,G], t [B,1], positions
 * [B,N,3], mask [B,N] (NULL = all valid). With a prior (cfg.prior), each
 * set's prior is computed on the host from the expression given here (a
 * copy back from a device: a synchronisation), cached per set, and treated
 * as a constant (no gradient flows into the expression through it). Plugins' extra losses (MoE aux)
 * are published on the context (ast_model_extra_loss). `taps`, when not NULL,
 * receives per-layer activations named as the golden dumps name them
 * ("layer0.attn_core_in", ...). */
typedef void (*ast_tap_fn)(void *ud, const char *name, ast_tensor *t);
ast_model_out ast_model_forward(ast_model *m, ast_ctx *c, ast_tensor *expression, ast_tensor *t,
                                ast_tensor *positions, ast_tensor *mask, ast_tap_fn tap, void *tap_ud);

/* The per-set constants the network computes from its expression input
 * (docs/model.md §2.12): the structural prior [N, 3] (cfg.prior) and the
 * geodesic distances [N, N] a plugin reads (wants_geodesic). A caller that
 * holds that expression on the host computes them there before the step
 * (ast_model_prior_host) and hands them in (ast_model_forward_given), so
 * that a device step reads nothing back and can be captured as a graph. */
typedef struct ast_model_prior_in {
    ast_tensor *prior;    /* [B, N, 3]; NULL when the model has no prior */
    ast_tensor *geodesic; /* [B, N, N]; NULL when no plugin reads geodesics */
} ast_model_prior_in;

/* Which of the two the model needs (0 or 1 each). */
void ast_model_prior_wants(const ast_model *m, int *prior, int *geodesic);
/* For B sets of N cells, expression [B, N, G] and mask [B, N] (NULL = all
 * valid) on the host: the prior into prior [B, N, 3] and the geodesics
 * into geo [B, N, N], each where ast_model_prior_wants says so (else it
 * may be NULL), the numbers ast_model_forward computes from the same
 * expression (the model's cache of recent sets serves both). */
void ast_model_prior_host(ast_model *m, int B, int N, const float *expr, const float *mask, float *prior, float *geo);
/* ast_model_forward with those constants given, made by ast_model_prior_host
 * from `expression`'s values; the network reads nothing back for them.
 * NULL `in`: computed from `expression`, as ast_model_forward does. */
ast_model_out ast_model_forward_given(ast_model *m, ast_ctx *c, ast_tensor *expression, ast_tensor *t,
                                      ast_tensor *positions, ast_tensor *mask, const ast_model_prior_in *in,
                                      ast_tap_fn tap, void *tap_ud);

/* Sum of the losses plugins added this step (MoE's auxiliary loss), on
 * the tape so it trains; NULL when none was added. */
ast_tensor *ast_model_extra_loss(ast_ctx *c);

/* Parameters per module group, summed over layers (for reports). Active
 * counts differ from totals only inside plugins that report active_params. */
enum { AST_N_PARAM_GROUPS = 6 };
typedef struct ast_param_group {
    const char *name; /* "input encoders", "attention wrappers", "attention plugin", "ffn plugin",
                       * "layer norms and time branch", "output heads" */
    int64_t total, active;
} ast_param_group;
void ast_model_param_groups(const ast_model *m, ast_param_group out[AST_N_PARAM_GROUPS]);

#endif
