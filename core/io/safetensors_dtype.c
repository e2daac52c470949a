/* The safetensors element types and shape text for messages. */
#include <stdio.h>
#include <string.h>

#include "io/safetensors.h"

static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {
    [AST_ST_BOOL] = {"BOOL", 1}, [AST_ST_U8] = {"U8", 1},     [AST_ST_I8] = {"I8", 1},
    [AST_ST_I16] = {"I16", 2},   [AST_ST_U16] = {"U16", 2},   [AST_ST_F16] = {"F16", 2},
    [AST_ST_BF16] = {"BF16", 2}, [AST_ST_I32] = {"I32", 4},   [AST_ST_U32] = {"U32", 4},
    [AST_ST_F32] = {"F32", 4},   [AST_ST_F64] = {"F64", 8},   [AST_ST_I64] = {"I64", 8},
    [AST_ST_U64] = {"U64", 8},
};
#define N_DTYPES ((int)(sizeof DTYPES / sizeof DTYPES[0]))

const char *ast_st_dtype_name(ast_st_dtype t)
{
    AST_ASSERT((int)t >= 0 && (int)t < N_DTYPES, "dtype %d out of range", (int)t);
    return DTYPES[t].name;
}

size_t ast_st_dtype_size(ast_st_dtype t)
{
    AST_ASSERT((int)t >= 0 && (int)t < N_DTYPES, "dtype %d out of range", (int)t);
    return DTYPES[t].size;
}

int ast_st_dtype_parse(const char *name, ast_st_dtype *out)
{
    for (int i = 0; i < N_DTYPES; i++)
        if (!strcmp(DTYPES[i].name, name)) {
            *out = (ast_st_dtype)i;
            return 0;
        }
    return -1;
}

const char *ast_st_shape_str(int ndim, const int64_t *shape, char *buf, size_t n)
{
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}
