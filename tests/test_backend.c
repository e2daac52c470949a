/* The backend interface (engine/backend.h): backends by name, a step whose
 * arena comes from the backend's buffers and whose addresses repeat, a
 * model built from host ops running unchanged on a second backend, and the
 * clear refusal of an op or a fused op that has no kernel for the chosen
 * backend. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend_without.h"
#include "config/config.h"
#include "engine/backend.h"
#include "model_fixture.h"

/* A second backend for the tests: the CPU kernels and host memory under
 * another name, counting the buffers it hands out. */
static int buffers_made;

static void *second_alloc(const ast_backend *b, size_t bytes)
{
    buffers_made++;
    const ast_backend *cpu = ast_backend_cpu();
    return cpu->buffer_alloc(cpu, bytes);
}

static void second_free(const ast_backend *b, void *buffer) { ast_backend_cpu()->buffer_free(b, buffer); }

static const ast_backend *second(void)
{
    static ast_backend b;
    if (!b.name) {
        b = *ast_backend_cpu();
        b.name = "second";
        b.buffer_alloc = second_alloc;
        b.buffer_free = second_free;
        cr_assert_eq(ast_backend_register(&b), 0);
    }
    return &b;
}

Test(backend, found_by_name_and_listed)
{
    cr_assert_eq(ast_backend_find("cpu"), ast_backend_cpu());
    cr_assert_null(ast_backend_find("tpu"));
    const ast_backend *b = second();
    cr_assert_eq(ast_backend_find("second"), b);
    cr_assert_eq(ast_backend_register(b), -1, "a name is registered once");
#if AST_HAVE_CUDA
    cr_assert_str_eq(ast_backend_names(), "cpu|cuda|second"); /* compiled-in backends first */
#else
    cr_assert_str_eq(ast_backend_names(), "cpu|second");
#endif
}

/* The step arena is carved in the same order every step, so a step's
 * tensors sit at the same addresses every time (what graph capture needs). */
Test(backend, a_steps_addresses_repeat)
{
    ast_model_config cfg;
    ast_model_config_base(&cfg, 12);
    ast_model *m = mf_model(&cfg, 3);
    ast_ctx *c = ast_ctx_new_on(ast_model_backend(m), 5);
    float *first[2] = {0};
    for (int step = 0; step < 3; step++) {
        ast_ctx_reset(c);
        ast_tensor *x = ast_zeros(c, 3, (int64_t[]){2, 6, 12}), *t = ast_zeros(c, 2, (int64_t[]){2, 1});
        ast_tensor *p = ast_zeros(c, 3, (int64_t[]){2, 6, 3});
        ast_model_out o = ast_model_forward(m, c, x, t, p, NULL, NULL, NULL);
        ast_backward(c, ast_mean(c, o.expression));
        if (step == 0) first[0] = o.expression->data, first[1] = o.positions->data;
        else cr_assert(o.expression->data == first[0] && o.positions->data == first[1], "step %d moved", step);
    }
    ast_ctx_free(c);
    ast_model_free(m);
}

static ast_model_out forward_on(ast_model *m, ast_ctx *c)
{
    int64_t B = 2, N = 7, G = 12;
    ast_tensor *x = ast_zeros(c, 3, (int64_t[]){B, N, G}), *p = ast_zeros(c, 3, (int64_t[]){B, N, 3});
    ast_tensor *t = ast_zeros(c, 2, (int64_t[]){B, 1});
    for (int64_t i = 0; i < x->size; i++) x->data[i] = (float)((i * 37) % 11) / 11.0f;
    for (int64_t i = 0; i < p->size; i++) p->data[i] = (float)((i * 13) % 7) / 7.0f - 0.5f;
    t->data[0] = 0.25f, t->data[1] = 0.75f;
    return ast_model_forward(m, c, x, t, p, NULL, NULL, NULL);
}

/* Linear attention and the dense FFN are built from host ops only: they
 * run on any backend, and here give the CPU's numbers bit for bit. */
Test(backend, ops_only_plugins_run_unchanged_on_another_backend)
{
    ast_model_config cfg;
    ast_model_config_base(&cfg, 12);
    ast_model *on_cpu = mf_model(&cfg, 9);
    cfg.device = second()->name;
    ast_model *on_second = mf_model(&cfg, 9);
    cr_assert_eq(ast_model_backend(on_second), second());
    ast_ctx *a = ast_ctx_new_on(ast_model_backend(on_cpu), 1), *b;
    buffers_made = 0;
    b = ast_ctx_new_on(ast_model_backend(on_second), 1);
    cr_assert_gt(buffers_made, 0, "the arena comes from the backend's buffers");
    ast_model_out x = forward_on(on_cpu, a), y = forward_on(on_second, b);
    cr_assert_eq(memcmp(x.expression->data, y.expression->data, (size_t)x.expression->size * sizeof(float)), 0);
    cr_assert_eq(memcmp(x.positions->data, y.positions->data, (size_t)x.positions->size * sizeof(float)), 0);
    ast_ctx_free(a), ast_ctx_free(b);
    ast_model_free(on_cpu), ast_model_free(on_second);
}

/* The tiled gated attention is a fused op with kernels for the CPU (and,
 * in a CUDA build, the GPU) only. */
#if AST_HAVE_CUDA
#define GATED_KERNELS "cpu|cuda"
#else
#define GATED_KERNELS "cpu"
#endif
Test(backend, a_fused_op_without_a_kernel_is_refused_clearly)
{
    ast_model_config cfg;
    ast_model_config_base(&cfg, 12);
    mf_gated(&cfg, "headwise");
    cfg.device = second()->name;
    ast_error e = {{0}};
    cr_assert_null(ast_model_new(&cfg, 1, &e));
    cr_assert(strstr(e.msg, "fused op 'gated_attention' has no kernel for backend 'second' (it has: " GATED_KERNELS ")"), "%s",
              e.msg);
}

Test(backend, the_config_names_a_backend_of_this_build)
{
    ast_error e = {{0}};
    ast_cfg *cfg = ast_cfg_load_string("device: gpu0\n", "run.yaml", &e);
    cr_assert_not_null(cfg, "%s", e.msg);
    ast_model_config mc;
    cr_assert_eq(ast_cfg_model(cfg, 12, &mc, &e), -1);
    cr_assert(strstr(e.msg, "run.yaml:1:9: device: 'gpu0' is not a device of this build; choose one of cpu"), "%s",
              e.msg);
    ast_cfg_free(cfg);
}

/* A backend that declines relu: the CPU's kernels with relu's slot zero. */
static const ast_backend *declining(void)
{
    static ast_backend b;
    static ast_op_kernel kernels[AST_N_OPS];
    return cpu_backend_without(&b, kernels, AST_OP_relu, "declining");
}

/* A backend that declines the fused add_layernorm (as the CUDA one does):
 * the front end runs add and layernorm instead, with the same values and,
 * through those ops' backwards, the same gradients. */
Test(backend, a_declined_fused_op_runs_as_its_parts)
{
    static ast_backend b;
    static ast_op_kernel kernels[AST_N_OPS];
    const ast_backend *unfused = cpu_backend_without(&b, kernels, AST_OP_add_layernorm, "unfused");
    ast_params *p = ast_params_new(5);
    int64_t shape[2] = {3, 8};
    ast_tensor *a = ast_param(ast_scope_new(p, "t"), "a", 2, shape, AST_INIT_NORMAL, 1.0f);
    ast_tensor *x = ast_param(ast_scope_new(p, "t"), "x", 2, shape, AST_INIT_NORMAL, 1.0f);
    float got[2][24], grad[2][24];
    for (int fused = 0; fused < 2; fused++) {
        ast_ctx *c = ast_ctx_new_on(fused ? ast_backend_cpu() : unfused, 1);
        ast_params_zero_grad(p);
        ast_tensor *y = ast_add_layernorm(c, a, x, NULL, NULL, 1e-5f);
        memcpy(got[fused], y->data, sizeof got[fused]);
        ast_backward(c, ast_sum(c, ast_mul(c, y, y)));
        memcpy(grad[fused], a->grad, sizeof grad[fused]);
        ast_ctx_free(c);
    }
    cr_assert_arr_eq(got[0], got[1], sizeof got[0], "values differ between the fused op and its parts");
    cr_assert_arr_eq(grad[0], grad[1], sizeof grad[0], "gradients differ between the fused op and its parts");
    ast_params_free(p);
}

/* A backend supplies kernels and may decline an op (a zero slot): the op
 * then stops with one message naming the op and the backend, while every
 * other op runs (the dispatch above the kernels is the same for all). */
Test(backend, a_declined_op_names_the_op_and_the_backend)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDERR_FILENO);
        ast_ctx *c = ast_ctx_new_on(declining(), 1);
        ast_tensor *x = ast_affine(c, ast_zeros(c, 1, (int64_t[]){4}), 1.0f, 2.0f);
        ast_relu(c, x);
        _exit(0);
    }
    close(fds[1]);
    char out[1024] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof out - 1 && (r = read(fds[0], out + got, sizeof out - 1 - got)) > 0) got += (size_t)r;
    close(fds[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "the declined op must stop the step");
    cr_assert(strstr(out, "op relu: the declining backend has no kernel for it"), "got: %s", out);
}
