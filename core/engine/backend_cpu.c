/* The CPU backend: host memory, OpenBLAS GEMMs, the kernels in ops/ and the
 * services in backend_cpu_services.c. */
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

static const ast_ops cpu_ops = {
    .n_ops = sizeof(ast_ops) / sizeof(void (*)(void)) - 1,
#define AST_OP(slot, ret, name, params, args) .name = ast_cpu_##name,
#include "alphast/ops.def"
#undef AST_OP
};

static const ast_backend cpu = {
    .name = "cpu",
    .memory = AST_MEM_HOST,
    .ops = &cpu_ops,
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
    .capture_begin = cpu_capture_begin, /* always refuses: capture_end and the graph calls stay NULL */
};

const ast_backend *ast_backend_cpu(void) { return &cpu; }
