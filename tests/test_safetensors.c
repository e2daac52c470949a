/* safetensors reading, validation, byte-exact writing, parameter stores and
 * atomic replacement, against the golden PyTorch exports and hand-made
 * (corrupted) files in a temporary directory. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "io/safetensors.h"

static const char *const CASES[] = {"baseline", "gated", "moe", "gated_moe", "gated_moe_full"};
#define N_CASES 5

/* ---- helpers --------------------------------------------------------------- */

static char tmpdir[256];

static void make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/alphast_st_XXXXXX");
    cr_assert(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

/* Removes the directory and what the tests put in it (files and empty
 * subdirectories). */
static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    if (!d) return;
    for (struct dirent *ent; (ent = readdir(d));) {
        if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", tmpdir, ent->d_name);
        if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
    rmdir(tmpdir);
}

TestSuite(st_golden, .init = make_tmpdir, .fini = remove_tmpdir);
TestSuite(st_malformed, .init = make_tmpdir, .fini = remove_tmpdir);
TestSuite(st_values, .init = make_tmpdir, .fini = remove_tmpdir);
TestSuite(st_params, .init = make_tmpdir, .fini = remove_tmpdir);
TestSuite(atomic_file, .init = make_tmpdir, .fini = remove_tmpdir);

static const char *golden(const char *file)
{
    static char p[1024];
    const char *root = getenv("ALPHAST_TEST_DATA");
    cr_assert(root, "ALPHAST_TEST_DATA is not set; run through make check");
    snprintf(p, sizeof p, "%s/golden/%s", root, file);
    return p;
}

static const char *in_tmp(const char *file)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, file);
    return p;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *in = fopen(path, "rb");
    cr_assert(in, "%s: %s", path, strerror(errno));
    fseek(in, 0, SEEK_END);
    *n = (size_t)ftell(in);
    rewind(in);
    unsigned char *b = malloc(*n + 1);
    cr_assert_eq(fread(b, 1, *n, in), *n);
    fclose(in);
    return b;
}

static void spill(const char *path, const void *bytes, size_t n)
{
    FILE *out = fopen(path, "wb");
    cr_assert(out, "%s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(bytes, 1, n, out), n);
    fclose(out);
}

/* A safetensors file from a header text and a data buffer. */
static const char *handmade(const char *name, const char *json, const void *buffer, size_t n)
{
    size_t len = strlen(json);
    unsigned char *b = malloc(8 + len + n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)len >> (8 * i));
    memcpy(b + 8, json, len);
    if (n) memcpy(b + 8 + len, buffer, n);
    const char *path = in_tmp(name);
    spill(path, b, 8 + len + n);
    free(b);
    return path;
}

/* Errors are one line that starts with the file's path. */
static void assert_message(const ast_error *e, const char *path, const char *part)
{
    cr_assert(!strncmp(e->msg, path, strlen(path)), "message \"%s\" does not start with %s", e->msg, path);
    cr_assert(strstr(e->msg, part), "message \"%s\" lacks \"%s\"", e->msg, part);
    cr_assert(!strchr(e->msg, '\n'), "message \"%s\" spans lines", e->msg);
}

static void expect_open_error(const char *path, const char *part)
{
    ast_error e = {{0}};
    ast_st_file *f = ast_st_open(path, &e);
    cr_assert_null(f, "%s opened although it is malformed", path);
    assert_message(&e, path, part);
}

static int count_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    cr_assert(d, "%s: %s", dir, strerror(errno));
    int n = 0;
    for (struct dirent *ent; (ent = readdir(d));) n += strstr(ent->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

static cJSON *case_json(const char *name)
{
    char file[128];
    snprintf(file, sizeof file, "%s.json", name);
    size_t n;
    char *text = (char *)slurp(golden(file), &n);
    cJSON *j = cJSON_ParseWithLength(text, n);
    free(text);
    cr_assert(j, "%s is not JSON", file);
    return j;
}

static ast_st_file *open_ok(const char *path)
{
    ast_error e = {{0}};
    ast_st_file *f = ast_st_open(path, &e);
    cr_assert(f, "%s", e.msg);
    return f;
}

static float read_scalar(const ast_st_file *f, const char *name)
{
    ast_error e = {{0}};
    float v;
    cr_assert_eq(ast_st_read_f32(f, name, 1, (int64_t[]){1}, &v, &e), 0, "%s", e.msg);
    return v;
}

/* ---- golden files ---------------------------------------------------------- */

Test(st_golden, baseline_weights_known_tensor)
{
    ast_st_file *f = open_ok(golden("baseline.weights.safetensors"));
    int i = ast_st_find(f, "mlp_in_expression.0.weight");
    cr_assert_geq(i, 0);
    cr_assert_eq(ast_st_dtype_of(f, i), AST_ST_F32);
    cr_assert_eq(ast_st_ndim(f, i), 2);
    cr_assert_eq(ast_st_shape(f, i)[0], 64);
    cr_assert_eq(ast_st_shape(f, i)[1], 32);
    cr_assert_str_eq(ast_st_metadata(f, "config"), "baseline");
    cr_assert_null(ast_st_metadata(f, "no such key"));
    cr_assert_eq(ast_st_find(f, "no.such.tensor"), -1);

    float *w = malloc(64 * 32 * sizeof *w);
    ast_error e = {{0}};
    cr_assert_eq(ast_st_read_f32(f, "mlp_in_expression.0.weight", 2, (int64_t[]){64, 32}, w, &e), 0, "%s", e.msg);
    /* A PyTorch Linear(32, 64) starts in U(-1/sqrt(32), 1/sqrt(32)); the
     * golden weights are freshly initialised. */
    for (int k = 0; k < 64 * 32; k++) cr_assert_leq(fabsf(w[k]), 1.0f / sqrtf(32.0f), "w[%d] = %g", k, w[k]);
    free(w);
    ast_st_close(f);
}

/* The weights hold exactly the state_dict the case's JSON lists, in order. */
Test(st_golden, weights_match_the_parameter_list)
{
    for (int c = 0; c < N_CASES; c++) {
        char file[128];
        snprintf(file, sizeof file, "%s.weights.safetensors", CASES[c]);
        ast_st_file *f = open_ok(golden(file));
        cJSON *j = case_json(CASES[c]), *names = cJSON_GetObjectItem(j, "param_names"), *name;
        cr_assert_eq(ast_st_count(f), cJSON_GetArraySize(names), "%s", file);
        int i = 0;
        cJSON_ArrayForEach(name, names)
        {
            cr_assert_str_eq(ast_st_name(f, i), name->valuestring, "%s tensor %d", file, i);
            cr_assert_eq(ast_st_dtype_of(f, i), AST_ST_F32);
            i++;
        }
        cJSON_Delete(j);
        ast_st_close(f);
    }
}

/* Relations that hold inside every io file: t = t_int / T_d with T_d = 100,
 * no padding, and the loss equal to the JSON's and to the sum of its terms. */
Test(st_golden, io_files_are_consistent)
{
    for (int c = 0; c < N_CASES; c++) {
        char file[128];
        snprintf(file, sizeof file, "%s.io.safetensors", CASES[c]);
        ast_st_file *f = open_ok(golden(file));
        ast_error e = {{0}};
        int i = ast_st_find(f, "in.t_int");
        cr_assert_geq(i, 0);
        cr_assert_eq(ast_st_dtype_of(f, i), AST_ST_I64);
        int64_t t_int[2];
        float t[2], mask[48];
        cr_assert_eq(ast_st_read_i64(f, "in.t_int", 2, (int64_t[]){2, 1}, t_int, &e), 0, "%s", e.msg);
        cr_assert_eq(ast_st_read_f32(f, "in.diffusion_time", 2, (int64_t[]){2, 1}, t, &e), 0, "%s", e.msg);
        cr_assert_eq(ast_st_read_f32(f, "in.node_mask", 2, (int64_t[]){2, 24}, mask, &e), 0, "%s", e.msg);
        for (int b = 0; b < 2; b++) {
            cr_assert(t_int[b] >= 0 && t_int[b] <= 100);
            /* One correctly rounded float32 division, as torch did it. */
            cr_assert_eq(t[b], (float)t_int[b] / 100.0f, "%s: t[%d] = %.9g, t_int = %lld", file, b, t[b],
                         (long long)t_int[b]);
        }
        for (int k = 0; k < 48; k++) cr_assert_eq(mask[k], 1.0f);

        cJSON *j = case_json(CASES[c]);
        float total = read_scalar(f, "loss.total");
        /* The JSON holds the same float32 printed as a double. */
        cr_assert_eq(total, (float)cJSON_GetObjectItem(j, "loss_value")->valuedouble, "%s", file);
        double sum = read_scalar(f, "loss.expression_mse") + read_scalar(f, "loss.position_dist_matrix");
        if (ast_st_find(f, "out.moe_aux") >= 0) sum += read_scalar(f, "out.moe_aux");
        /* float32 sum of at most three positive terms: a few ulps. */
        cr_assert_float_eq(total, sum, 1e-6 * fabs(sum), "%s: %.9g vs %.9g", file, total, sum);
        cJSON_Delete(j);
        ast_st_close(f);
    }
}

static int64_t *read_i64_all(const ast_st_file *f, int i)
{
    ast_error e = {{0}};
    int64_t *v = malloc((size_t)ast_st_numel(f, i) * sizeof *v + 1);
    cr_assert_eq(ast_st_read_i64(f, ast_st_name(f, i), 0, NULL, v, &e), 0, "%s", e.msg);
    return v;
}

static float *read_f32_all(const ast_st_file *f, int i)
{
    ast_error e = {{0}};
    float *v = malloc((size_t)ast_st_numel(f, i) * sizeof *v + 1);
    cr_assert_eq(ast_st_read_f32(f, ast_st_name(f, i), 0, NULL, v, &e), 0, "%s", e.msg);
    return v;
}

/* Decodes every tensor into memory and writes them back. */
static void rewrite(const char *from, const char *to)
{
    ast_st_file *f = open_ok(from);
    ast_st_writer *w = ast_st_writer_new();
    void **values = calloc((size_t)ast_st_count(f) + 1, sizeof *values);
    for (int i = 0; i < ast_st_count(f); i++) {
        ast_st_dtype dt = ast_st_dtype_of(f, i);
        cr_assert(dt == AST_ST_F32 || dt == AST_ST_I64, "%s: unexpected dtype", ast_st_name(f, i));
        values[i] = dt == AST_ST_I64 ? (void *)read_i64_all(f, i) : (void *)read_f32_all(f, i);
        ast_st_writer_add(w, ast_st_name(f, i), dt, ast_st_ndim(f, i), ast_st_shape(f, i), values[i]);
    }
    for (int i = 0; i < ast_st_metadata_count(f); i++)
        ast_st_writer_metadata(w, ast_st_metadata_key(f, i), ast_st_metadata_value(f, i));
    ast_error e = {{0}};
    cr_assert_eq(ast_st_writer_write(w, to, &e), 0, "%s", e.msg);
    for (int i = 0; i < ast_st_count(f); i++) free(values[i]);
    free(values);
    ast_st_writer_free(w);
    ast_st_close(f);
}

static void assert_same_bytes(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *x = slurp(a, &na), *y = slurp(b, &nb);
    cr_assert_eq(na, nb, "%s has %zu bytes, its rewrite %zu", a, na, nb);
    for (size_t k = 0; k < na; k++)
        cr_assert_eq(x[k], y[k], "%s and its rewrite differ first at byte %zu", a, k);
    free(x);
    free(y);
}

Test(st_golden, rewrite_is_byte_identical)
{
    static const char *const kinds[] = {"weights", "io"};
    for (int c = 0; c < N_CASES; c++)
        for (int k = 0; k < 2; k++) {
            char file[128];
            snprintf(file, sizeof file, "%s.%s.safetensors", CASES[c], kinds[k]);
            char from[1024];
            snprintf(from, sizeof from, "%s", golden(file));
            rewrite(from, in_tmp(file));
            assert_same_bytes(from, in_tmp(file));
        }
    cr_assert_eq(count_temp_files(tmpdir), 0);
}

/* ---- malformed files --------------------------------------------------------- */

/* Two valid entries: a = F32 [2] at [0, 8), b = I64 [1] at [8, 16). */
static const unsigned char BUF16[16] = {0};

Test(st_malformed, handmade_reference_file_is_valid)
{
    const char *p = handmade("ok.safetensors",
                             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                             "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]}}",
                             BUF16, 16);
    ast_st_file *f = open_ok(p);
    cr_assert_eq(ast_st_count(f), 2);
    cr_assert_eq(ast_st_nbytes(f, 1), 8);
    ast_st_close(f);
}

/* Writes the first n bytes of a golden file. */
static const char *truncated_copy(const char *name, size_t n)
{
    size_t all;
    unsigned char *b = slurp(golden("baseline.weights.safetensors"), &all);
    spill(in_tmp(name), b, n);
    free(b);
    return in_tmp(name);
}

Test(st_malformed, truncated_file)
{
    expect_open_error(truncated_copy("short.safetensors", 5), "truncated file (5 bytes");
}

Test(st_malformed, header_longer_than_file)
{
    /* The baseline header is 14040 bytes; 100 bytes leave 92 after the length. */
    expect_open_error(truncated_copy("cut.safetensors", 100), "header length 14040 exceeds the 92 bytes");
}

Test(st_malformed, header_not_json)
{
    expect_open_error(handmade("notjson.safetensors", "{\"a\": dtype F32}   ", NULL, 0), "not a JSON object");
    expect_open_error(handmade("array.safetensors", "[1, 2]", NULL, 0), "not a JSON object");
    expect_open_error(handmade("garbage.safetensors", "{}xyz", NULL, 0), "not a JSON object");
}

Test(st_malformed, offsets_outside_buffer)
{
    const char *p = handmade("outside.safetensors",
                             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                             "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]}}",
                             BUF16, 12);
    expect_open_error(p, "tensor 'b' data_offsets [8, 16) lie outside the 12-byte data buffer");
}

Test(st_malformed, overlapping_entries)
{
    const char *p = handmade("overlap.safetensors",
                             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                             "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]}}",
                             BUF16, 12);
    expect_open_error(p, "tensors 'a' and 'b' overlap at bytes [4, 8)");
}

Test(st_malformed, hole_between_entries)
{
    const char *p = handmade("hole.safetensors",
                             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                             "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}",
                             BUF16, 16);
    expect_open_error(p, "bytes [8, 12) of the data buffer, before tensor 'b', belong to no tensor");
}

Test(st_malformed, trailing_bytes)
{
    const char *p = handmade("tail.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                             BUF16, 12);
    expect_open_error(p, "the last 4 bytes of the data buffer belong to no tensor");
}

Test(st_malformed, byte_count_disagrees_with_shape)
{
    const char *p = handmade("count.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
                             BUF16, 8);
    expect_open_error(p, "tensor 'a' has 8 bytes but F32 [3] needs 12");
}

Test(st_malformed, duplicate_key)
{
    const char *p = handmade("dup.safetensors",
                             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                             "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                             BUF16, 16);
    expect_open_error(p, "tensor 'a' appears twice");
}

/* Found by the safetensors fuzz target's write-back check: the first value
 * was read, the writer kept the last (and so does Python's json). A key
 * with an embedded NUL is its prefix, so it counts as the same key. */
Test(st_malformed, duplicate_metadata_key)
{
    const char *p = handmade("dupmeta.safetensors",
                             "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                             "\"__metadata__\":{\"epoch\":\"1\",\"step\":\"4\",\"epoch\":\"2\"}}",
                             BUF16, 8);
    expect_open_error(p, "\"__metadata__\" has the key 'epoch' twice; keep one");
    p = handmade("nulmeta.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"__metadata__\":{\"k\\u0000x\":\"1\",\"k\":\"2\"}}",
                 BUF16, 8);
    expect_open_error(p, "\"__metadata__\" has the key 'k' twice");
}

/* A golden file whose first dtype is replaced by a same-length unknown one. */
Test(st_malformed, unknown_dtype)
{
    size_t n;
    unsigned char *b = slurp(golden("baseline.weights.safetensors"), &n);
    char *at = strstr((char *)b + 8, "\"F32\"");
    cr_assert(at);
    memcpy(at, "\"F33\"", 5);
    spill(in_tmp("dtype.safetensors"), b, n);
    free(b);
    expect_open_error(in_tmp("dtype.safetensors"), "tensor 'mlp_in_expression.0.weight' has unknown dtype 'F33'");
}

Test(st_malformed, bad_entry_fields)
{
    expect_open_error(handmade("shape.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,0]}}",
                               NULL, 0), "tensor 'a' has a \"shape\" that is not a list");
    expect_open_error(handmade("offs.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[1]}}",
                               NULL, 0), "tensor 'a' has \"data_offsets\" that are not [begin, end]");
    expect_open_error(handmade("meta.safetensors", "{\"__metadata__\":{\"k\":1}}", NULL, 0),
                      "\"__metadata__\" must map strings to strings");
}

Test(st_malformed, missing_file)
{
    expect_open_error(in_tmp("absent.safetensors"), "cannot open (No such file or directory)");
}

/* Weights, checkpoints, training.init_from and --schedule all open through
 * ast_st_open: a FIFO was opened and waited on for ever, a device read
 * whole. The timeout turns a hang into a failure. */
Test(st_malformed, fifo_and_device_are_refused_at_once, .timeout = 10)
{
    cr_assert_eq(mkfifo(in_tmp("fifo.safetensors"), 0600), 0, "%s", strerror(errno));
    expect_open_error(in_tmp("fifo.safetensors"), "not a regular file (a FIFO)");
    expect_open_error("/dev/zero", "not a regular file (a character device)");
    expect_open_error(tmpdir, "not a regular file (a directory)");
}

/* A golden file with a NaN written over one value of a known tensor. */
Test(st_malformed, nan_value)
{
    ast_st_file *g = open_ok(golden("baseline.weights.safetensors"));
    int i = ast_st_find(g, "mlp_in_expression.0.bias");
    /* Tensor 0 starts the data buffer. */
    size_t offset = (size_t)((const unsigned char *)ast_st_data(g, i) - (const unsigned char *)ast_st_data(g, 0));
    ast_st_close(g);

    size_t n, header = 8;
    unsigned char *b = slurp(golden("baseline.weights.safetensors"), &n);
    for (int k = 0; k < 8; k++) header += (size_t)b[k] << (8 * k);
    float nan = NAN;
    memcpy(b + header + offset + 5 * sizeof nan, &nan, sizeof nan);
    spill(in_tmp("nan.safetensors"), b, n);
    free(b);

    ast_st_file *f = open_ok(in_tmp("nan.safetensors"));
    float bias[64];
    ast_error e = {{0}};
    cr_assert_eq(ast_st_read_f32(f, "mlp_in_expression.0.bias", 1, (int64_t[]){64}, bias, &e), -1);
    assert_message(&e, in_tmp("nan.safetensors"), "tensor 'mlp_in_expression.0.bias' holds nan at flat index 5");
    ast_st_close(f);
}

/* ---- value conversion ----------------------------------------------------- */

Test(st_values, half_bfloat_double_and_int_to_float)
{
    /* F16 1, -2, 2^-24 (smallest subnormal), 65504 (largest); BF16 1, -3;
     * F64 0.1; I32 -7. */
    unsigned char buf[32];
    const uint16_t h[4] = {0x3C00, 0xC000, 0x0001, 0x7BFF}, bf[2] = {0x3F80, 0xC040};
    const double d = 0.1;
    const int32_t i = -7;
    memcpy(buf, h, 8);
    memcpy(buf + 8, bf, 4);
    memcpy(buf + 12, &d, 8);
    memcpy(buf + 20, &i, 4);
    memset(buf + 24, 1, 8);
    const char *p = handmade("types.safetensors",
                             "{\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]},"
                             "\"bf\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},"
                             "\"d\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[12,20]},"
                             "\"i\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[20,24]},"
                             "\"u\":{\"dtype\":\"U8\",\"shape\":[2,4],\"data_offsets\":[24,32]}}",
                             buf, 32);
    ast_st_file *f = open_ok(p);
    ast_error e = {{0}};
    float v[8];
    cr_assert_eq(ast_st_read_f32(f, "h", 1, (int64_t[]){4}, v, &e), 0, "%s", e.msg);
    cr_assert_eq(v[0], 1.0f);
    cr_assert_eq(v[1], -2.0f);
    cr_assert_eq(v[2], ldexpf(1.0f, -24));
    cr_assert_eq(v[3], 65504.0f);
    cr_assert_eq(ast_st_read_f32(f, "bf", 1, (int64_t[]){2}, v, &e), 0, "%s", e.msg);
    cr_assert_eq(v[0], 1.0f);
    cr_assert_eq(v[1], -3.0f);
    cr_assert_eq(ast_st_read_f32(f, "d", 0, (int64_t[]){0}, v, &e), 0, "%s", e.msg);
    cr_assert_eq(v[0], 0.1f);
    cr_assert_eq(ast_st_read_f32(f, "i", 1, (int64_t[]){1}, v, &e), 0, "%s", e.msg);
    cr_assert_eq(v[0], -7.0f);

    int64_t u[8];
    cr_assert_eq(ast_st_read_i64(f, "u", 2, (int64_t[]){2, 4}, u, &e), 0, "%s", e.msg);
    cr_assert_eq(u[7], 1);
    cr_assert_eq(ast_st_read_f32(f, "u", 0, NULL, v, &e), -1);
    assert_message(&e, p, "tensor 'u' is U8, which cannot be read as float; store it as F32");
    cr_assert_eq(ast_st_read_i64(f, "h", 0, NULL, u, &e), -1);
    assert_message(&e, p, "tensor 'h' is F16, which cannot be read as an integer");
    ast_st_close(f);
}

Test(st_values, shape_mismatch_and_missing_tensor)
{
    ast_st_file *f = open_ok(golden("baseline.weights.safetensors"));
    float w[64 * 32];
    ast_error e = {{0}};
    cr_assert_eq(ast_st_read_f32(f, "mlp_in_expression.0.weight", 2, (int64_t[]){32, 64}, w, &e), -1);
    assert_message(&e, golden("baseline.weights.safetensors"),
                   "tensor 'mlp_in_expression.0.weight' has shape [64, 32], expected [32, 64]");
    cr_assert_eq(ast_st_read_f32(f, "mlp_in_expression.9.weight", 0, NULL, w, &e), -1);
    assert_message(&e, golden("baseline.weights.safetensors"), "no tensor 'mlp_in_expression.9.weight'");
    ast_st_close(f);
}

/* ---- parameter stores ------------------------------------------------------ */

/* A store with a Linear(4, 3) "lin" and a LayerNorm(3) "norm". */
static ast_params *small_model(uint64_t seed, int with_extra)
{
    ast_params *p = ast_params_new(seed);
    ast_scope *lin = ast_scope_new(p, "lin"), *norm = ast_scope_new(p, "norm");
    ast_param(lin, "weight", 2, (int64_t[]){3, 4}, AST_INIT_UNIFORM, 0.5f);
    ast_param(lin, "bias", 1, (int64_t[]){3}, AST_INIT_UNIFORM, 0.5f);
    ast_param(norm, "weight", 1, (int64_t[]){3}, AST_INIT_NORMAL, 1.0f);
    if (with_extra) ast_param(norm, "bias", 1, (int64_t[]){3}, AST_INIT_ZERO, 0.0f);
    return p;
}

static void assert_same_values(const ast_params *a, const ast_params *b)
{
    cr_assert_eq(ast_params_count(a), ast_params_count(b));
    for (int i = 0; i < ast_params_count(a); i++)
        for (int64_t k = 0; k < ast_params_at(a, i)->size; k++)
            cr_assert_eq(ast_params_at(a, i)->data[k], ast_params_at(b, i)->data[k], "%s[%lld]",
                         ast_params_at(a, i)->name, (long long)k);
}

Test(st_params, save_then_load_restores_values)
{
    ast_params *a = small_model(1, 0), *b = small_model(2, 0);
    ast_error e = {{0}};
    const char *meta[] = {"step", "42", "config", "tiny", NULL};
    cr_assert_eq(ast_params_save(a, in_tmp("p.safetensors"), meta, &e), 0, "%s", e.msg);
    cr_assert_eq(ast_params_load(b, in_tmp("p.safetensors"), 1, &e), 0, "%s", e.msg);
    assert_same_values(a, b);

    ast_st_file *f = open_ok(in_tmp("p.safetensors"));
    cr_assert_eq(ast_st_count(f), 3);
    cr_assert_str_eq(ast_st_name(f, 0), "lin.weight");
    cr_assert_str_eq(ast_st_name(f, 2), "norm.weight");
    cr_assert_str_eq(ast_st_metadata(f, "step"), "42");
    cr_assert_str_eq(ast_st_metadata_key(f, 1), "config");
    ast_st_close(f);
    ast_params_free(a);
    ast_params_free(b);
}

/* Every golden state_dict loads strictly into a store of the same names. */
Test(st_params, golden_weights_load_strictly)
{
    ast_st_file *f = open_ok(golden("gated_moe.weights.safetensors"));
    ast_params *p = ast_params_new(0);
    ast_scope *root = ast_scope_new(p, "");
    for (int i = 0; i < ast_st_count(f); i++)
        ast_param(root, ast_st_name(f, i), ast_st_ndim(f, i), ast_st_shape(f, i), AST_INIT_ZERO, 0.0f);
    ast_error e = {{0}};
    cr_assert_eq(ast_params_load(p, golden("gated_moe.weights.safetensors"), 1, &e), 0, "%s", e.msg);
    for (int i = 0; i < ast_st_count(f); i++) {
        float *want = read_f32_all(f, i);
        const ast_tensor *t = ast_params_at(p, i);
        cr_assert_eq(memcmp(t->data, want, (size_t)t->size * sizeof *want), 0, "%s", t->name);
        free(want);
    }
    ast_params_free(p);
    ast_st_close(f);
}

Test(st_params, missing_and_unexpected_names)
{
    ast_params *small = small_model(1, 0), *big = small_model(2, 1);
    ast_error e = {{0}};
    cr_assert_eq(ast_params_save(small, in_tmp("small.safetensors"), NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(ast_params_save(big, in_tmp("big.safetensors"), NULL, &e), 0, "%s", e.msg);

    cr_assert_eq(ast_params_load(big, in_tmp("small.safetensors"), 0, &e), -1);
    assert_message(&e, in_tmp("small.safetensors"), "1 model parameters missing ('norm.bias')");
    cr_assert_eq(ast_params_load(small, in_tmp("big.safetensors"), 1, &e), -1);
    assert_message(&e, in_tmp("big.safetensors"), "1 tensors not in the model ('norm.bias')");
    /* Not strict: the extra tensor is ignored. */
    cr_assert_eq(ast_params_load(small, in_tmp("big.safetensors"), 0, &e), 0, "%s", e.msg);

    ast_params *golden_p = small_model(3, 0);
    cr_assert_eq(ast_params_load(golden_p, golden("baseline.weights.safetensors"), 1, &e), -1);
    assert_message(&e, golden("baseline.weights.safetensors"),
                   "3 model parameters missing ('lin.weight', 'lin.bias', 'norm.weight') and 114 tensors not in "
                   "the model ('mlp_in_expression.0.weight', 'mlp_in_expression.0.bias', "
                   "'mlp_in_expression.2.weight' and 111 more)");
    ast_params_free(golden_p);
    ast_params_free(small);
    ast_params_free(big);
}

Test(st_params, shape_mismatch_on_load)
{
    ast_params *a = small_model(1, 0);
    ast_params *b = ast_params_new(2);
    ast_scope *lin = ast_scope_new(b, "lin"), *norm = ast_scope_new(b, "norm");
    ast_param(lin, "weight", 2, (int64_t[]){4, 3}, AST_INIT_UNIFORM, 0.5f);
    ast_param(lin, "bias", 1, (int64_t[]){3}, AST_INIT_UNIFORM, 0.5f);
    ast_param(norm, "weight", 1, (int64_t[]){3}, AST_INIT_NORMAL, 1.0f);
    ast_error e = {{0}};
    cr_assert_eq(ast_params_save(a, in_tmp("a.safetensors"), NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(ast_params_load(b, in_tmp("a.safetensors"), 1, &e), -1);
    assert_message(&e, in_tmp("a.safetensors"), "tensor 'lin.weight' has shape [3, 4], expected [4, 3]");
    ast_params_free(a);
    ast_params_free(b);
}

/* A NaN in the last tensor fails the load and leaves every value as it was. */
Test(st_params, nan_fails_and_changes_nothing)
{
    ast_params *a = small_model(1, 0), *b = small_model(2, 0), *b_before = small_model(2, 0);
    ast_params_at(a, 2)->data[1] = NAN;
    ast_error e = {{0}};
    cr_assert_eq(ast_params_save(a, in_tmp("nan.safetensors"), NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(ast_params_load(b, in_tmp("nan.safetensors"), 1, &e), -1);
    assert_message(&e, in_tmp("nan.safetensors"), "tensor 'norm.weight' holds nan at flat index 1");
    assert_same_values(b, b_before);
    ast_params_free(a);
    ast_params_free(b);
    ast_params_free(b_before);
}

/* Buffers (host->buffer) go into the file after the parameters and come
 * back on load; a file without them (PyTorch weights, an older alphast)
 * still loads and leaves them zero, unless AST_LOAD_BUFFERS asks for them
 * (a checkpoint to resume from), which fails naming file and tensor. */
static ast_params *with_buffer(uint64_t seed, float value)
{
    ast_params *p = small_model(seed, 0);
    ast_tensor *b = ast_buffer(ast_scope_new(p, "state"), "bias", 1, (int64_t[]){3});
    for (int k = 0; k < 3; k++) b->data[k] = value * (float)(k + 1);
    return p;
}

Test(st_params, buffers_are_saved_and_loaded_and_optional_unless_asked_for)
{
    ast_params *a = with_buffer(1, 0.25f), *b = with_buffer(2, -1.0f), *plain = small_model(3, 0);
    ast_error e = {{0}};
    cr_assert_eq(ast_params_save(a, in_tmp("buf.safetensors"), NULL, &e), 0, "%s", e.msg);
    ast_st_file *f = open_ok(in_tmp("buf.safetensors"));
    cr_assert_eq(ast_st_count(f), 4);
    cr_assert_str_eq(ast_st_name(f, 3), "state.bias");
    ast_st_close(f);
    cr_assert_eq(ast_params_load(b, in_tmp("buf.safetensors"), AST_LOAD_STRICT | AST_LOAD_BUFFERS, &e), 0, "%s",
                 e.msg);
    assert_same_values(a, b);
    cr_assert_eq(memcmp(ast_params_buffer_at(a, 0)->data, ast_params_buffer_at(b, 0)->data, 3 * sizeof(float)), 0);

    /* A file without the buffer: it goes back to zero, strictly or not. */
    cr_assert_eq(ast_params_save(plain, in_tmp("nobuf.safetensors"), NULL, &e), 0, "%s", e.msg);
    for (int flags = 0; flags <= AST_LOAD_STRICT; flags++) {
        ast_params *c = with_buffer(4, 3.0f);
        cr_assert_eq(ast_params_load(c, in_tmp("nobuf.safetensors"), flags, &e), 0, "%s", e.msg);
        assert_same_values(c, plain);
        for (int k = 0; k < 3; k++) cr_assert_eq(ast_params_buffer_at(c, 0)->data[k], 0.0f);
        ast_params_free(c);
    }
    /* Unless the buffers are required: an error, and nothing changes. */
    ast_params *c = with_buffer(4, 3.0f), *c_before = with_buffer(4, 3.0f);
    cr_assert_eq(ast_params_load(c, in_tmp("nobuf.safetensors"), AST_LOAD_BUFFERS, &e), -1);
    assert_message(&e, in_tmp("nobuf.safetensors"), "1 model buffers missing ('state.bias')");
    assert_same_values(c, c_before);
    cr_assert_eq(memcmp(ast_params_buffer_at(c, 0)->data, ast_params_buffer_at(c_before, 0)->data, 3 * sizeof(float)),
                 0);
    /* A model without the buffer: an unexpected tensor, as before. */
    cr_assert_eq(ast_params_load(plain, in_tmp("buf.safetensors"), AST_LOAD_STRICT, &e), -1);
    assert_message(&e, in_tmp("buf.safetensors"), "1 tensors not in the model ('state.bias')");
    cr_assert_eq(ast_params_load(plain, in_tmp("buf.safetensors"), 0, &e), 0, "%s", e.msg);
    ast_params_free(a), ast_params_free(b), ast_params_free(plain), ast_params_free(c), ast_params_free(c_before);
}

/* A PyTorch Lightning checkpoint's state_dict: the model's parameters
 * under "model.", loaded as if unprefixed, strictly too. */
Test(st_params, lightning_prefix_is_found)
{
    ast_params *a = small_model(1, 0), *b = small_model(2, 0);
    ast_st_writer *w = ast_st_writer_new();
    char names[3][64];
    for (int i = 0; i < 3; i++) {
        const ast_tensor *t = ast_params_at(a, i);
        snprintf(names[i], sizeof names[i], AST_LIGHTNING_PREFIX "%s", t->name);
        ast_st_writer_add(w, names[i], AST_ST_F32, t->ndim, t->shape, t->data);
    }
    ast_error e = {{0}};
    cr_assert_eq(ast_st_writer_write(w, in_tmp("lightning.safetensors"), &e), 0, "%s", e.msg);
    ast_st_writer_free(w);
    cr_assert_eq(ast_params_load(b, in_tmp("lightning.safetensors"), AST_LOAD_STRICT, &e), 0, "%s", e.msg);
    assert_same_values(a, b);
    ast_params_free(a), ast_params_free(b);
}

/* Fine-tuning: parameters registered after the model's (a run's mask
 * tokens) are optional; the model's own are not. */
Test(st_params, load_from_requires_only_the_first_parameters)
{
    ast_params *small = small_model(1, 0), *big = small_model(2, 1), *big_before = small_model(2, 1);
    ast_error e = {{0}};
    cr_assert_eq(ast_params_save(small, in_tmp("small.safetensors"), NULL, &e), 0, "%s", e.msg);
    ast_st_file *f = open_ok(in_tmp("small.safetensors"));
    cr_assert_eq(ast_params_load_from(big, f, 0, 4, &e), -1, "all four required");
    assert_message(&e, in_tmp("small.safetensors"), "1 model parameters missing ('norm.bias')");
    cr_assert_eq(ast_params_load_from(big, f, 0, 3, &e), 0, "%s", e.msg);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(memcmp(ast_params_at(big, i)->data, ast_params_at(small, i)->data,
                            (size_t)ast_params_at(big, i)->size * sizeof(float)), 0, "parameter %d loaded", i);
    cr_assert_eq(memcmp(ast_params_at(big, 3)->data, ast_params_at(big_before, 3)->data, 3 * sizeof(float)), 0,
                 "the optional one kept its value");
    ast_st_close(f);
    ast_params_free(small), ast_params_free(big), ast_params_free(big_before);
}

/* ---- what a weights file says about itself ------------------------------------ */

Test(st_params, gene_lists_must_match_in_order)
{
    const char *genes[3] = {"Gja1", "Vip", "Sst"}, *swapped[3] = {"Gja1", "Sst", "Vip"};
    char *json = ast_st_names_json(genes, 3);
    cr_assert_str_eq(json, "[\"Gja1\",\"Vip\",\"Sst\"]");
    ast_params *p = small_model(1, 0);
    const char *meta[] = {AST_META_GENES, json, NULL};
    ast_error e = {{0}};
    cr_assert_eq(ast_params_save(p, in_tmp("g.safetensors"), meta, &e), 0, "%s", e.msg);
    cr_assert_eq(ast_params_save(p, in_tmp("plain.safetensors"), NULL, &e), 0, "%s", e.msg);
    ast_st_file *f = open_ok(in_tmp("g.safetensors")), *plain = open_ok(in_tmp("plain.safetensors"));
    cr_assert_eq(ast_st_check_genes(f, genes, 3, &e), 0, "%s", e.msg);
    cr_assert_eq(ast_st_check_genes(plain, swapped, 3, &e), 0, "no list (a PyTorch file): nothing to check");
    cr_assert_eq(ast_st_check_genes(f, swapped, 3, &e), -1);
    assert_message(&e, in_tmp("g.safetensors"), "trained on 3 genes, the data has 3; gene 2 is 'Vip' there and 'Sst' here");
    cr_assert_eq(ast_st_check_genes(f, genes, 2, &e), -1);
    assert_message(&e, in_tmp("g.safetensors"), "gene 3 is 'Sst' there and '(none)' here");
    ast_st_close(f), ast_st_close(plain);
    /* An alphast file whose gene list was stripped was accepted unchecked. */
    const char *stripped[] = {AST_META_VERSION, "0.9", NULL};
    cr_assert_eq(ast_params_save(p, in_tmp("stripped.safetensors"), stripped, &e), 0, "%s", e.msg);
    f = open_ok(in_tmp("stripped.safetensors"));
    cr_assert_eq(ast_st_check_genes(f, genes, 3, &e), -1);
    assert_message(&e, in_tmp("stripped.safetensors"), "written by alphast 0.9, but its gene list (metadata 'genes') "
                   "was removed");
    ast_st_close(f);
    ast_params_free(p);
    free(json);
}

/* ---- atomic replacement ------------------------------------------------------ */

static const char OLD[] = "old contents\n";

static void assert_file_holds(const char *path, const char *text)
{
    size_t n;
    unsigned char *b = slurp(path, &n);
    cr_assert_eq(n, strlen(text), "%s has %zu bytes", path, n);
    cr_assert_eq(memcmp(b, text, n), 0, "%s changed", path);
    free(b);
}

Test(atomic_file, replaces_existing_file)
{
    spill(in_tmp("f"), OLD, strlen(OLD));
    ast_error e = {{0}};
    cr_assert_eq(ast_atomic_write_bytes(in_tmp("f"), "new", 3, &e), 0, "%s", e.msg);
    assert_file_holds(in_tmp("f"), "new");
    cr_assert_eq(count_temp_files(tmpdir), 0);
}

/* A symbolic link planted at the temporary's name (PATH.tmp.<pid> was
 * predictable) made the write go into the link's target and left PATH a
 * link to it. */
Test(atomic_file, a_planted_link_is_not_written_through)
{
    char link[600];
    spill(in_tmp("victim"), OLD, strlen(OLD));
    snprintf(link, sizeof link, "%s.tmp.%ld", in_tmp("f"), (long)getpid());
    cr_assert_eq(symlink(in_tmp("victim"), link), 0, "%s", strerror(errno));
    ast_error e = {{0}};
    cr_assert_eq(ast_atomic_write_bytes(in_tmp("f"), "new", 3, &e), 0, "%s", e.msg);
    assert_file_holds(in_tmp("victim"), OLD);
    struct stat st;
    cr_assert_eq(lstat(in_tmp("f"), &st), 0);
    cr_assert(S_ISREG(st.st_mode), "the target became a link");
    assert_file_holds(in_tmp("f"), "new");
    cr_assert_eq(unlink(link), 0);
    cr_assert_eq(count_temp_files(tmpdir), 0);
}

Test(atomic_file, missing_directory_fails_cleanly)
{
    ast_error e = {{0}};
    cr_assert_eq(ast_atomic_write_bytes(in_tmp("nodir/f"), "x", 1, &e), -1);
    assert_message(&e, in_tmp("nodir/f"), "(No such file or directory); create the directory first");
    struct stat st;
    cr_assert_neq(stat(in_tmp("nodir"), &st), 0, "the missing directory was created");
    cr_assert_eq(count_temp_files(tmpdir), 0);
}

/* rename() cannot replace a directory: the written temporary must go. */
Test(atomic_file, failed_rename_removes_temporary)
{
    cr_assert_eq(mkdir(in_tmp("d"), 0700), 0);
    ast_error e = {{0}};
    cr_assert_eq(ast_atomic_write_bytes(in_tmp("d"), "x", 1, &e), -1);
    assert_message(&e, in_tmp("d"), "cannot replace the file");
    cr_assert_eq(count_temp_files(tmpdir), 0);
}

/* A write that fails midway (here: beyond the process's file-size limit,
 * which binds root too, standing in for a full disk) keeps the old file. */
Test(atomic_file, failed_write_keeps_old_file)
{
    spill(in_tmp("f"), OLD, strlen(OLD));
    size_t n = 1 << 20;
    char *big = calloc(n, 1);
    struct rlimit old_limit, small = {4096, 0};
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    small.rlim_max = old_limit.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &small), 0);
    ast_error e = {{0}};
    int rc = ast_atomic_write_bytes(in_tmp("f"), big, n, &e);
    setrlimit(RLIMIT_FSIZE, &old_limit);
    free(big);
    cr_assert_eq(rc, -1);
    assert_message(&e, in_tmp("f"), "cannot write (File too large)");
    assert_file_holds(in_tmp("f"), OLD);
    cr_assert_eq(count_temp_files(tmpdir), 0);
}

Test(atomic_file, read_only_directory)
{
    /* root may write into read-only directories; failed_write_keeps_old_file
     * covers the failure path for root. */
    if (geteuid() == 0) {
        remove_tmpdir(); /* a skipped test does not reach .fini */
        cr_skip_test("running as root");
    }
    spill(in_tmp("f"), OLD, strlen(OLD));
    cr_assert_eq(chmod(tmpdir, 0500), 0);
    ast_error e = {{0}};
    int rc = ast_atomic_write_bytes(in_tmp("f"), "new", 3, &e);
    chmod(tmpdir, 0700);
    cr_assert_eq(rc, -1);
    assert_message(&e, in_tmp("f"), "(Permission denied); check that the directory is writable");
    assert_file_holds(in_tmp("f"), OLD);
}

/* "-" is standard output (--out -): the bytes go there and no file named
 * "-" appears in the working directory. */
Test(atomic_file, dash_is_standard_output)
{
    cr_assert_eq(chdir(tmpdir), 0);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), fd = open(in_tmp("captured"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, STDOUT_FILENO);
    ast_error e = {{0}};
    int rc = ast_atomic_write_bytes("-", "to stdout\n", 10, &e);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(fd), close(saved);
    cr_assert_eq(rc, 0, "%s", e.msg);
    assert_file_holds(in_tmp("captured"), "to stdout\n");
    cr_assert_neq(access(in_tmp("-"), F_OK), 0, "no file named -");
}

/* ---- robustness ------------------------------------------------------------ */

/* Every single-byte corruption of a small file's header and length is
 * either rejected with a message or still a consistent file; none crashes
 * (run under --enable-sanitizers to catch reads out of bounds). */
Test(st_malformed, single_byte_corruptions_never_crash)
{
    static const char JSON[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                               "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]},"
                               "\"__metadata__\":{\"k\":\"v\"}}";
    static const unsigned char SUBST[] = {0x00, 0xff, '"', '{', '}', '[', ',', ':', '9', '-', ' ', '\\'};
    const char *path = handmade("x.safetensors", JSON, BUF16, 16);
    FILE *io = fopen(path, "r+b");
    cr_assert(io);
    for (size_t at = 0; at < 8 + strlen(JSON); at++) {
        unsigned char orig = at < 8 ? (unsigned char)(strlen(JSON) >> (8 * at)) : (unsigned char)JSON[at - 8];
        for (size_t s = 0; s <= sizeof SUBST; s++) {
            /* The last round restores the original byte. */
            fseek(io, (long)at, SEEK_SET);
            fputc(s < sizeof SUBST ? SUBST[s] : orig, io);
            fflush(io);
            ast_error e = {{0}};
            ast_st_file *f = ast_st_open(path, &e);
            if (f) {
                for (int i = 0; i < ast_st_count(f); i++)
                    cr_assert_eq(ast_st_nbytes(f, i),
                                 (size_t)ast_st_numel(f, i) * ast_st_dtype_size(ast_st_dtype_of(f, i)));
                ast_st_close(f);
            } else {
                assert_message(&e, path, ";");
            }
        }
    }
    fclose(io);
}
