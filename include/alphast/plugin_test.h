/* alphast/plugin_test.h: test a plugin the way alphast tests its own.
 *
 * libalphast-plugintest holds the fixture alphast's in-tree plugin tests
 * use, with the alphast core linked in, so a plugin built out of tree can
 * be loaded, built, run and gradient-checked against the real host table:
 *
 *     cc test_x.c $(pkg-config --cflags --libs alphast-plugin-test) -o test_x
 *
 * Against a build tree rather than an installed alphast, set
 * PKG_CONFIG_PATH to the build directory (alphast-plugin-test-uninstalled.pc)
 * and LD_LIBRARY_PATH to its .libs. The library exports only the ast_test_
 * functions below; the core inside it stays hidden, so nothing in it can
 * stand in for a plugin's own symbols. Functions that can fail return NULL
 * or -1 with a one-line reason in err (errlen bytes, may be NULL/0).
 */
#ifndef ALPHAST_PLUGIN_TEST_H
#define ALPHAST_PLUGIN_TEST_H

#include "alphast/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- loading -------------------------------------------------------------- */

/* A plugin's shared object, loaded with libltdl and checked as alphast-run
 * checks it: the ABI, the descriptor, the option table's defaults, and a
 * file name <prefix>_<name> that agrees with the descriptor. */
typedef struct ast_test_plugin ast_test_plugin;

/* From a path, with or without its extension: "out/attn_distbias.so",
 * "build/plugins/attention/attn_gated" (finds the .la or the .so). */
ast_test_plugin *ast_test_load(const char *path, char *err, size_t errlen);
/* dir/<prefix>_<name> for the kind's prefix (attn, ffn, monitor). */
ast_test_plugin *ast_test_load_named(const char *dir, ast_plugin_kind kind, const char *name, char *err,
                                     size_t errlen);
/* The checked descriptor (fields newer than the plugin read as zero). */
const ast_plugin_desc *ast_test_desc(const ast_test_plugin *p);
const char *ast_test_path(const ast_test_plugin *p);
/* After every instance made from it is destroyed. */
void ast_test_unload(ast_test_plugin *p);

/* ---- instances -------------------------------------------------------------- */

/* One instance and the parameters it made. Fill it with ast_test_create;
 * desc, self, params and dims may be read. */
typedef struct ast_test_layer {
    const ast_plugin_desc *desc;
    void *self;                /* what desc->create returned */
    struct ast_params *params; /* its parameters: ast_test_n_params, ast_test_param */
    ast_layer_dims dims;
    void *priv;                /* the fixture's own */
} ast_test_layer;

/* Creates an instance of plugin d (ast_test_desc) on the CPU backend, with
 * parameters named "<scope>.<name>" and drawn from `seed` (equal seeds, equal
 * weights). `options` are "key=value" texts in the config's YAML syntax
 * ("num_kernels=4", "use_gate=true"), validated against the plugin's option
 * table as a config's would be: an unknown key, a wrong type, a value out of
 * range or not among the choices is refused with the reason; options not
 * given take their defaults. They are copied. Monitors take no dims (NULL)
 * and no scope. 0, or -1 with err set. */
int ast_test_create(ast_test_layer *l, const ast_plugin_desc *d, const char *scope, const ast_layer_dims *dims,
                    uint64_t seed, const char *const *options, int n_options, char *err, size_t errlen);
void ast_test_destroy(ast_test_layer *l);

/* Parameters in the order the plugin made them (full names in ->name). */
int ast_test_n_params(const ast_test_layer *l);
ast_tensor *ast_test_param(const ast_test_layer *l, int i);
/* A parameter or buffer by its name relative to the scope
 * ("distance_bias.weight"), or NULL. */
ast_tensor *ast_test_find(const ast_test_layer *l, const char *name);

/* ---- running ------------------------------------------------------------------ */

/* A step context on the CPU: arena, tape, RNG seeded by `seed`, gradients
 * on; training mode (dropout) when `training`. */
ast_ctx *ast_test_ctx_new(uint64_t seed, int training);
/* Forgets the step's tensors, tape and statistics; parameters stay. */
void ast_test_ctx_reset(ast_ctx *c);
void ast_test_ctx_free(ast_ctx *c);

/* A tensor that outlives steps (data and gradient on the heap, unlike the
 * step's own), for inputs: a copy of data, or zeros when data is NULL.
 * With requires_grad it has a gradient, which the tape adds into. */
ast_tensor *ast_test_tensor(int ndim, const int64_t *shape, const float *data, int requires_grad);
/* Fills t with N(0, scale^2) draws from seed. */
void ast_test_fill_normal(ast_tensor *t, uint64_t seed, float scale);
void ast_test_tensor_free(ast_tensor *t);

/* The instance's forward: x [B, N, E] and the other inputs in a (NULL:
 * none), with a->layer set to the instance's dims.layer. Its output lives
 * in c until the next reset. NULL for a monitor. */
ast_tensor *ast_test_forward(const ast_test_layer *l, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a);

/* The statistic `name` of `layer` (-1: not per layer) published on c since
 * its last reset, or NULL. */
const ast_stat *ast_test_stat(const ast_ctx *c, const char *name, int layer);

/* ---- gradient check ------------------------------------------------------------- */

/* Defaults of ast_test_gradcheck, and why.
 *
 * Each element v of each checked tensor is perturbed to v +- h and the
 * central difference (L(v+h) - L(v-h)) / 2h of L = sum_i r_i y_i (fixed
 * pseudo-random r_i in [-1, 1], so every output and every path counts) is
 * compared with the tape's dL/dv: err = |a - n| / max(|a|, |n|, floor).
 * Forwards run in float32, so n has two errors that pull h opposite ways:
 *  - truncation, (h^2 / 6) L''': relative (h / s)^2 / 6 for a layer that
 *    curves on a scale s. Softmax over O(1) logits and a norm over a few
 *    features have s of a few hundredths (attn_gated measures 2.3e-2 at
 *    h = 1e-2, i.e. s ~ 0.03), so h = 3e-3 keeps it near 2e-3;
 *  - rounding: each L carries float32 error ~ u sqrt(n) |y| (u = 6e-8,
 *    n outputs of size |y|), divided by h in the difference: ~1e-4 for a
 *    hundred O(1) outputs at h = 3e-3, 1e-2 relative to the floor. That
 *    is a bound: outputs that do not depend on v round the same way in
 *    both evaluations and cancel.
 * The floor (1e-2) keeps gradients that should be zero, or nearly, from
 * turning that absolute rounding into a large ratio. At these defaults the
 * in-tree attention layers on B = 2, N = 5, E = 8 measure 3.1e-3
 * (attn_distbias) and 7e-3 (attn_gated); the tolerance 2e-2 leaves a
 * factor of 3 over the worst. A wrong backward is off by O(1) instead: a
 * missing term, a flipped sign or a factor of 2 give err >= 0.3, and a cut
 * path gives 1 wherever the true gradient exceeds the floor.
 * So keep the inputs small and of order 1 (each element costs two
 * forwards), give parameters that start at zero other values first (their
 * paths are otherwise not exercised), and read a failure by moving h: a
 * numerical error shrinks or grows with h (truncation ~ h^2, rounding ~
 * 1/h; attn_linear, with more nonlinearity, measures 5e-2 at h = 3e-3 but
 * 1.3e-2 at h = 1e-2), a bug stays where it is. */
#define AST_TEST_GC_H 3e-3f
#define AST_TEST_GC_FLOOR 1e-2
#define AST_TEST_GC_TOL 2e-2

typedef struct ast_test_gc_opts {
    float h;      /* step; 0: AST_TEST_GC_H */
    double floor; /* 0: AST_TEST_GC_FLOOR */
    double tol;   /* pass when max_err < tol; 0: AST_TEST_GC_TOL */
    int training; /* forward in training mode (dropout masks are the same in every evaluation) */
} ast_test_gc_opts;

typedef struct ast_test_gc_result {
    double max_err;      /* over every element checked */
    int pass;            /* max_err < tol, and something was checked */
    int64_t n_checked;   /* elements perturbed */
    /* The worst element: which tensor ("x", "positions", "time" or a
     * parameter's full name), its index among those checked (x first, then
     * positions, time, parameters), the element and both gradients. */
    const char *worst;
    int worst_input;
    int64_t worst_index;
    double analytic, numeric;
} ast_test_gc_result;

/* Checks the tape's gradients of ast_test_forward(l, ., x, a) against
 * central differences, with respect to x, a->positions and a->time (each
 * when made with requires_grad) and every parameter of l. Leaves the last
 * analytic gradients in their ->grad. o may be NULL (the defaults). */
ast_test_gc_result ast_test_gradcheck(const ast_test_layer *l, ast_tensor *x, const ast_fwd_args *a,
                                      const ast_test_gc_opts *o);

#ifdef __cplusplus
}
#endif
#endif
