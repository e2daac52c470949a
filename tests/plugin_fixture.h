/* Test fixture for layer plugins: the installed one (alphast/plugin_test.h,
 * testkit/plugin_test.c) under its in-tree names, failing the test where
 * it returns an error. Loads a plugin's shared object from the build tree,
 * builds an instance with its parameters in a fresh store, runs it, and
 * gradient-checks it with respect to its input and every parameter. */
#ifndef ALPHAST_TEST_PLUGIN_FIXTURE_H
#define ALPHAST_TEST_PLUGIN_FIXTURE_H

#include "alphast/plugin_test.h"
#include "gradcheck.h"

/* desc, self, params (an ast_params *), dims. */
typedef ast_test_layer pf_instance;

/* $ALPHAST_BUILD_DIR/plugins/<area>/<file> (libtool finds .la or .so);
 * fails the test when it cannot be loaded. */
const ast_plugin_desc *pf_load(const char *area, const char *file);

/* An instance whose parameters are named under `prefix` and initialised
 * from `seed` (equal seeds give equal weights). Options are the plugin's
 * defaults overridden by "key=value" strings; a refused one fails the test. */
pf_instance pf_create(const ast_plugin_desc *d, const char *prefix, const ast_layer_dims *dims, uint64_t seed,
                      const char *const *overrides, int n_overrides);
static inline void pf_destroy(pf_instance *pi) { ast_test_destroy(pi); }

static inline ast_tensor *pf_forward(const pf_instance *pi, ast_ctx *c, ast_tensor *x, ast_tensor *mask)
{
    return ast_test_forward(pi, c, x, &(ast_fwd_args){.mask = mask});
}

/* A heap tensor that needs no gradient (masks, golden data); data may be NULL. */
static inline ast_tensor *pf_const(int ndim, const int64_t *shape, const float *data)
{
    return ast_test_tensor(ndim, shape, data, 0);
}
static inline void pf_const_free(ast_tensor *t) { ast_test_tensor_free(t); }

/* gc_check of pf_forward over x and every parameter of the instance
 * (worst_input 0 is x, i > 0 parameter i - 1). */
gc_result pf_gradcheck(const pf_instance *pi, ast_tensor *x, ast_tensor *mask, int training, float h,
                       double floor);

#endif
