/* safetensors files (weights, checkpoints, golden dumps): any bytes either
 * open or fail with a message. A file that opens has consistent accessors
 * (every tensor found by name, its bytes readable, the float/integer
 * readers working or failing cleanly), and written back with the writer
 * it opens again to the same tensors and metadata. */
#include <math.h>

#include "fuzz.h"
#include "io/safetensors.h"

static size_t touch(const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += b[i];
    return sum;
}

static void check_readers(const ast_st_file *f, int i)
{
    ast_error e = {""};
    const char *name = ast_st_name(f, i);
    int64_t numel = ast_st_numel(f, i);
    int ndim = ast_st_ndim(f, i);
    /* numel * dtype size == nbytes <= the input size, so this is small. */
    float *x = malloc(((size_t)numel + 1) * sizeof *x);
    int64_t *n = malloc(((size_t)numel + 1) * sizeof *n);
    if (ast_st_read_f32(f, name, ndim, ast_st_shape(f, i), x, &e) == 0) {
        for (int64_t k = 0; k < numel; k++) FUZZ_CHECK(isfinite(x[k]), "ast_st_read_f32 gave a non-finite value");
    } else {
        FUZZ_CHECK_ERROR(&e, "ast_st_read_f32");
    }
    e.msg[0] = 0;
    if (ast_st_read_i64(f, name, ndim, ast_st_shape(f, i), n, &e) != 0) FUZZ_CHECK_ERROR(&e, "ast_st_read_i64");
    /* A shape that differs must be refused. */
    int64_t other[AST_ST_MAX_DIMS + 1];
    memcpy(other, ast_st_shape(f, i), (size_t)ndim * sizeof *other);
    other[ndim] = 2;
    FUZZ_CHECK(ast_st_read_f32(f, name, ndim + 1, other, x, &e) != 0, "a wrong ndim was accepted");
    free(x);
    free(n);
}

static void check_same(const ast_st_file *a, const ast_st_file *b)
{
    FUZZ_CHECK(ast_st_count(a) == ast_st_count(b), "written back: %d tensors, read %d", ast_st_count(b),
               ast_st_count(a));
    for (int i = 0; i < ast_st_count(a); i++) {
        const char *name = ast_st_name(a, i);
        int j = ast_st_find(b, name);
        FUZZ_CHECK(j >= 0, "written back: tensor '%s' is missing", name);
        FUZZ_CHECK(ast_st_dtype_of(a, i) == ast_st_dtype_of(b, j) && ast_st_ndim(a, i) == ast_st_ndim(b, j) &&
                       !memcmp(ast_st_shape(a, i), ast_st_shape(b, j), (size_t)ast_st_ndim(a, i) * sizeof(int64_t)),
                   "written back: tensor '%s' changed dtype or shape", name);
        FUZZ_CHECK(ast_st_nbytes(a, i) == ast_st_nbytes(b, j) &&
                       !memcmp(ast_st_data(a, i), ast_st_data(b, j), ast_st_nbytes(a, i)),
                   "written back: tensor '%s' changed its data", name);
    }
    FUZZ_CHECK(ast_st_metadata_count(b) <= ast_st_metadata_count(a), "written back: more metadata");
    for (int i = 0; i < ast_st_metadata_count(a); i++) {
        const char *key = ast_st_metadata_key(a, i), *va = ast_st_metadata(a, key), *vb = ast_st_metadata(b, key);
        FUZZ_CHECK(vb && !strcmp(va, vb), "written back: metadata '%s' is '%s', was '%s'", key, vb ? vb : "(missing)",
                   va);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4200], copy[4200];
    fuzz_path("in.safetensors", path, sizeof path);
    fuzz_path("out.safetensors", copy, sizeof copy);
    fuzz_write(path, data, size);
    ast_error e = {""};
    ast_st_file *f = ast_st_open(path, &e);
    if (!f) {
        FUZZ_CHECK_ERROR(&e, "ast_st_open");
        return 0;
    }
    size_t total = 0;
    ast_st_writer *w = ast_st_writer_new();
    for (int i = 0; i < ast_st_count(f); i++) {
        const char *name = ast_st_name(f, i);
        FUZZ_CHECK(ast_st_find(f, name) == i, "ast_st_find('%s') is not %d", name, i);
        FUZZ_CHECK(ast_st_dtype_name(ast_st_dtype_of(f, i)) != NULL, "a tensor has no dtype name");
        total += ast_st_nbytes(f, i);
        touch(ast_st_data(f, i), ast_st_nbytes(f, i));
        check_readers(f, i);
        ast_st_writer_add(w, name, ast_st_dtype_of(f, i), ast_st_ndim(f, i), ast_st_shape(f, i), ast_st_data(f, i));
    }
    FUZZ_CHECK(total <= size, "the tensors hold %zu bytes of a %zu-byte file", total, size);
    FUZZ_CHECK(ast_st_find(f, "\x01no such tensor") < 0, "found a tensor that is not there");
    for (int i = 0; i < ast_st_metadata_count(f); i++) {
        FUZZ_CHECK(ast_st_metadata(f, ast_st_metadata_key(f, i)) != NULL, "a metadata key is not found");
        ast_st_writer_metadata(w, ast_st_metadata_key(f, i), ast_st_metadata_value(f, i));
    }
    if (ast_st_writer_write(w, copy, &e) == 0) {
        ast_st_file *back = ast_st_open(copy, &e);
        FUZZ_CHECK(back, "the file written back does not open: %s", e.msg);
        check_same(f, back);
        ast_st_close(back);
    } else {
        FUZZ_CHECK_ERROR(&e, "ast_st_writer_write");
    }
    ast_st_writer_free(w);
    ast_st_close(f);
    return 0;
}
