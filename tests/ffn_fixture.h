/* Test fixture for FFN plugins: loads a plugin from the build tree with
 * libltdl, as the host would, and builds one layer over the core's host
 * table and parameter store. */
#ifndef ALPHAST_TEST_FFN_FIXTURE_H
#define ALPHAST_TEST_FFN_FIXTURE_H

#include <ltdl.h>

#include "engine/engine.h"

#define FFN_MAX_OPTS 32
#define FFN_SCOPE "transformer_layers.0"

typedef struct ffn_layer {
    lt_dlhandle dl;
    const ast_plugin_desc *desc;
    ast_params *params;
    ast_layer_dims dims;
    ast_optval opts[FFN_MAX_OPTS];
    char text[FFN_MAX_OPTS][64]; /* option texts the optvals point into */
    void *self;
    char err[256];
} ffn_layer;

/* Loads $ALPHAST_BUILD_DIR/plugins/ffn/<file> ("ffn_moe"), takes the
 * options' defaults overridden by `opts` ("key=value,key=value" or NULL)
 * and creates one layer in scope FFN_SCOPE with parameters drawn from
 * `seed`. Returns 0 with l->err set when the plugin refuses the options;
 * a missing plugin or unknown option fails the test. */
int ffn_layer_open(ffn_layer *l, const char *file, const ast_layer_dims *dims, const char *opts, uint64_t seed);
void ffn_layer_close(ffn_layer *l);

/* The layer's forward with mask [B, N] and time [B, T] (either may be NULL). */
ast_tensor *ffn_forward(ffn_layer *l, ast_ctx *c, ast_tensor *x, ast_tensor *mask, ast_tensor *time);

/* A parameter by its name relative to the layer scope (fails if absent). */
ast_tensor *ffn_param(const ffn_layer *l, const char *name);

/* A statistic published on c this step (fails if absent). */
const ast_stat *ffn_stat(ast_ctx *c, const char *name);

/* The named loss published on c this step, or NULL. */
ast_tensor *ffn_loss(ast_ctx *c, const char *name);

#endif
