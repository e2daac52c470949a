/* The CPU backend with one op's kernel slot zero: a backend that declines
 * that op, as the CUDA backend declines the CPU-only fused ops (the front
 * end then runs the op's parts, or stops naming the op and the backend).
 * b and kernels are the caller's storage, and must outlive every context
 * made on b. */
#ifndef ALPHAST_TEST_BACKEND_WITHOUT_H
#define ALPHAST_TEST_BACKEND_WITHOUT_H

#include <string.h>

#include "engine/backend.h"

static inline const ast_backend *cpu_backend_without(ast_backend *b, ast_op_kernel kernels[AST_N_OPS], int op,
                                                     const char *name)
{
    *b = *ast_backend_cpu();
    memcpy(kernels, b->kernels, AST_N_OPS * sizeof *kernels);
    kernels[op] = (ast_op_kernel){0};
    b->name = name;
    b->kernels = kernels;
    return b;
}

#endif
