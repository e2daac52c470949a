/* Private to the model's source files: the parts of the network and the
 * per-call state they share. Users see only alphast/model.h. */
#ifndef ALPHAST_MODEL_INTERNAL_H
#define ALPHAST_MODEL_INTERNAL_H

#include "engine/backend.h"
#include "model/model.h"

/* Width of the hidden layer of both attention-wrapper MLPs (hard-coded in
 * the reference, docs/model.md §2.4) and of the position feature. */
#define MODEL_WRAP_HIDDEN 64
#define MODEL_POS_DIM 3
/* Length guards of the reference: PositionMLP and the output head (1e-6),
 * the wrapper's direction vector (1e-7). */
#define MODEL_PM_EPS 1e-6f
#define MODEL_DIR_EPS 1e-7f

/* A PyTorch Linear or LayerNorm: weight and (possibly NULL) bias. */
typedef struct model_lin {
    ast_tensor *w, *b;
} model_lin;

/* A plugin instance (one per layer) and how many parameters it registered. */
typedef struct model_plugin {
    const ast_plugin_desc *desc;
    const char *path; /* its file, to name it if it crashes */
    void *self;
    int64_t numel;
} model_plugin;

typedef struct model_embed {
    model_lin expr0, expr2, time0, time2, pm0, pm2;
} model_embed;

typedef struct model_layer {
    int index;
    ast_layer_dims dims; /* plugins may keep the pointer */
    /* attention wrapper (docs/model.md §2.4) */
    model_lin pos0, pos2, concat, expr0, expr2;
    model_plugin attn;
    model_lin head_pos, head_expr, y_y;
    /* the rest of the layer (docs/model.md §2.3) */
    model_plugin ffn;
    model_lin norm1, norm2, lin_t1, lin_t2, norm_t1, norm_t2;
    ast_tensor *pos_norm_w;
} model_layer;

typedef struct model_heads {
    model_lin expr0, expr2, pos_feat, pos_norm0, pos_norm2;
} model_heads;

struct ast_model {
    ast_model_config cfg; /* strings owned by the model */
    const ast_backend *backend;
    int placed; /* the parameters are in the backend's memory (ast_model_place) */
    ast_params *params;
    model_embed embed;
    model_layer *layers;
    model_heads heads;
    ast_optval attn_opts[AST_MAX_PLUGIN_OPTS], ffn_opts[AST_MAX_PLUGIN_OPTS];
    /* The structural prior (model_prior.c): its input projection, the
     * residual's gain, and the priors of recent sets. */
    model_lin prior_in;
    ast_tensor *prior_gain;
    ast_prior_cache *prior_cache;
    int wants_geodesic; /* a plugin reads ast_fwd_args.geodesic */
};

/* What one forward call threads through the parts. */
typedef struct model_run {
    ast_ctx *c;
    const ast_model_config *cfg;
    ast_tensor *mask;        /* [B, N], never NULL inside the network */
    ast_tensor *mask3;       /* the same as [B, N, 1], to broadcast over features */
    ast_tensor *counts;      /* [B, 1, 1] valid cells per set, at least 1 */
    ast_tensor *plugin_mask; /* mask, or NULL when the mask is not honoured */
    ast_tensor *geodesic;    /* [B, N, N] for plugins that want it (ast_fwd_args), else NULL */
    int stats;               /* publish the model's own statistics (time.*) */
    ast_tap_fn tap;
    void *tap_ud;
} model_run;

/* t's data readable on the host: t's own on the CPU, else a copy in host
 * arena memory, which waits for the ops queued before (a synchronisation). */
const float *model_host_data(ast_ctx *c, const ast_tensor *t);

/* The backward of a scalar loss node computed on the host (the structure
 * losses; defined in loss_structure.c): saved = dL/dpred, made by
 * the forward. dy * dL/dpred is made on the host and added to in[0]'s
 * gradient by the backend (reading dy synchronises on a device). */
void model_host_grad_backward(ast_ctx *c, const ast_node *n);

/* Registration (docs/model.md §2.10 order) and forward of each part. */
model_lin model_linear_new(ast_scope *s, const char *name, int in, int out, int bias);
model_lin model_norm_new(ast_scope *s, const char *name, int d);
void model_embed_register(model_embed *e, ast_params *p, const ast_model_config *cfg);
int model_layer_register(ast_model *m, model_layer *l, int index, const ast_plugin *attn,
                         const ast_plugin *ffn, ast_error *e);
void model_heads_register(model_heads *h, ast_params *p, const ast_model_config *cfg);

/* Linear -> ReLU -> Linear, with a final ReLU when relu_out is set. */
ast_tensor *model_mlp2(ast_ctx *c, ast_tensor *x, const model_lin *a, const model_lin *b, int relu_out);
ast_tensor *model_apply(ast_ctx *c, ast_tensor *x, const model_lin *l);
/* x * r' / (r + eps): keep the direction of x, replace its length. */
ast_tensor *model_rescale(ast_ctx *c, ast_tensor *x, ast_tensor *new_len, ast_tensor *len);
/* The mask of B sets of N cells that are all valid: ones [B, N]. */
ast_tensor *model_all_valid(ast_ctx *c, int64_t b, int64_t n);
/* max(1, x) of integer-valued x (counts, exact in float32): relu(x - 1) + 1. */
ast_tensor *model_at_least_one(ast_ctx *c, ast_tensor *x);
/* Per-set number of valid cells, max(1, sum_n m) as a [B, 1, 1] constant. */
ast_tensor *model_valid_counts(ast_ctx *c, ast_tensor *mask);
void model_tap(const model_run *r, ast_tensor *t, const char *fmt, ...) AST_PRINTF(3, 4);

typedef struct model_state {
    ast_tensor *x;   /* [B, N, E] */
    ast_tensor *y;   /* [B, T] */
    ast_tensor *pos; /* [B, N, 3] */
} model_state;

/* The structural prior (docs/model.md §2.12): registration after the
 * heads; the per-set prior [B, N, 3] of the expression (NULL when off),
 * and r->geodesic when a plugin wants it, as given in `in` or, without
 * it, computed from the expression (read back from a device); the
 * prior's two uses. */
void model_prior_register(ast_model *m);
ast_tensor *model_prior_tensor(ast_model *m, model_run *r, ast_tensor *expression, const ast_model_prior_in *in);
ast_tensor *model_prior_inputs(const ast_model *m, const model_run *r, ast_tensor *x, ast_tensor *prior);
ast_tensor *model_prior_residual(const ast_model *m, const model_run *r, ast_tensor *head, ast_tensor *prior);

model_state model_embed_forward(const model_embed *e, const model_run *r, ast_tensor *expression,
                                ast_tensor *t, ast_tensor *positions);
model_state model_layer_forward(const model_layer *l, const model_run *r, model_state in);
ast_model_out model_heads_forward(const model_heads *h, const model_run *r, model_state in);

#endif
