/* `alphast-run forward`: one eval-mode forward pass of a model (config +
 * weights) on tensors from a safetensors file, written to another. */
#include <stdlib.h>

#include "config/config.h"
#include "engine/backend.h"
#include "model/model.h"
#include "io/safetensors.h"
#include "cli.h"
#include "commands.h"
#include "run_setup.h"

enum { OPT_CONFIG, OPT_WEIGHTS, OPT_INPUTS, OPT_OUT, OPT_DEVICE, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_CONFIG] = {"config", 'c', "FILE", "the model's config (YAML)"},
    [OPT_WEIGHTS] = {"weights", 'w', "FILE", "its parameters (safetensors, state_dict names)"},
    [OPT_INPUTS] = {"inputs", 'i', "FILE", "expression [B,N,G], positions [B,N,3], t [B,1], node_mask [B,N]"},
    [OPT_OUT] = {"out", 'o', "FILE", "where to write expression, positions (and moe_aux); - = stdout"},
    [OPT_DEVICE] = CLI_DEVICE_OPTION,
};

static const cli_spec spec = {
    .name = "forward",
    .usage = "--config C --weights W.safetensors --inputs I.safetensors --out O.safetensors [--device NAME]",
    .about = "Runs the model once in eval mode (no dropout, no router noise) and writes its x0\n"
             "predictions: expression [B,N,G] and positions [B,N,3], masked and centred, and\n"
             "moe_aux [1] when a plugin publishes a load-balance loss. node_mask is optional\n"
             "(all cells valid); G comes from the expression tensor.\n"
             "The reference's names work too: inputs noisy_expression, noisy_positions,\n"
             "diffusion_time (t / T), node_mask, with or without the golden dumps' 'in.' prefix\n"
             "(a reference io file is an input file as it is); its outputs pred_expression,\n"
             "pred_positions and moe_aux are our expression, positions and moe_aux. Weights\n"
             "are PyTorch state_dict names, also under a Lightning checkpoint's 'model.'.\n"
             "It computes in float32, whatever the config's training.precision says, on the\n"
             "config's device or --device's (docs/gpu.md).",
    .options = options,
    .n_options = N_OPTS,
};

/* Each input under alphast's name, the reference's and the golden dumps'
 * (tests/data/golden/README.md), so that a reference io file is an input
 * file as it is. */
enum { IN_EXPRESSION, IN_POSITIONS, IN_T, IN_MASK, N_INPUTS };
static const char *const input_names[N_INPUTS][3] = {
    [IN_EXPRESSION] = {"expression", "noisy_expression", "in.noisy_expression"},
    [IN_POSITIONS] = {"positions", "noisy_positions", "in.noisy_positions"},
    [IN_T] = {"t", "diffusion_time", "in.diffusion_time"},
    [IN_MASK] = {"node_mask", "node_mask", "in.node_mask"},
};

/* The name input k has in f, or NULL. */
static const char *find_input(const ast_st_file *f, int k)
{
    for (int j = 0; j < 3; j++)
        if (ast_st_find(f, input_names[k][j]) >= 0) return input_names[k][j];
    return NULL;
}

/* Input k with the given shape, or NULL with e set. */
static ast_tensor *read_input(ast_ctx *c, const ast_st_file *f, int k, int ndim, const int64_t *shape, ast_error *e)
{
    char want[64];
    const char *name = find_input(f, k);
    if (!name) {
        ast_error_set(e, "%s: no tensor '%s'; expected %s (the reference's name '%s' or '%s' works too)",
                      ast_st_path(f), input_names[k][0], ast_st_shape_str(ndim, shape, want, sizeof want),
                      input_names[k][1], input_names[k][2]);
        return NULL;
    }
    ast_tensor *t = ast_zeros(c, ndim, shape);
    return ast_st_read_f32(f, name, ndim, shape, t->data, e) ? NULL : t;
}

typedef struct fwd_inputs {
    ast_tensor *expression, *positions, *t, *mask;
} fwd_inputs;

/* B, N and G from expression [B,N,G], then the others against them. */
static int read_inputs(ast_ctx *c, const ast_st_file *f, fwd_inputs *in, ast_error *e)
{
    const char *expression = find_input(f, IN_EXPRESSION);
    int i = expression ? ast_st_find(f, expression) : -1;
    if (i < 0 || ast_st_ndim(f, i) != 3) {
        ast_error_set(e, "%s: needs a tensor 'expression' (or the reference's 'noisy_expression') of shape [B, N, G]",
                      ast_st_path(f));
        return -1;
    }
    const int64_t *s = ast_st_shape(f, i);
    int64_t b = s[0], n = s[1];
    /* An empty batch has nothing to predict; the model's layers assume
     * at least one cell (the GEMMs of an empty one used to divide by 0). */
    if (b < 1 || n < 1 || s[2] < 1) {
        char got[64];
        ast_error_set(e, "%s: tensor '%s' has shape %s, with no %s; forward needs B >= 1 sets of N >= 1 "
                      "cells and G >= 1 genes", ast_st_path(f), expression, ast_st_shape_str(3, s, got, sizeof got),
                      b < 1 ? "set (B = 0)" : n < 1 ? "cell (N = 0)" : "gene (G = 0)");
        return -1;
    }
    in->mask = NULL;
    if (!(in->expression = read_input(c, f, IN_EXPRESSION, 3, s, e)) ||
        !(in->positions = read_input(c, f, IN_POSITIONS, 3, (int64_t[]){b, n, 3}, e)) ||
        !(in->t = read_input(c, f, IN_T, 2, (int64_t[]){b, 1}, e)))
        return -1;
    if (find_input(f, IN_MASK) && !(in->mask = read_input(c, f, IN_MASK, 2, (int64_t[]){b, n}, e))) return -1;
    return 0;
}

/* An output tensor's data copied to the host, for the writer. */
static const float *on_host(ast_ctx *c, const ast_tensor *t)
{
    float *host = ast_alloc_uninit(c, (size_t)t->size * sizeof *host);
    ast_tensor_read(c, t, 0, t->size, host);
    return host;
}

static int write_outputs(ast_ctx *c, const ast_model_out *o, const char *path, ast_error *e)
{
    ast_st_writer *w = ast_st_writer_new();
    ast_st_writer_add(w, "expression", AST_ST_F32, 3, o->expression->shape, on_host(c, o->expression));
    ast_st_writer_add(w, "positions", AST_ST_F32, 3, o->positions->shape, on_host(c, o->positions));
    ast_tensor *aux = ast_model_extra_loss(c);
    if (aux) ast_st_writer_add(w, "moe_aux", AST_ST_F32, 1, aux->shape, on_host(c, aux));
    int rc = ast_st_writer_write(w, path, e);
    ast_st_writer_free(w);
    return rc;
}

/* The inputs, read on the host (in), on the model's device. */
static fwd_inputs to_device(ast_ctx *c, const fwd_inputs *in)
{
    ast_tensor *const *from[] = {&in->expression, &in->positions, &in->t, &in->mask};
    fwd_inputs out;
    ast_tensor **to[] = {&out.expression, &out.positions, &out.t, &out.mask};
    for (int k = 0; k < 4; k++)
        *to[k] = *from[k] ? ast_tensor_from(c, (*from[k])->ndim, (*from[k])->shape, (*from[k])->data) : NULL;
    return out;
}

/* Model from config + weights for G genes, then the pass. */
static int run(const char *const *value, ast_error *e)
{
    ast_st_file *f = ast_st_open(value[OPT_INPUTS], e);
    ast_cfg *cfg = f ? ast_cfg_load_file(value[OPT_CONFIG], e) : NULL;
    ast_ctx *host = ast_ctx_new(0), *c = NULL; /* the inputs come to the host first: they say G */
    ast_model *m = NULL;
    ast_model_config mc;
    fwd_inputs in;
    int ok = cfg && !cli_set_device(cfg, value[OPT_DEVICE], e) && !read_inputs(host, f, &in, e) &&
             !ast_cfg_model(cfg, (int)in.expression->shape[2], &mc, e) && (m = ast_model_new(&mc, 0, e)) &&
             !ast_model_place(m, e) && !ast_params_load(ast_model_params(m), value[OPT_WEIGHTS], AST_LOAD_STRICT, e);
    if (ok) {
        c = ast_ctx_new_on(ast_model_backend(m), 0);
        ast_ctx_set_grad(c, 0);
        fwd_inputs d = to_device(c, &in);
        ast_model_out o = ast_model_forward(m, c, d.expression, d.t, d.positions, d.mask, NULL, NULL);
        ok = !write_outputs(c, &o, value[OPT_OUT], e);
    }
    ast_model_free(m);
    ast_ctx_free(c);
    ast_ctx_free(host);
    ast_cfg_free(cfg);
    ast_st_close(f);
    return ok ? 0 : -1;
}

int cmd_forward(int argc, char **argv)
{
    const char *value[N_OPTS];
    int rc = cli_parse(&spec, argc, argv, value, NULL, NULL);
    if (rc != CLI_CONTINUE) return rc;
    for (int i = 0; i <= OPT_OUT; i++) /* all but --device */
        if (!value[i]) return cli_usage_error(spec.name, "--%s %s is required", options[i].name, options[i].arg);
    ast_error e = {""};
    return run(value, &e) ? cli_fail(&e) : CLI_OK;
}
