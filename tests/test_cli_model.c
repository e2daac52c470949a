/* `alphast-run params` and `alphast-run forward` through the built binary:
 * the spec's parameter counts, and a forward pass that reproduces the
 * golden gated_moe outputs, also from the reference's own tensor names. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/backend.h"
#include "io/safetensors.h"

typedef struct cli_run {
    int status;
    char text[16384]; /* stdout and stderr */
} cli_run;

static const char *env(const char *name)
{
    const char *v = getenv(name);
    cr_assert_not_null(v, "%s is not set (run through make check)", name);
    return v;
}

/* alphast-run with the arguments fmt formats; stdout and stderr together. */
static cli_run *run(const char *fmt, ...)
{
    static cli_run r;
    char cmd[4096];
    int n = snprintf(cmd, sizeof cmd, "%s/alphast-run ", env("ALPHAST_BUILD_DIR"));
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(cmd + n, sizeof cmd - (size_t)n, fmt, ap);
    va_end(ap);
    cr_assert_lt(n + 6, (int)sizeof cmd, "command too long");
    strcat(cmd, " 2>&1");
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "cannot run %s", cmd);
    size_t got = fread(r.text, 1, sizeof r.text - 1, p);
    r.text[got] = '\0';
    int st = pclose(p);
    cr_assert(WIFEXITED(st), "%s did not exit", cmd);
    r.status = WEXITSTATUS(st);
    return &r;
}

#define assert_has(text, part) cr_assert(strstr((text), (part)), "'%s' not in:\n%s", (part), (text))

Test(cli_model, params_baseline_matches_the_spec)
{
    cli_run *r = run("params %s/model/base.yaml --genes 100", env("ALPHAST_TEST_DATA"));
    cr_assert_eq(r->status, 0, "%s", r->text);
    assert_has(r->text, "attention linear, ffn dense");
    assert_has(r->text, "707,508        707,508");
    assert_has(r->text, "attention plugin (linear)");
    assert_has(r->text, "active share: 100.0%");
}

Test(cli_model, params_gated_moe_counts_active_experts)
{
    cli_run *r = run("params %s/model/gated_moe.yaml -g 100", env("ALPHAST_TEST_DATA"));
    cr_assert_eq(r->status, 0, "%s", r->text);
    assert_has(r->text, "attention gated, ffn moe");
    assert_has(r->text, "447,804        381,500"); /* docs/model.md §2.11, HEAD expert width */
}

Test(cli_model, params_errors_are_one_line)
{
    cli_run *r = run("params %s/model/base.yaml --genes zero", env("ALPHAST_TEST_DATA"));
    cr_assert_eq(r->status, 2, "%s", r->text);
    assert_has(r->text, "--genes must be a positive integer, not 'zero'");
    r = run("params %s/model/no_such.yaml", env("ALPHAST_TEST_DATA"));
    cr_assert_eq(r->status, 1, "%s", r->text);
    assert_has(r->text, "no_such.yaml");
    r = run("params");
    cr_assert_eq(r->status, 2, "%s", r->text);
}

/* ---- forward ---------------------------------------------------------------- */

static char *golden(char *buf, size_t n, const char *file)
{
    snprintf(buf, n, "%s/golden/%s", env("ALPHAST_TEST_DATA"), file);
    return buf;
}

static float *read_all(const ast_st_file *f, const char *name, int64_t *numel)
{
    ast_error e = {""};
    int i = ast_st_find(f, name);
    cr_assert_geq(i, 0, "%s: no %s", ast_st_path(f), name);
    *numel = ast_st_numel(f, i);
    float *v = malloc((size_t)*numel * sizeof *v);
    cr_assert_eq(ast_st_read_f32(f, name, 0, NULL, v, &e), 0, "%s", e.msg);
    return v;
}

/* The golden inputs under the names `forward` reads; all but `skip`. */
static void write_inputs(const ast_st_file *io, const char *path, const char *skip)
{
    static const char *const names[][2] = {{"in.noisy_expression", "expression"},
                                           {"in.noisy_positions", "positions"},
                                           {"in.diffusion_time", "t"},
                                           {"in.node_mask", "node_mask"}};
    float *data[4] = {0};
    ast_st_writer *w = ast_st_writer_new();
    for (int k = 0; k < 4; k++) {
        if (skip && !strcmp(skip, names[k][1])) continue;
        int64_t n, i = ast_st_find(io, names[k][0]);
        data[k] = read_all(io, names[k][0], &n);
        ast_st_writer_add(w, names[k][1], AST_ST_F32, ast_st_ndim(io, (int)i), ast_st_shape(io, (int)i), data[k]);
    }
    ast_error e = {""};
    cr_assert_eq(ast_st_writer_write(w, path, &e), 0, "%s", e.msg);
    ast_st_writer_free(w);
    for (int k = 0; k < 4; k++) free(data[k]);
}

/* max|a - b| / max|b|: float32 error scales with the tensor's magnitude. */
static double rel_error(const ast_st_file *got, const char *name, const ast_st_file *ref, const char *ref_name)
{
    int64_t n, m;
    float *a = read_all(got, name, &n), *b = read_all(ref, ref_name, &m);
    cr_assert_eq(n, m, "%s: %lld values, reference %lld", name, (long long)n, (long long)m);
    double diff = 0.0, scale = 0.0;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    free(a);
    free(b);
    return diff / fmax(scale, 1e-12);
}

typedef struct tmp_files {
    char dir[64], inputs[128], out[128];
} tmp_files;

static void tmp_files_make(tmp_files *t)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/alphast-fwd-XXXXXX");
    cr_assert_not_null(mkdtemp(t->dir));
    snprintf(t->inputs, sizeof t->inputs, "%s/in.safetensors", t->dir);
    snprintf(t->out, sizeof t->out, "%s/out.safetensors", t->dir);
}

static void tmp_files_remove(const tmp_files *t)
{
    remove(t->inputs);
    remove(t->out);
    rmdir(t->dir);
}

/* The same eval forward as the golden parity test: 1e-5 as there. */
Test(cli_model, forward_reproduces_the_golden_outputs)
{
    char path[1024], weights[1024];
    ast_error e = {""};
    ast_st_file *io = ast_st_open(golden(path, sizeof path, "gated_moe.io.safetensors"), &e);
    cr_assert_not_null(io, "%s", e.msg);
    tmp_files t;
    tmp_files_make(&t);
    write_inputs(io, t.inputs, NULL);
    cli_run *r = run("forward -c %s/model/gated_moe.yaml --weights %s --inputs %s --out %s", env("ALPHAST_TEST_DATA"),
                     golden(weights, sizeof weights, "gated_moe.weights.safetensors"), t.inputs, t.out);
    cr_assert_eq(r->status, 0, "%s", r->text);

    ast_st_file *out = ast_st_open(t.out, &e);
    cr_assert_not_null(out, "%s", e.msg);
    cr_expect_lt(rel_error(out, "expression", io, "out.pred_expression"), 1e-5);
    cr_expect_lt(rel_error(out, "positions", io, "out.pred_positions"), 1e-5);
    cr_expect_lt(rel_error(out, "moe_aux", io, "out.moe_aux"), 1e-5);
    ast_st_close(out);
    ast_st_close(io);
    tmp_files_remove(&t);
}

/* --device: in every command's --help; cpu gives the golden outputs; a
 * name this build lacks, or cuda without a visible GPU, is one error
 * naming the fix. (With a GPU, cuda runs: the GPU tests check it.) */
Test(cli_model, device_flag_picks_the_backend_or_says_why_not)
{
    static const char *const commands[] = {"train", "eval", "sample", "forward", "sweep"};
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        cli_run *r = run("%s --help", commands[i]);
        cr_assert_eq(r->status, 0, "%s", r->text);
        assert_has(r->text, "--device NAME");
    }
    char path[1024], weights[1024];
    ast_error e = {""};
    ast_st_file *io = ast_st_open(golden(path, sizeof path, "gated_moe.io.safetensors"), &e);
    cr_assert_not_null(io, "%s", e.msg);
    tmp_files t;
    tmp_files_make(&t);
    write_inputs(io, t.inputs, NULL);
    golden(weights, sizeof weights, "gated_moe.weights.safetensors");
    const char *fmt = "forward -c %s/model/gated_moe.yaml --weights %s --inputs %s --out %s --device %s";
    cli_run *r = run(fmt, env("ALPHAST_TEST_DATA"), weights, t.inputs, t.out, "cpu");
    cr_assert_eq(r->status, 0, "%s", r->text);
    ast_st_file *out = ast_st_open(t.out, &e);
    cr_assert_not_null(out, "%s", e.msg);
    cr_expect_lt(rel_error(out, "positions", io, "out.pred_positions"), 1e-5);
    ast_st_close(out);
    r = run(fmt, env("ALPHAST_TEST_DATA"), weights, t.inputs, t.out, "tpu");
    cr_assert_eq(r->status, 1, "%s", r->text);
    assert_has(r->text, "--device: 'tpu' is not a device of this build; choose one of cpu");
    const ast_backend *cuda = ast_backend_find("cuda");
    if (!cuda || !cuda->available(cuda, NULL, 0)) {
        r = run(fmt, env("ALPHAST_TEST_DATA"), weights, t.inputs, t.out, "cuda");
        cr_assert_eq(r->status, 1, "%s", r->text);
        assert_has(r->text, cuda ? "device: cuda cannot run here" : "--device: 'cuda' is not a device of this build");
        cr_assert_eq(strchr(r->text, '\n'), r->text + strlen(r->text) - 1, "one line: %s", r->text);
    }
    ast_st_close(io);
    tmp_files_remove(&t);
}

/* The golden io file as it is (the reference's names, in.noisy_expression
 * ...), the golden weights under a Lightning state_dict's "model." names,
 * and --out - : the outputs on stdout, still the golden ones. */
Test(cli_model, forward_takes_the_reference_names_and_writes_to_stdout)
{
    char path[1024], weights[1024], lightning[200], name[1024];
    ast_error e = {""};
    ast_st_file *w = ast_st_open(golden(weights, sizeof weights, "gated_moe.weights.safetensors"), &e);
    cr_assert_not_null(w, "%s", e.msg);
    tmp_files t;
    tmp_files_make(&t);
    snprintf(lightning, sizeof lightning, "%s/lightning.safetensors", t.dir);
    ast_st_writer *out = ast_st_writer_new();
    for (int i = 0; i < ast_st_count(w); i++) {
        snprintf(name, sizeof name, AST_LIGHTNING_PREFIX "%s", ast_st_name(w, i));
        ast_st_writer_add(out, name, ast_st_dtype_of(w, i), ast_st_ndim(w, i), ast_st_shape(w, i), ast_st_data(w, i));
    }
    cr_assert_eq(ast_st_writer_write(out, lightning, &e), 0, "%s", e.msg);
    ast_st_writer_free(out);
    ast_st_close(w);

    cli_run *r = run("forward -c %s/model/gated_moe.yaml -w %s -i %s --out - >%s", env("ALPHAST_TEST_DATA"), lightning,
                     golden(path, sizeof path, "gated_moe.io.safetensors"), t.out);
    cr_assert_eq(r->status, 0, "%s", r->text);
    ast_st_file *io = ast_st_open(path, &e), *got = ast_st_open(t.out, &e);
    cr_assert_not_null(got, "stdout holds nothing but the file: %s", e.msg);
    cr_expect_lt(rel_error(got, "expression", io, "out.pred_expression"), 1e-5);
    cr_expect_lt(rel_error(got, "positions", io, "out.pred_positions"), 1e-5);
    cr_expect_lt(rel_error(got, "moe_aux", io, "out.moe_aux"), 1e-5);
    ast_st_close(got);
    ast_st_close(io);
    remove(lightning);
    tmp_files_remove(&t);
}

Test(cli_model, forward_names_what_is_missing)
{
    char path[1024], weights[1024];
    ast_error e = {""};
    ast_st_file *io = ast_st_open(golden(path, sizeof path, "gated_moe.io.safetensors"), &e);
    cr_assert_not_null(io, "%s", e.msg);
    tmp_files t;
    tmp_files_make(&t);
    write_inputs(io, t.inputs, "positions");
    cli_run *r = run("forward -c %s/model/gated_moe.yaml -w %s -i %s -o %s", env("ALPHAST_TEST_DATA"),
                     golden(weights, sizeof weights, "gated_moe.weights.safetensors"), t.inputs, t.out);
    cr_assert_eq(r->status, 1, "%s", r->text);
    assert_has(r->text, "no tensor 'positions'; expected [2, 24, 3]");
    cr_assert_neq(access(t.out, F_OK), 0, "no output on failure");

    r = run("forward -c %s/model/gated_moe.yaml", env("ALPHAST_TEST_DATA"));
    cr_assert_eq(r->status, 2, "%s", r->text);
    assert_has(r->text, "--weights FILE is required");
    ast_st_close(io);
    tmp_files_remove(&t);
}

/* Inputs of B sets of N cells of the golden model's G genes, all zeros. */
static void write_empty_inputs(const ast_st_file *io, const char *path, int64_t b, int64_t n)
{
    int i = ast_st_find(io, "in.noisy_expression");
    cr_assert_geq(i, 0);
    int64_t g = ast_st_shape(io, i)[2];
    static float zeros[64]; /* t [B, 1] is not empty when only N is 0 */
    ast_st_writer *w = ast_st_writer_new();
    ast_st_writer_add(w, "expression", AST_ST_F32, 3, (int64_t[]){b, n, g}, zeros);
    ast_st_writer_add(w, "positions", AST_ST_F32, 3, (int64_t[]){b, n, 3}, zeros);
    ast_st_writer_add(w, "t", AST_ST_F32, 2, (int64_t[]){b, 1}, zeros);
    ast_st_writer_add(w, "node_mask", AST_ST_F32, 2, (int64_t[]){b, n}, zeros);
    ast_error e = {""};
    cr_assert_eq(ast_st_writer_write(w, path, &e), 0, "%s", e.msg);
    ast_st_writer_free(w);
}

/* B = 0 or N = 0 died of SIGFPE in the GEMM split (issue 11 item 8). */
Test(cli_model, forward_refuses_empty_inputs)
{
    char path[1024], weights[1024];
    ast_error e = {""};
    ast_st_file *io = ast_st_open(golden(path, sizeof path, "gated_moe.io.safetensors"), &e);
    cr_assert_not_null(io, "%s", e.msg);
    const int64_t shapes[2][2] = {{0, 5}, {2, 0}};
    const char *why[2] = {"with no set (B = 0)", "with no cell (N = 0)"};
    for (int k = 0; k < 2; k++) {
        tmp_files t;
        tmp_files_make(&t);
        write_empty_inputs(io, t.inputs, shapes[k][0], shapes[k][1]);
        cli_run *r = run("forward -c %s/model/gated_moe.yaml -w %s -i %s -o %s", env("ALPHAST_TEST_DATA"),
                         golden(weights, sizeof weights, "gated_moe.weights.safetensors"), t.inputs, t.out);
        cr_assert_eq(r->status, 1, "%s", r->text);
        assert_has(r->text, "tensor 'expression' has shape [");
        assert_has(r->text, why[k]);
        cr_assert_neq(access(t.out, F_OK), 0, "no output on failure");
        tmp_files_remove(&t);
    }
    ast_st_close(io);
}
