/* The CUDA backend: device buffers from cudaMalloc, copies on the calling
 * thread's stream, cuBLAS for the GEMMs, the kernels of ops_*.cu, and the
 * services of the layers above (zeroing, the backward's seed, AdamW,
 * clipping's norm and scaling) as kernels here. */
#include <execinfo.h>
#include <pthread.h>
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

/* The GPU of local rank `local` of a run over several processes: the
 * visible ones are dealt out in turn (CUDA_VISIBLE_DEVICES, or a launcher
 * that gives each rank its own, leaves one visible). cudaSetDevice holds
 * for the calling thread, the one that queues every step. */
static int cuda_bind(const ast_backend *b, int local, unsigned char uuid[16], char *why, size_t n)
{
    int count = 0, ordinal;
    cudaDeviceProp prop;
    if (!device_probe(why, n) || cudaGetDeviceCount(&count) != cudaSuccess || count < 1) return -1;
    ordinal = local % count;
    cudaError_t e = cudaSetDevice(ordinal);
    if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, ordinal);
    if (e != cudaSuccess) {
        snprintf(why, n, "GPU %d of the %d visible (local rank %d): %s", ordinal, count, local, cudaGetErrorString(e));
        return -1;
    }
    memcpy(uuid, prop.uuid.bytes, 16);
    return 0;
}

static void *cuda_alloc(const ast_backend *b, size_t bytes)
{
    void *p = NULL;
    /* cudaMalloc's blocks are 256-byte aligned, more than the 64 promised. */
    return cudaMalloc(&p, bytes ? bytes : 256) == cudaSuccess ? p : (cudaGetLastError(), (void *)NULL);
}

static void cuda_free(const ast_backend *b, void *buffer) { AST_CUDA_CHECK(cudaFree(buffer)); }

/* ---- copies, and what a capture may not contain ---------------------------- */

/* Per thread: copies that made the host wait (backend.h's host_traffic),
 * and the capture under way with the first reason it cannot be replayed. */
static thread_local int64_t traffic;
static thread_local struct {
    int on;
    char why[256];
} capture;

static int64_t cuda_host_traffic(const ast_backend *b) { return traffic; }

/* ALPHAST_TRACE_TRAFFIC=1: where each copy that makes the host wait comes
 * from (the call stack, on standard error), for a plugin author who wants
 * a step captured. */
static void count_traffic(const char *what)
{
    static int trace = -1;
    traffic++;
    if (trace < 0) trace = getenv("ALPHAST_TRACE_TRAFFIC") && strcmp(getenv("ALPHAST_TRACE_TRAFFIC"), "0");
    if (!trace) return;
    void *frames[16];
    int n = backtrace(frames, 16);
    fprintf(stderr, "alphast: the host waits: %s, from\n", what);
    backtrace_symbols_fd(frames + 1, n - 1, 2);
}

/* Marks the capture under way as one that cannot be replayed: the copy is
 * not made (a capture runs nothing), and capture_end reports why. */
static void capture_spoiled(const char *what)
{
    if (!capture.why[0])
        snprintf(capture.why, sizeof capture.why, "the step %s, which a graph cannot replay (the host waits for it)",
                 what);
}

/* The pinned blocks host_alloc made, so a copy's source is checked without
 * a CUDA call (none is made while capturing but the copy itself). */
#define MAX_PINNED 1024
static struct {
    pthread_mutex_t lock;
    const char *at[MAX_PINNED];
    size_t bytes[MAX_PINNED];
    int n;
} pinned = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0};

static int is_pinned(const void *p)
{
    const char *c = (const char *)p;
    int found = 0;
    pthread_mutex_lock(&pinned.lock);
    for (int i = 0; i < pinned.n && !found; i++) found = c >= pinned.at[i] && c < pinned.at[i] + pinned.bytes[i];
    pthread_mutex_unlock(&pinned.lock);
    return found;
}

/* Host to device on this thread's stream. From pinned memory the copy is
 * queued (and captured, reading the memory when the graph runs); from
 * pageable memory CUDA stages it first, a wait the graph cannot hold. */
extern "C" void ast_cuda_copy_in(void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    if (!is_pinned(src)) {
        count_traffic("a copy from pageable host memory");
        if (capture.on) return capture_spoiled("copies pageable host memory to the device");
    }
    AST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, AST_CUDA_STREAM));
}

static void cuda_to_backend(const ast_backend *b, void *dst, const void *src, size_t bytes)
{
    ast_cuda_copy_in(dst, src, bytes);
}

/* The host reads what it asked for at once: the copy is waited for. */
static void cuda_to_host(const ast_backend *b, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    count_traffic("a read of device memory");
    if (capture.on) {
        memset(dst, 0, bytes);
        return capture_spoiled("reads device memory on the host");
    }
    AST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, AST_CUDA_STREAM));
    AST_CUDA_CHECK(cudaStreamSynchronize(AST_CUDA_STREAM));
}

/* Into pinned memory: queued, no wait (backend.h's to_pinned). */
static void cuda_to_pinned(const ast_backend *b, void *dst, const void *src, size_t bytes)
{
    if (!bytes) return;
    AST_ASSERT(is_pinned(dst), "to_pinned: the destination is not pinned host memory");
    AST_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, AST_CUDA_STREAM));
}

static void cuda_synchronize(const ast_backend *b)
{
    if (capture.on) return capture_spoiled("waits for the device");
    AST_CUDA_CHECK(cudaStreamSynchronize(AST_CUDA_STREAM));
}

static void *cuda_host_alloc(const ast_backend *b, size_t bytes)
{
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 64) != cudaSuccess) return cudaGetLastError(), (void *)NULL;
    pthread_mutex_lock(&pinned.lock);
    AST_ASSERT(pinned.n < MAX_PINNED, "more than %d pinned host blocks", MAX_PINNED);
    pinned.at[pinned.n] = (const char *)p, pinned.bytes[pinned.n++] = bytes ? bytes : 64;
    pthread_mutex_unlock(&pinned.lock);
    return p;
}

static void cuda_host_free(const ast_backend *b, void *p)
{
    pthread_mutex_lock(&pinned.lock);
    for (int i = 0; i < pinned.n; i++)
        if (pinned.at[i] == p) {
            pinned.n--;
            pinned.at[i] = pinned.at[pinned.n], pinned.bytes[i] = pinned.bytes[pinned.n];
            break;
        }
    pthread_mutex_unlock(&pinned.lock);
    AST_CUDA_CHECK(cudaFreeHost(p));
}

/* ---- graphs ----------------------------------------------------------------- */

static int cuda_capture_begin(const ast_backend *b, char *why, size_t n)
{
    /* Thread-local mode: other threads' CUDA calls go on; this thread's
     * unsafe ones fail (they would be bugs: every copy goes through the
     * checks above). */
    cudaError_t e = cudaStreamBeginCapture(AST_CUDA_STREAM, cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
        snprintf(why, n, "cudaStreamBeginCapture: %s", cudaGetErrorString(e));
        return -1;
    }
    capture.on = 1, capture.why[0] = 0;
    return 0;
}

static void *cuda_capture_end(const ast_backend *b, char *why, size_t n)
{
    cudaGraph_t g = NULL;
    cudaGraphExec_t exec = NULL;
    cudaError_t e = cudaStreamEndCapture(AST_CUDA_STREAM, &g);
    capture.on = 0;
    if (!capture.why[0] && e != cudaSuccess) snprintf(capture.why, sizeof capture.why, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
    if (!capture.why[0] && (e = cudaGraphInstantiate(&exec, g, 0)) != cudaSuccess)
        snprintf(capture.why, sizeof capture.why, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
    if (g) AST_CUDA_CHECK(cudaGraphDestroy(g));
    if (capture.why[0]) {
        cudaGetLastError();
        snprintf(why, n, "%s", capture.why);
        return NULL;
    }
    return exec;
}

static void cuda_graph_launch(const ast_backend *b, void *graph)
{
    AST_CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)graph, AST_CUDA_STREAM));
}

static void cuda_graph_free(const ast_backend *b, void *graph) { AST_CUDA_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)graph)); }

extern "C" cublasHandle_t ast_cuda_blas(void)
{
    static cublasHandle_t h;
    if (!h) {
        AST_CUBLAS_CHECK(cublasCreate(&h));
        AST_CUBLAS_CHECK(cublasSetStream(h, AST_CUDA_STREAM));
        /* float32 as the CPU backend computes it: the default math mode
         * uses no TF32 tensor cores (as PyTorch's default allow_tf32=False). */
        AST_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
        /* A workspace of its own, so no cuBLAS call allocates inside a graph
         * capture (32 MiB: NVIDIA's figure for Hopper). */
        void *work = NULL;
        AST_CUDA_CHECK(cudaMalloc(&work, (size_t)32 << 20));
        AST_CUBLAS_CHECK(cublasSetWorkspace(h, work, (size_t)32 << 20));
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

/* The block sums of every array, added in order by one thread. */
__global__ void sum_blocks_kernel(const double *sums, int64_t n, double *out)
{
    double s = 0.0;
    for (int64_t k = 0; k < n; k++) s += sums[k];
    *out = s;
}

/* Room for the block sums, grown (outside any capture: the eager step
 * before it has asked for the same) and kept. */
static double *block_sums(int64_t n)
{
    static double *d;
    static int64_t cap;
    if (n > cap) {
        if (d) AST_CUDA_CHECK(cudaFree(d));
        AST_CUDA_CHECK(cudaMalloc((void **)&d, (size_t)n * sizeof *d));
        cap = n;
    }
    return d;
}

static void cuda_sum_squares(const ast_backend *b, float *const *xs, const int64_t *ns, int n, double *out)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += xs[i] ? norm_blocks(ns[i]) : 0;
    double *d = block_sums(total > 0 ? total : 1);
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (!xs[i] || !ns[i]) continue;
        block_squares_kernel<<<(unsigned)norm_blocks(ns[i]), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(xs[i], ns[i], d + at);
        AST_CUDA_LAUNCHED();
        at += norm_blocks(ns[i]);
    }
    sum_blocks_kernel<<<1, 1, 0, AST_CUDA_STREAM>>>(d, at, out);
    AST_CUDA_LAUNCHED();
}

/* Clipping's scaling, with the factor worked out on the device from the
 * norm, as the CPU's ast_cpu_clip does on the host. */
__global__ void clip_kernel(float *x, int64_t n, const double *sumsq, float max_norm)
{
    double coef = ast_clip_coef(*sumsq, max_norm);
    if (!(coef < 1.0)) return;
    float s = (float)coef;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

static void cuda_clip(const ast_backend *b, float *const *xs, const int64_t *ns, int n, const double *sumsq, float max_norm)
{
    for (int i = 0; i < n; i++) {
        if (!xs[i] || !ns[i]) continue;
        clip_kernel<<<ast_cuda_blocks(ns[i]), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(xs[i], ns[i], sumsq, max_norm);
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

__global__ void adamw_update_kernel(const ast_adamw_job *jobs, const int *flags, const ast_adamw_hyper *hp,
                                    const double *sumsq, const float *loss)
{
    const ast_adamw_job *j = &jobs[blockIdx.y];
    if (!flags[blockIdx.y] || (sumsq && !isfinite(*sumsq)) || (loss && !isfinite(*loss))) return;
    const ast_adamw_hyper h = *hp;
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
    ast_cuda_copy_in(table.dev, table.host, (size_t)n * sizeof *jobs);
}

static void cuda_adamw(const ast_backend *b, const ast_adamw_job *jobs, int n, const ast_adamw_hyper *h,
                       const double *sumsq, const float *loss)
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
    adamw_update_kernel<<<grid, AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(table.dev, table.flags, h, sumsq, loss);
    AST_CUDA_LAUNCHED();
}

static ast_op_kernel cuda_kernels[AST_N_OPS];
static const ast_op_family cuda_families[] = {ast_cuda_linalg_kernels, ast_cuda_reduce_kernels,
                                                  ast_cuda_routing_kernels,
                                                  ast_cuda_loss_kernels,
                                                  ast_cuda_aligned_kernels,
                                                  ast_cuda_shape_kernels,
                                                  ast_cuda_norm_kernels,
                                                  ast_cuda_elementwise_kernels,
                                                  ast_cuda_grouped_kernels,
                                                  ast_cuda_moe_kernels};
static pthread_once_t kernels_filled = PTHREAD_ONCE_INIT;

static void fill_kernels(void)
{
    for (size_t i = 0; i < sizeof cuda_families / sizeof *cuda_families; i++) cuda_families[i](cuda_kernels);
}

static const ast_backend cuda = {
    .name = "cuda",
    .memory = AST_MEM_DEVICE,
    .kernels = cuda_kernels,
    .buffer_alloc = cuda_alloc,
    .buffer_free = cuda_free,
    .to_backend = cuda_to_backend,
    .to_host = cuda_to_host,
    .synchronize = cuda_synchronize,
    .available = cuda_available,
    .bind = cuda_bind,
    .zero = cuda_zero,
    .accumulate = cuda_accumulate,
    .sum_squares = cuda_sum_squares,
    .clip = cuda_clip,
    .adamw = cuda_adamw,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .host_traffic = cuda_host_traffic,
    .to_pinned = cuda_to_pinned,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .graph_launch = cuda_graph_launch,
    .graph_free = cuda_graph_free,
};

extern "C" const ast_backend *ast_backend_cuda(void)
{
    pthread_once(&kernels_filled, fill_kernels);
    return &cuda;
}
