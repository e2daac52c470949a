/* Finite-difference gradient checks for ops, plugins and the model.
 *
 * The checked function maps inputs to any output tensor y; the scalar
 * L = sum_i r_i y_i uses fixed pseudo-random weights r in [-1, 1], so every
 * output element and every path into the inputs is exercised. Numeric
 * gradients are central differences in float32 evaluated with grad off;
 * the analytic ones come from the tape. Data and gradients are read and
 * written through the backend's copies (ast_tensor_read / _write), so the
 * check runs on a device too (gc_check_on). */
#ifndef ALPHAST_TEST_GRADCHECK_H
#define ALPHAST_TEST_GRADCHECK_H

#include "engine/engine.h"

typedef ast_tensor *(*gc_forward)(ast_ctx *c, ast_tensor *const *in, void *ud);

typedef struct gc_result {
    double max_err;   /* max over elements of |a - n| / max(|a|, |n|, floor) */
    int worst_input;
    int64_t worst_index;
    double analytic, numeric;
} gc_result;

/* A persistent input of the given shape, N(0, scale^2) from `seed`,
 * requiring a gradient. Owned by `p`. */
ast_tensor *gc_input(ast_params *p, const char *name, int ndim, const int64_t *shape, float scale);

/* Compares analytic and numeric gradients of every element of every input.
 * h is the step; floor keeps tiny gradients from dominating the ratio. */
gc_result gc_check(gc_forward f, ast_tensor *const *in, int n_in, void *ud, float h, double floor);
/* The same on backend b: the inputs' data and gradients must be b's memory
 * (their store moved there with ast_params_to_backend). */
gc_result gc_check_on(const ast_backend *b, gc_forward f, ast_tensor *const *in, int n_in, void *ud, float h,
                      double floor);

#endif
