/* Tensor shapes and arena tensors. */
#include <string.h>

#include "engine/backend.h"

int64_t ast_shape_size(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    return n;
}

int ast_same_shape(const ast_tensor *a, const ast_tensor *b)
{
    if (a->ndim != b->ndim) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

int64_t ast_cols(const ast_tensor *t) { return t->shape[t->ndim - 1]; }
int64_t ast_rows(const ast_tensor *t) { return t->size / ast_cols(t); }

const char *ast_shape_str(const ast_tensor *t, char *buf, size_t n)
{
    size_t off = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && off < n; i++)
        off += (size_t)snprintf(buf + off, n - off, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (off < n) snprintf(buf + off, n - off, "]");
    return buf;
}

static ast_tensor *tensor_header(ast_ctx *c, int ndim, const int64_t *shape)
{
    AST_ASSERT(ndim >= 1 && ndim <= AST_MAX_DIMS, "tensor with %d dims (1..%d allowed)", ndim, AST_MAX_DIMS);
    ast_tensor *t = ast_alloc(c, sizeof *t);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        AST_ASSERT(shape[i] >= 0, "negative dimension %lld", (long long)shape[i]);
        t->shape[i] = shape[i];
    }
    t->size = ast_shape_size(ndim, shape);
    t->memory = ast_ctx_backend(c)->memory;
    return t;
}

/* Zeroed by the backend's zero service: no kernel of its own. */
ast_tensor *ast_zeros(ast_ctx *c, int ndim, const int64_t *shape)
{
    ast_tensor *t = tensor_header(c, ndim, shape);
    t->data = ast_data_alloc(c, (size_t)t->size * sizeof(float));
    return t;
}

ast_tensor *ast_empty(ast_ctx *c, int ndim, const int64_t *shape)
{
    ast_tensor *t = tensor_header(c, ndim, shape);
    t->data = ast_data_alloc_uninit(c, (size_t)t->size * sizeof(float));
    return t;
}

ast_tensor *ast_tensor_from(ast_ctx *c, int ndim, const int64_t *shape, const float *data)
{
    ast_tensor *t = ast_zeros(c, ndim, shape);
    if (data) ast_tensor_write(c, t, 0, t->size, data);
    return t;
}

void ast_tensor_read(const ast_ctx *c, const ast_tensor *t, int64_t off, int64_t n, float *host_dst)
{
    AST_ASSERT(off >= 0 && n >= 0 && off + n <= t->size, "read of [%lld, %lld) from %lld floats", (long long)off,
               (long long)(off + n), (long long)t->size);
    const ast_backend *b = ast_ctx_backend(c);
    b->to_host(b, host_dst, t->data + off, (size_t)n * sizeof(float));
}

void ast_tensor_write(const ast_ctx *c, ast_tensor *t, int64_t off, int64_t n, const float *host_src)
{
    AST_ASSERT(off >= 0 && n >= 0 && off + n <= t->size, "write of [%lld, %lld) into %lld floats", (long long)off,
               (long long)(off + n), (long long)t->size);
    const ast_backend *b = ast_ctx_backend(c);
    b->to_backend(b, t->data + off, host_src, (size_t)n * sizeof(float));
}
