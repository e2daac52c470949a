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

#ifdef __cplusplus
extern "C" {
#endif

#define AST_NORM_BLOCK 8192

/* AdamW's update of one parameter's part p[0, n): torch.optim.AdamW with
 * optional AMSGrad (vmax non-NULL). A parameter whose whole gradient
 * (g_whole, of whole_n floats: also outside the part) is zero received none
 * this step and is skipped, as PyTorch skips grad=None. */
typedef struct ast_adamw_job {
    float *p, *m, *v, *vmax;
    const float *g;
    int64_t n;
    const float *g_whole;
    int64_t whole_n;
} ast_adamw_job;

/* The step's constants: p = p * decay - step_size * m / (sqrt(vhat) / bc2_sqrt + eps). */
typedef struct ast_adamw_hyper {
    float beta1, beta2, eps, decay, step_size, bc2_sqrt;
} ast_adamw_hyper;

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
    /* 1 when the backend can run here; else 0 with the reason and the fix
     * in why (a CUDA build on a machine without a GPU). */
    int (*available)(const ast_backend *b, char *why, size_t n);

    /* The kernels of the layers above the ops, on the backend's memory:
     * arena zeroing, the backward's seed, the optimiser and clipping. */
    void (*zero)(const ast_backend *b, void *dst, size_t bytes);
    /* y[i] += x[i] for i < n. */
    void (*accumulate)(const ast_backend *b, float *y, const float *x, int64_t n);
    /* The sum of squares of n arrays (xs[i] of ns[i] floats) in float64:
     * each array in fixed blocks of AST_NORM_BLOCK, the blocks and then the
     * arrays added in order, so the result has the same bits for any
     * thread count. Synchronises: the sum comes back to the host. */
    double (*sum_squares)(const ast_backend *b, float *const *xs, const int64_t *ns, int n);
    /* xs[i][j] *= s for each of the n arrays. */
    void (*scale)(const ast_backend *b, float *const *xs, const int64_t *ns, int n, float s);
    /* One AdamW update of n parameters (ast_adamw_job above). */
    void (*adamw)(const ast_backend *b, const ast_adamw_job *jobs, int n, const ast_adamw_hyper *h);
};


const ast_backend *ast_backend_cpu(void);
#if AST_HAVE_CUDA
/* core/engine/cuda/: device memory, cuBLAS and CUDA kernels. */
const ast_backend *ast_backend_cuda(void);
#endif
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

/* The CPU backend's services (backend_cpu_services.c). */
void ast_cpu_zero(const ast_backend *b, void *dst, size_t bytes);
void ast_cpu_accumulate(const ast_backend *b, float *y, const float *x, int64_t n);
double ast_cpu_sum_squares(const ast_backend *b, float *const *xs, const int64_t *ns, int n);
void ast_cpu_scale(const ast_backend *b, float *const *xs, const int64_t *ns, int n, float s);
void ast_cpu_adamw(const ast_backend *b, const ast_adamw_job *jobs, int n, const ast_adamw_hyper *h);

/* Tensor data and gradients come from the context's backend arena (device
 * memory on a device); ast_alloc's memory stays on the host (tensor
 * headers, tape records, index arrays a plugin fills). On the CPU both are
 * one arena. ast_data_alloc zeroes what it returns. */
void *ast_data_alloc(ast_ctx *c, size_t bytes);
void *ast_data_alloc_uninit(ast_ctx *c, size_t bytes);

/* Copies between a tensor's data and host memory (n floats from `off`). */
void ast_tensor_read(const ast_ctx *c, const ast_tensor *t, int64_t off, int64_t n, float *host_dst);
void ast_tensor_write(const ast_ctx *c, ast_tensor *t, int64_t off, int64_t n, const float *host_src);

#ifdef __cplusplus
}
#endif
#endif
