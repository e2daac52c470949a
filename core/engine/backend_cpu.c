/* The CPU backend: host memory, OpenBLAS GEMMs and the kernels in ops/,
 * and the table of backends a config's `device:` can name. */
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
};

const ast_backend *ast_backend_cpu(void) { return &cpu; }

enum { MAX_BACKENDS = 8 };
static const ast_backend *backends[MAX_BACKENDS] = {&cpu};
static int n_backends = 1;
static char names[256] = "cpu";

const ast_backend *ast_backend_find(const char *name)
{
    for (int i = 0; i < n_backends; i++)
        if (!strcmp(backends[i]->name, name)) return backends[i];
    return NULL;
}

const char *ast_backend_names(void) { return names; }

int ast_backend_register(const ast_backend *b)
{
    if (n_backends == MAX_BACKENDS || ast_backend_find(b->name)) return -1;
    if (strlen(names) + strlen(b->name) + 2 > sizeof names) return -1;
    backends[n_backends++] = b;
    strcat(strcat(names, "|"), b->name);
    return 0;
}
