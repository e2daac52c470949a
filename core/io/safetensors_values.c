/* Reading a tensor's values as float32 or int64, checking its shape. The
 * data may be unaligned inside the file buffer, hence memcpy per element. */
#include <math.h>
#include <string.h>

#include "io/safetensors.h"

/* IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
static float f16_to_f32(uint16_t h)
{
    int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v;
    if (exp == 0) v = ldexpf((float)mant, -24);
    else if (exp == 31) v = mant ? NAN : INFINITY;
    else v = ldexpf((float)(mant | 0x400), exp - 25);
    return (h & 0x8000) ? -v : v;
}

/* bfloat16 is the upper half of a float32. */
static float bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

#define DECODE(type, expr)                                                                                   \
    for (int64_t i = 0; i < n; i++) {                                                                        \
        type x;                                                                                              \
        memcpy(&x, src + i * (int64_t)sizeof x, sizeof x);                                                   \
        out[i] = (expr);                                                                                     \
    }

static int decode_f32(ast_st_dtype dt, const unsigned char *src, int64_t n, float *out)
{
    switch (dt) {
    case AST_ST_F32: memcpy(out, src, (size_t)n * sizeof *out); return 0;
    case AST_ST_F64: DECODE(double, (float)x) return 0;
    case AST_ST_F16: DECODE(uint16_t, f16_to_f32(x)) return 0;
    case AST_ST_BF16: DECODE(uint16_t, bf16_to_f32(x)) return 0;
    case AST_ST_I64: DECODE(int64_t, (float)x) return 0;
    case AST_ST_I32: DECODE(int32_t, (float)x) return 0;
    default: return -1;
    }
}

static int decode_i64(ast_st_dtype dt, const unsigned char *src, int64_t n, int64_t *out)
{
    switch (dt) {
    case AST_ST_I64: memcpy(out, src, (size_t)n * sizeof *out); return 0;
    case AST_ST_I32: DECODE(int32_t, x) return 0;
    case AST_ST_U8:
    case AST_ST_BOOL: DECODE(uint8_t, x) return 0;
    default: return -1;
    }
}

/* Index of tensor `name` with the expected shape (if given), or -1. */
static int lookup(const ast_st_file *f, const char *name, int ndim, const int64_t *shape, ast_error *e)
{
    int i = ast_st_find(f, name);
    if (i < 0) {
        ast_error_set(e, "%s: no tensor '%s' among its %d tensors; check the name or the file", ast_st_path(f),
                      name, ast_st_count(f));
        return -1;
    }
    if (shape && (ast_st_ndim(f, i) != ndim ||
                  memcmp(ast_st_shape(f, i), shape, (size_t)ndim * sizeof *shape) != 0)) {
        char have[160], want[160];
        ast_error_set(e, "%s: tensor '%s' has shape %s, expected %s; the file was made for another model "
                      "configuration", ast_st_path(f), name,
                      ast_st_shape_str(ast_st_ndim(f, i), ast_st_shape(f, i), have, sizeof have),
                      ast_st_shape_str(ndim, shape, want, sizeof want));
        return -1;
    }
    return i;
}

static int wrong_dtype(const ast_st_file *f, int i, const char *wanted, ast_st_dtype suggested, ast_error *e)
{
    ast_error_set(e, "%s: tensor '%s' is %s, which cannot be read as %s; store it as %s", ast_st_path(f),
                  ast_st_name(f, i), ast_st_dtype_name(ast_st_dtype_of(f, i)), wanted,
                  ast_st_dtype_name(suggested));
    return -1;
}

int ast_st_read_f32(const ast_st_file *f, const char *name, int ndim, const int64_t *shape, float *out,
                    ast_error *e)
{
    int i = lookup(f, name, ndim, shape, e);
    if (i < 0) return -1;
    int64_t n = ast_st_numel(f, i);
    if (decode_f32(ast_st_dtype_of(f, i), ast_st_data(f, i), n, out) != 0) return wrong_dtype(f, i, "float", AST_ST_F32, e);
    for (int64_t k = 0; k < n; k++)
        if (!isfinite(out[k])) {
            ast_error_set(e, "%s: tensor '%s' holds %g at flat index %lld, not a finite float32; the file is "
                          "corrupt or was saved after training diverged", ast_st_path(f), name, (double)out[k],
                          (long long)k);
            return -1;
        }
    return 0;
}

int ast_st_read_i64(const ast_st_file *f, const char *name, int ndim, const int64_t *shape, int64_t *out,
                    ast_error *e)
{
    int i = lookup(f, name, ndim, shape, e);
    if (i < 0) return -1;
    if (decode_i64(ast_st_dtype_of(f, i), ast_st_data(f, i), ast_st_numel(f, i), out) != 0)
        return wrong_dtype(f, i, "an integer", AST_ST_I64, e);
    return 0;
}
