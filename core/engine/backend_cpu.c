/* The CPU backend: host memory, OpenBLAS GEMMs, the kernels in ops/ and the
 * services in backend_cpu_services.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"

static void *cpu_alloc(const ast_backend *b, size_t bytes)
{
    void *p = NULL;
    /* 64 bytes: a cache line and an AVX-512 register. */
    return posix_memalign(&p, 64, bytes ? bytes : 64) ? NULL : p;
}

static void cpu_free(const ast_backend *b, void *buffer) { free(buffer); }
static void cpu_copy(const ast_backend *b, void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void cpu_synchronize(const ast_backend *b) {}
static int cpu_available(const ast_backend *b, char *why, size_t n) { return 1; }
/* The CPU reads host memory where it is: nothing waits for a copy. */
static int64_t cpu_host_traffic(const ast_backend *b) { return 0; }

static int cpu_capture_begin(const ast_backend *b, char *why, size_t n)
{
    snprintf(why, n, "the cpu backend runs each op as it is called; there is no queue to capture");
    return -1;
}

static ast_op_kernel cpu_kernels[AST_N_OPS];
static const ast_op_family cpu_families[] = {ast_cpu_linalg_kernels, ast_cpu_reduce_kernels,
                                                  ast_cpu_routing_kernels,
                                                  ast_cpu_loss_kernels,
                                                  ast_cpu_aligned_kernels,
                                                  ast_cpu_shape_kernels,
                                                  ast_cpu_norm_kernels,
                                                  ast_cpu_elementwise_kernels,
                                                  ast_cpu_grouped_kernels,
                                                  ast_cpu_moe_kernels,
                                                  ast_cpu_attention_kernels};
static pthread_once_t kernels_filled = PTHREAD_ONCE_INIT;

static void fill_kernels(void)
{
    for (size_t i = 0; i < sizeof cpu_families / sizeof *cpu_families; i++) cpu_families[i](cpu_kernels);
}

static const ast_backend cpu = {
    .name = "cpu",
    .memory = AST_MEM_HOST,
    .kernels = cpu_kernels,
    .buffer_alloc = cpu_alloc,
    .buffer_free = cpu_free,
    .to_backend = cpu_copy,
    .to_host = cpu_copy,
    .synchronize = cpu_synchronize,
    .available = cpu_available,
    .zero = ast_cpu_zero,
    .accumulate = ast_cpu_accumulate,
    .sum_squares = ast_cpu_sum_squares,
    .clip = ast_cpu_clip,
    .adamw = ast_cpu_adamw,
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .host_traffic = cpu_host_traffic,
    .to_pinned = cpu_copy,
    .capture_begin = cpu_capture_begin, /* always refuses: capture_end and the graph calls stay NULL */
};

const ast_backend *ast_backend_cpu(void)
{
    pthread_once(&kernels_filled, fill_kernels);
    return &cpu;
}
