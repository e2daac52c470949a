/* engine/backend.h: where a step runs, in the style of ggml's backends. A
 * backend owns memory (buffers) and implements every op of ops.def (its
 * `ops` table, forward and backward). Tensors never own memory: they point
 * into a backend's buffer, and say which kind (ast_tensor.memory). Data
 * moves between host memory and a backend only through the explicit copies
 * below, never by dereferencing a device pointer on the host.
 *
 * Built for devices: kernels may run asynchronously (results are defined
 * after synchronize); the step arena is carved from one buffer in the same
 * order every step, so a step's addresses repeat and can be captured once
 * (a CUDA graph) and replayed; losses and statistics come back to the host
 * by to_host, once per logging interval where the backend is not the CPU.
 *
 * The CPU backend (backend_cpu.c) runs today's kernels on host memory; its
 * copies are memcpy and its synchronize does nothing. */
#ifndef ALPHAST_BACKEND_H
#define ALPHAST_BACKEND_H

#include "engine/engine.h"

typedef struct ast_backend ast_backend;
struct ast_backend {
    const char *name;  /* what `device:` in a config names: "cpu" */
    ast_memory memory; /* where its buffers live */
    const ast_ops *ops;  /* its kernels, one per op of ops.def */

    /* A buffer of `bytes`, 64-byte aligned; NULL when out of memory. */
    void *(*buffer_alloc)(const ast_backend *b, size_t bytes);
    void (*buffer_free)(const ast_backend *b, void *buffer);
    /* Explicit copies between host memory and the backend's buffers. */
    void (*to_backend)(const ast_backend *b, void *dst, const void *host_src, size_t bytes);
    void (*to_host)(const ast_backend *b, void *host_dst, const void *src, size_t bytes);
    /* Waits until every op queued so far has finished. */
    void (*synchronize)(const ast_backend *b);
};

const ast_backend *ast_backend_cpu(void);
/* The backend a config's `device:` names, or NULL (ast_backend_names lists them). */
const ast_backend *ast_backend_find(const char *name);
/* "cpu" (and every other compiled-in backend), '|'-joined, for messages. */
const char *ast_backend_names(void);
/* Adds a backend to those ast_backend_find knows (tests add their own);
 * 0, or -1 when the table is full or the name is taken. */
int ast_backend_register(const ast_backend *b);

/* The CPU kernels (ops/): ast_cpu_<name> for each op of ops.def. */
#define AST_OP(slot, ret, name, params, args) ret ast_cpu_##name params;
#include "alphast/ops.def"
#undef AST_OP

/* Copies between a tensor's data and host memory (n floats from `off`). */
void ast_tensor_read(const ast_ctx *c, const ast_tensor *t, int64_t off, int64_t n, float *host_dst);
void ast_tensor_write(const ast_ctx *c, ast_tensor *t, int64_t off, int64_t n, const float *host_src);

#endif
