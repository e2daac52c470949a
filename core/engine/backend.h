/* engine/backend.h: where a step runs, in the style of ggml's backends. A
 * backend owns memory (buffers) and supplies the kernels of the ops of
 * ops.def (its `kernels` table, forward and backward: engine/kernels.h);
 * shapes, outputs, the tape and the gradients' allocation are the
 * dispatch's (ops/dispatch*.c), written once for every backend. Tensors never own memory: they point
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

#include <math.h>

#include "engine/engine.h"
#include "engine/kernels.h"

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

/* Clipping's factor for a gradient with sum of squares sumsq, as
 * torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6), applied when
 * below 1. One definition for every backend's clip (host and device). */
#if defined(__CUDACC__)
__host__ __device__
#endif
static inline double ast_clip_coef(double sumsq, float max_norm) { return max_norm / (sqrt(sumsq) + 1e-6); }

typedef struct ast_backend ast_backend;
struct ast_backend {
    const char *name;  /* what `device:` in a config names: "cpu" */
    ast_memory memory; /* where its buffers live */
    /* Its kernels, ast_op_kernel[AST_N_OPS] indexed by op (engine/kernels.h):
     * forward and backward per op of ops.def; the dispatch (ops/dispatch*.c)
     * does the rest. A zero slot declines its op. */
    const ast_op_kernel *kernels;

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
    /* One process of a run over several (mpirun -np R): from now on this
     * thread uses device `local` (its local rank) modulo the visible ones,
     * whose UUID goes into uuid, so that ranks can tell whether they share
     * one. 0, or -1 with why. NULL: one memory for all (the CPU). */
    int (*bind)(const ast_backend *b, int local, unsigned char uuid[16], char *why, size_t n);

    /* The kernels of the layers above the ops, on the backend's memory:
     * arena zeroing, the backward's seed, the optimiser and clipping. */
    void (*zero)(const ast_backend *b, void *dst, size_t bytes);
    /* y[i] += x[i] for i < n. */
    void (*accumulate)(const ast_backend *b, float *y, const float *x, int64_t n);
    /* The sum of squares of n arrays (xs[i] of ns[i] floats) in float64,
     * into *out (backend memory): each array in fixed blocks of
     * AST_NORM_BLOCK, the blocks and then the arrays added in order, so the
     * result has the same bits for any thread count. Queued like an op: the
     * step's scalars stay on the backend until the host reads them. */
    void (*sum_squares)(const ast_backend *b, float *const *xs, const int64_t *ns, int n, double *out);
    /* Clipping: xs[i][j] *= max_norm / (sqrt(*sumsq) + 1e-6) when that is
     * below 1 (torch.nn.utils.clip_grad_norm_); *sumsq in backend memory. */
    void (*clip)(const ast_backend *b, float *const *xs, const int64_t *ns, int n, const double *sumsq, float max_norm);
    /* One AdamW update of n parameters (ast_adamw_job above), with the
     * constants *h in backend memory. Nothing changes when *sumsq (the
     * gradient's) or *loss is not finite: a bad step is stopped on the
     * device, before the host has read either. NULL: not checked. */
    void (*adamw)(const ast_backend *b, const ast_adamw_job *jobs, int n, const ast_adamw_hyper *h,
                  const double *sumsq, const float *loss);

    /* Pinned host memory: the backend copies from it without staging, and
     * a captured copy reads it when the graph runs (step inputs). */
    void *(*host_alloc)(const ast_backend *b, size_t bytes);
    void (*host_free)(const ast_backend *b, void *p);
    /* Copies that leave the queue to wait for the host: every to_host, and
     * every to_backend from memory not from host_alloc, counted per thread
     * since it began. A step that makes none can be captured (graph.c). */
    int64_t (*host_traffic)(const ast_backend *b);
    /* A copy into host memory from host_alloc, queued like an op (and
     * captured, writing when the graph runs): the data is there once the
     * backend has synchronised. Not host traffic: the host waits for
     * nothing until it synchronises, once, for the step's loss. */
    void (*to_pinned)(const ast_backend *b, void *pinned_dst, const void *src, size_t bytes);
    /* Capture of what this thread queues into a graph, replayed with one
     * launch (a CUDA graph). capture_begin: 0, or -1 with why (the CPU runs
     * each op as it is called). capture_end: the graph, or NULL with why
     * (a copy to or from pageable memory while capturing). */
    int (*capture_begin)(const ast_backend *b, char *why, size_t n);
    void *(*capture_end)(const ast_backend *b, char *why, size_t n);
    void (*graph_launch)(const ast_backend *b, void *graph);
    void (*graph_free)(const ast_backend *b, void *graph);
};


/* The sum of squares of the n arrays, waited for and returned; with
 * max_norm > 0 the arrays are then clipped to it (backend's clip). */
double ast_backend_sum_squares(const ast_backend *b, float *const *xs, const int64_t *ns, int n, float max_norm);

const ast_backend *ast_backend_cpu(void);
#if AST_HAVE_CUDA
/* core/engine/cuda/: device memory, cuBLAS and CUDA kernels. */
const ast_backend *ast_backend_cuda(void);
#endif
/* The backend a config's `device:` names, or NULL (ast_backend_names lists them). */
const ast_backend *ast_backend_find(const char *name);
/* "cpu" (and every other compiled-in backend), '|'-joined, for messages. */
const char *ast_backend_names(void);
/* The backend `name` names (NULL: the CPU), or NULL with the one message
 * every place that takes a device gives ("'tpu' is not a device of this
 * build; choose one of cpu|cuda"), for the caller to prefix with where
 * the name came from (--device, the config's line). */
const ast_backend *ast_backend_require(const char *name, ast_error *e);
/* Adds a backend to those ast_backend_find knows (tests add their own);
 * 0, or -1 when the table is full or the name is taken. */
int ast_backend_register(const ast_backend *b);

/* The CPU kernels' families (ops/ops_<family>.c), each filling its ops'
 * slots of the backend's table. */
void ast_cpu_linalg_kernels(ast_op_kernel *table);
void ast_cpu_reduce_kernels(ast_op_kernel *table);
void ast_cpu_routing_kernels(ast_op_kernel *table);
void ast_cpu_loss_kernels(ast_op_kernel *table);
void ast_cpu_aligned_kernels(ast_op_kernel *table);
void ast_cpu_shape_kernels(ast_op_kernel *table);
void ast_cpu_norm_kernels(ast_op_kernel *table);
void ast_cpu_elementwise_kernels(ast_op_kernel *table);
void ast_cpu_grouped_kernels(ast_op_kernel *table);
void ast_cpu_moe_kernels(ast_op_kernel *table);
void ast_cpu_attention_kernels(ast_op_kernel *table);

/* The CPU backend's services (backend_cpu_services.c). */
void ast_cpu_zero(const ast_backend *b, void *dst, size_t bytes);
void ast_cpu_accumulate(const ast_backend *b, float *y, const float *x, int64_t n);
void ast_cpu_sum_squares(const ast_backend *b, float *const *xs, const int64_t *ns, int n, double *out);
void ast_cpu_clip(const ast_backend *b, float *const *xs, const int64_t *ns, int n, const double *sumsq, float max_norm);
void ast_cpu_adamw(const ast_backend *b, const ast_adamw_job *jobs, int n, const ast_adamw_hyper *h,
                   const double *sumsq, const float *loss);

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
