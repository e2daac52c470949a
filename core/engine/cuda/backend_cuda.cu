/* The CUDA backend: device buffers from cudaMalloc, copies on the calling
 * thread's stream, cuBLAS for the GEMMs, the kernels of ops_*.cu, and the
 * services of the layers above (zeroing, the backward's seed, AdamW,
 * clipping's norm and scaling) as kernels here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cuda/cuda_internal.h"

extern "C" void ast_cuda_fail(const char *call, const char *why, const char *file, int line)
{
    fprintf(stderr, "alphast: CUDA error: %s failed: %s (%s:%d)\n", call, why, file, line);
    exit(70);
}

/* Whether a GPU is there, asked once: cudaGetDeviceCount's answer. */
static int device_probe(char *why, size_t n)
{
    static int probed, ok;
    static char reason[256];
    if (!probed) {
        int count = 0;
        cudaError_t e = cudaGetDeviceCount(&count);
        probed = 1;
        ok = e == cudaSuccess && count > 0;
        if (e != cudaSuccess)
            snprintf(reason, sizeof reason, "no CUDA GPU can be used here (%s); run on a machine with one, or choose device: cpu",
                     cudaGetErrorString(e));
        else if (!count)
            snprintf(reason, sizeof reason, "no CUDA GPU is visible (CUDA_VISIBLE_DEVICES?); choose device: cpu");
    }
    if (!ok && why) snprintf(why, n, "%s", reason);
    return ok;
}

static int cuda_available(const ast_backend *b, char *why, size_t n) { return device_probe(why, n); }

static void *cuda_alloc(const ast_backend *b, size_t bytes)
{
    void *p = NULL;
    /* cudaMalloc's blocks are 256-byte aligned, more than the 64 promised. */
    return cudaMalloc(&p, bytes ? bytes : 256) == cudaSuccess ? p : (cudaGetLastError(), (void *)NULL);
}

static void cuda_free(const ast_backend *b, void *buffer) { AST_CUDA_CHECK(cudaFree(buffer)); }

static void cuda_to_backend(const ast_backend *b, void *dst, const void *src, size_t bytes)
{
    if (bytes) AST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, AST_CUDA_STREAM));
}

/* The host reads what it asked for at once: the copy is waited for. */
static void cuda_to_host(const ast_backend *b, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    AST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, AST_CUDA_STREAM));
    AST_CUDA_CHECK(cudaStreamSynchronize(AST_CUDA_STREAM));
}

static void cuda_synchronize(const ast_backend *b) { AST_CUDA_CHECK(cudaStreamSynchronize(AST_CUDA_STREAM)); }

extern "C" cublasHandle_t ast_cuda_blas(void)
{
    static cublasHandle_t h;
    if (!h) {
        AST_CUBLAS_CHECK(cublasCreate(&h));
        AST_CUBLAS_CHECK(cublasSetStream(h, AST_CUDA_STREAM));
        /* float32 as the CPU backend computes it: the default math mode
         * uses no TF32 tensor cores (as PyTorch's default allow_tf32=False). */
        AST_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    }
    return h;
}

static void cuda_zero(const ast_backend *b, void *dst, size_t bytes)
{
    if (bytes) AST_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, AST_CUDA_STREAM));
}

__global__ void accumulate_kernel(float *y, const float *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] += x[i];
}

static void cuda_accumulate(const ast_backend *b, float *y, const float *x, int64_t n)
{
    if (!n) return;
    accumulate_kernel<<<ast_cuda_blocks(n), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(y, x, n);
    AST_CUDA_LAUNCHED();
}

/* ---- clipping: sums of squares in fixed blocks, added in order ----------- */

/* One CUDA block per AST_NORM_BLOCK floats: its float64 sum of squares,
 * reduced in a fixed tree, so the result repeats bit for bit. */
__global__ void block_squares_kernel(const float *x, int64_t n, double *sums)
{
    __shared__ double part[AST_CUDA_THREADS];
    int64_t from = (int64_t)blockIdx.x * AST_NORM_BLOCK, to = from + AST_NORM_BLOCK < n ? from + AST_NORM_BLOCK : n;
    double s = 0.0;
    for (int64_t i = from + threadIdx.x; i < to; i += blockDim.x) s += (double)x[i] * x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) sums[blockIdx.x] = part[0];
}

static int64_t norm_blocks(int64_t n) { return (n + AST_NORM_BLOCK - 1) / AST_NORM_BLOCK; }

static double cuda_sum_squares(const ast_backend *b, float *const *xs, const int64_t *ns, int n)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += xs[i] ? norm_blocks(ns[i]) : 0;
    if (!total) return 0.0;
    double *d = NULL, *h = (double *)ast_xmalloc((size_t)total * sizeof *h);
    AST_CUDA_CHECK(cudaMallocAsync((void **)&d, (size_t)total * sizeof *d, AST_CUDA_STREAM));
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (!xs[i] || !ns[i]) continue;
        block_squares_kernel<<<(unsigned)norm_blocks(ns[i]), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(xs[i], ns[i], d + at);
        AST_CUDA_LAUNCHED();
        at += norm_blocks(ns[i]);
    }
    AST_CUDA_CHECK(cudaMemcpyAsync(h, d, (size_t)at * sizeof *d, cudaMemcpyDeviceToHost, AST_CUDA_STREAM));
    AST_CUDA_CHECK(cudaFreeAsync(d, AST_CUDA_STREAM));
    AST_CUDA_CHECK(cudaStreamSynchronize(AST_CUDA_STREAM));
    double s = 0.0;
    for (int64_t k = 0; k < at; k++) s += h[k];
    free(h);
    return s;
}

__global__ void scale_kernel(float *x, int64_t n, float s)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

static void cuda_scale(const ast_backend *b, float *const *xs, const int64_t *ns, int n, float s)
{
    for (int i = 0; i < n; i++) {
        if (!xs[i] || !ns[i]) continue;
        scale_kernel<<<ast_cuda_blocks(ns[i]), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(xs[i], ns[i], s);
        AST_CUDA_LAUNCHED();
    }
}

/* ---- AdamW: two launches for all parameters -------------------------------- */

/* flags[j] = 1 when job j's whole gradient has a non-zero element. Every
 * writer writes 1, so the order of writes does not matter. */
__global__ void adamw_flags_kernel(const ast_adamw_job *jobs, int *flags)
{
    const ast_adamw_job *j = &jobs[blockIdx.y];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < j->whole_n; i += (int64_t)gridDim.x * blockDim.x)
        if (j->g_whole[i] != 0.0f) {
            flags[blockIdx.y] = 1;
            return;
        }
}

__global__ void adamw_update_kernel(const ast_adamw_job *jobs, const int *flags, ast_adamw_hyper h)
{
    const ast_adamw_job *j = &jobs[blockIdx.y];
    if (!flags[blockIdx.y]) return;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < j->n; i += (int64_t)gridDim.x * blockDim.x) {
        float g = j->g[i];
        float m = h.beta1 * j->m[i] + (1.0f - h.beta1) * g;
        float v = h.beta2 * j->v[i] + (1.0f - h.beta2) * g * g;
        j->m[i] = m, j->v[i] = v;
        float vhat = v;
        if (j->vmax) {
            vhat = v > j->vmax[i] ? v : j->vmax[i];
            j->vmax[i] = vhat;
        }
        j->p[i] = j->p[i] * h.decay - h.step_size * m / (sqrtf(vhat) / h.bc2_sqrt + h.eps);
    }
}

/* The job table stays on the device between steps and is sent again only
 * when it changes (it does not, step after step: the same parameters). */
static struct {
    ast_adamw_job *host, *dev;
    int *flags;
    int n;
} table;

static void upload_jobs(const ast_adamw_job *jobs, int n)
{
    if (table.n == n && !memcmp(table.host, jobs, (size_t)n * sizeof *jobs)) return;
    if (table.n != n) {
        free(table.host);
        if (table.dev) AST_CUDA_CHECK(cudaFree(table.dev));
        if (table.flags) AST_CUDA_CHECK(cudaFree(table.flags));
        table.host = (ast_adamw_job *)ast_xmalloc((size_t)n * sizeof *jobs);
        AST_CUDA_CHECK(cudaMalloc((void **)&table.dev, (size_t)n * sizeof *jobs));
        AST_CUDA_CHECK(cudaMalloc((void **)&table.flags, (size_t)n * sizeof *table.flags));
        table.n = n;
    }
    memcpy(table.host, jobs, (size_t)n * sizeof *jobs);
    AST_CUDA_CHECK(cudaMemcpyAsync(table.dev, table.host, (size_t)n * sizeof *jobs, cudaMemcpyHostToDevice, AST_CUDA_STREAM));
}

static void cuda_adamw(const ast_backend *b, const ast_adamw_job *jobs, int n, const ast_adamw_hyper *h)
{
    if (n <= 0) return;
    /* No wait for the previous step: its kernels read the device table before
     * a new upload on the same stream writes it, a copy from pageable memory
     * has taken the host table before cudaMemcpyAsync returns, and cudaFree
     * (a table of another size) waits for the device itself. */
    upload_jobs(jobs, n);
    AST_CUDA_CHECK(cudaMemsetAsync(table.flags, 0, (size_t)n * sizeof *table.flags, AST_CUDA_STREAM));
    dim3 grid(64, (unsigned)n);
    adamw_flags_kernel<<<grid, AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(table.dev, table.flags);
    AST_CUDA_LAUNCHED();
    adamw_update_kernel<<<grid, AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(table.dev, table.flags, *h);
    AST_CUDA_LAUNCHED();
}

static const ast_ops cuda_ops = {
    .n_ops = sizeof(ast_ops) / sizeof(void (*)(void)) - 1,
#define AST_OP(slot, ret, name, params, args) .name = ast_cuda_##name,
#include "alphast/ops.def"
#undef AST_OP
};

static const ast_backend cuda = {
    .name = "cuda",
    .memory = AST_MEM_DEVICE,
    .ops = &cuda_ops,
    .buffer_alloc = cuda_alloc,
    .buffer_free = cuda_free,
    .to_backend = cuda_to_backend,
    .to_host = cuda_to_host,
    .synchronize = cuda_synchronize,
    .available = cuda_available,
    .zero = cuda_zero,
    .accumulate = cuda_accumulate,
    .sum_squares = cuda_sum_squares,
    .scale = cuda_scale,
    .adamw = cuda_adamw,
};

extern "C" const ast_backend *ast_backend_cuda(void) { return &cuda; }
