/* The step context: arena reuse and growth, gradient accumulation on the
 * tape, named losses and published statistics. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"

#define MIB ((size_t)1 << 20)

Test(ctx, reset_reuses_the_arena_and_zeroes_it)
{
    ast_ctx *c = ast_ctx_new(0);
    cr_assert_eq(ast_ctx_arena_used(c), 0);
    unsigned char *first = ast_alloc(c, 1000);
    memset(first, 0xab, 1000);
    ast_alloc(c, 5000);
    size_t used = ast_ctx_arena_used(c);
    cr_assert_geq(used, 6000);
    cr_assert_eq(ast_ctx_arena_peak(c), used);

    ast_ctx_reset(c);
    cr_assert_eq(ast_ctx_arena_used(c), 0, "reset forgets the step");
    cr_assert_eq(ast_ctx_arena_peak(c), used, "the peak survives a reset");
    unsigned char *again = ast_alloc(c, 1000);
    cr_assert_eq(again, first, "the next step reuses the same memory");
    for (int i = 0; i < 1000; i++) cr_assert_eq(again[i], 0, "arena memory comes back zeroed");
    ast_alloc(c, 10);
    cr_assert_eq(ast_ctx_arena_peak(c), used, "a smaller step leaves the peak alone");
    ast_ctx_free(c);
}

/* Four 8 MiB blocks: 32 MiB, more than the first 16 MiB chunk (ctx.c). */
static int allocs_contiguous(ast_ctx *c, unsigned char **blk, int n, size_t bytes)
{
    int contiguous = 1;
    for (int i = 0; i < n; i++) {
        blk[i] = ast_alloc(c, bytes);
        if (i && blk[i] != blk[i - 1] + bytes) contiguous = 0;
    }
    return contiguous;
}

Test(ctx, outgrown_arena_becomes_one_chunk_after_reset)
{
    enum { N = 4 };
    unsigned char *blk[N];
    ast_ctx *c = ast_ctx_new(0);
    cr_assert_not(allocs_contiguous(c, blk, N, 8 * MIB), "32 MiB cannot fit the first chunk");
    cr_assert_eq(ast_ctx_arena_used(c), N * 8 * MIB);
    blk[0][0] = 1;
    blk[N - 1][8 * MIB - 1] = 1; /* all of it is writable */

    ast_ctx_reset(c);
    cr_assert_eq(ast_ctx_arena_used(c), 0);
    cr_assert(allocs_contiguous(c, blk, N, 8 * MIB), "after reset the whole step fits one chunk");
    cr_assert_eq(ast_ctx_arena_peak(c), N * 8 * MIB);
    ast_ctx_free(c);
}

/* z = (x w^T) x with x = [v], w = [1]: z = v^2, dz/dx = 2v. x enters two
 * tape nodes; overwriting instead of adding would give v. */
Test(ctx, a_tensor_used_twice_accumulates_both_gradients)
{
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){1, 1}, 1.0f);
    x->data[0] = 1.5f;
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *w = ast_tensor_from(c, 2, (int64_t[]){1, 1}, (float[]){1.0f});
    ast_tensor *z = ast_matmul(c, ast_linear(c, x, w, NULL), x);
    cr_assert_eq(z->data[0], 2.25f);
    ast_backward(c, z);
    cr_assert_eq(x->grad[0], 3.0f, "dz/dx = %g", x->grad[0]);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ctx, gradients_accumulate_across_steps_until_zeroed)
{
    ast_params *p = ast_params_new(2);
    ast_tensor *x = gc_input(p, "x", 1, (int64_t[]){3}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    for (int step = 1; step <= 2; step++) {
        ast_ctx_reset(c);
        ast_backward(c, ast_sum(c, x));
        cr_assert_eq(x->grad[1], (float)step, "step %d: grad %g", step, x->grad[1]);
    }
    ast_params_zero_grad(p);
    cr_assert_eq(x->grad[1], 0.0f);
    ast_ctx_free(c);
    ast_params_free(p);
}

Test(ctx, nothing_is_recorded_without_a_grad_input)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *x = ast_tensor_from(c, 1, (int64_t[]){2}, (float[]){1, 2});
    ast_tensor *s = ast_sum(c, x);
    cr_assert_eq(s->flags & AST_REQUIRES_GRAD, 0u);
    ast_backward(c, s); /* no path to a parameter: a no-op, not a crash */
    cr_assert_null(x->grad);
    ast_ctx_free(c);
}

Test(ctx, named_loss_is_kept_for_the_step)
{
    ast_ctx *c = ast_ctx_new(0);
    cr_assert_eq(ast_ctx_n_losses(c), 0, "no loss published yet");
    char name[16] = "moe_aux";
    ast_tensor *l = ast_tensor_from(c, 1, (int64_t[]){1}, (float[]){0.25f});
    ast_add_loss(c, name, l);
    strcpy(name, "clobbered");
    cr_assert_eq(ast_ctx_n_losses(c), 1);
    cr_assert_str_eq(ast_ctx_loss_name(c, 0), "moe_aux", "the name is copied");
    cr_assert_eq(ast_ctx_loss(c, 0), l);
    ast_ctx_reset(c);
    cr_assert_eq(ast_ctx_n_losses(c), 0);
    ast_ctx_free(c);
}

/* More stats than the initial table holds (64), each copied on publish. */
Test(ctx, published_stats_are_copied_and_last_one_step)
{
    enum { N = 100 };
    ast_ctx *c = ast_ctx_new(0);
    float v[3];
    char name[32];
    for (int i = 0; i < N; i++) {
        v[0] = (float)i, v[1] = (float)-i, v[2] = 0.5f;
        snprintf(name, sizeof name, "stat.%d", i);
        ast_publish_stat(c, name, i % 7 - 1, v, 3);
    }
    memset(v, 0, sizeof v);
    strcpy(name, "clobbered");
    cr_assert_eq(ast_ctx_n_stats(c), N);
    const ast_stat *s = ast_ctx_stats(c);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "stat.%d", i);
        cr_assert_str_eq(s[i].name, name);
        cr_assert_eq(s[i].layer, i % 7 - 1);
        cr_assert_eq(s[i].n, 3);
        cr_assert_eq(s[i].values[0], (float)i);
        cr_assert_eq(s[i].values[1], (float)-i);
        cr_assert_eq(s[i].values[2], 0.5f);
    }
    ast_ctx_reset(c);
    cr_assert_eq(ast_ctx_n_stats(c), 0);
    ast_ctx_free(c);
}

/* ALPHAST_PROFILE=1: the table printed when the context is freed names the
 * ops of the steps with their forward and backward times. */
Test(ctx, profile_prints_a_table_of_the_steps_ops, .init = cr_redirect_stderr)
{
    setenv("ALPHAST_PROFILE", "1", 1);
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){8, 16}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    unsetenv("ALPHAST_PROFILE");
    for (int step = 0; step < 3; step++) {
        ast_ctx_reset(c);
        ast_backward(c, ast_sum(c, ast_gelu(c, ast_relu(c, x))));
    }
    ast_ctx_free(c);
    ast_params_free(p);
    fflush(stderr);
    char out[4096] = {0};
    fread(out, 1, sizeof out - 1, cr_get_redirected_stderr());
    cr_assert(strstr(out, "alphast profile: 3 steps"), "got: %s", out);
    cr_assert(strstr(out, "\ngelu ") && strstr(out, "\nrelu ") && strstr(out, "\nsum "), "got: %s", out);
}

Test(ctx, no_profile_without_the_variable, .init = cr_redirect_stderr)
{
    unsetenv("ALPHAST_PROFILE");
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_free(c);
    fflush(stderr);
    char out[256] = {0};
    fread(out, 1, sizeof out - 1, cr_get_redirected_stderr());
    cr_assert_str_empty(out);
}
