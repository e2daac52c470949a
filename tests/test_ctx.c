/* The step context: arena reuse and growth, spans handed back and reused,
 * gradient accumulation on the tape and gradients handed back once the
 * tape is done with them, named losses and published statistics. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>
#include <string.h>

#include "engine/arena.h"
#include "engine/backend.h"
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

/* ---- spans handed back to the arena during a step ------------------------ */

/* Between spans, so they neither merge nor end where the carving stops. */
static void *fence(ast_arena *a) { return ast_arena_take(a, 64); }

Test(ctx, a_span_handed_back_is_reused_best_fit)
{
    ast_arena a;
    ast_arena_init(&a, ast_backend_cpu());
    unsigned char *big = ast_arena_take(&a, 3 * MIB);
    fence(&a);
    unsigned char *small = ast_arena_take(&a, MIB);
    fence(&a);
    ast_arena_give_back(&a, big, 3 * MIB);
    ast_arena_give_back(&a, small, MIB);
    size_t used = a.used;
    cr_assert_eq(ast_arena_take(&a, MIB), small, "the smallest span that fits comes first");
    cr_assert_eq(ast_arena_take(&a, MIB), big, "then the bigger one, from its start");
    cr_assert_eq(ast_arena_take(&a, 2 * MIB), big + MIB, "then the rest of it");
    cr_assert_eq(a.used, used, "nothing new was carved");
    cr_assert_eq(a.n_spare, 0);
    ast_arena_free(&a);
}

Test(ctx, neighbouring_spans_merge)
{
    ast_arena a;
    ast_arena_init(&a, ast_backend_cpu());
    unsigned char *p = ast_arena_take(&a, MIB), *q = ast_arena_take(&a, MIB), *r = ast_arena_take(&a, MIB);
    fence(&a);
    ast_arena_give_back(&a, p, MIB);
    ast_arena_give_back(&a, r, MIB);
    cr_assert_eq(a.n_spare, 2);
    ast_arena_give_back(&a, q, MIB); /* joins both */
    cr_assert_eq(a.n_spare, 1);
    cr_assert_eq(ast_arena_take(&a, 3 * MIB), p, "three neighbours make one span");
    ast_arena_free(&a);
}

Test(ctx, a_span_where_the_carving_stops_goes_back_to_the_chunk)
{
    ast_arena a;
    ast_arena_init(&a, ast_backend_cpu());
    fence(&a);
    size_t before = a.used;
    unsigned char *p = ast_arena_take(&a, MIB), *q = ast_arena_take(&a, MIB);
    ast_arena_give_back(&a, p, MIB);
    cr_assert_eq(a.n_spare, 1);
    ast_arena_give_back(&a, q, MIB); /* q ends the carving, and then so does p */
    cr_assert_eq(a.n_spare, 0, "both went back to the chunk");
    cr_assert_eq(a.used, before);
    cr_assert_eq(a.peak, before + 2 * MIB, "the peak remembers them");
    cr_assert_eq(ast_arena_take(&a, 2 * MIB), p, "a bigger request gets the memory");
    ast_arena_free(&a);
}

Test(ctx, reset_forgets_the_spans)
{
    ast_arena a;
    ast_arena_init(&a, ast_backend_cpu());
    unsigned char *p = ast_arena_take(&a, MIB);
    fence(&a);
    ast_arena_give_back(&a, p, MIB);
    ast_arena_reset(&a);
    cr_assert_eq(a.n_spare, 0);
    cr_assert_eq(ast_arena_take(&a, 64), p, "the step starts at the chunk's base");
    cr_assert_eq(ast_arena_take(&a, MIB), p + 64, "not in the forgotten span");
    ast_arena_free(&a);
}

#if defined(__SANITIZE_ADDRESS__)
/* ASan poisons a span handed back: reading it is reported (and ends the
 * test's process with ASan's exit status 1). */
Test(ctx, reading_a_span_handed_back_is_caught_by_asan, .exit_code = 1)
{
    ast_arena a;
    ast_arena_init(&a, ast_backend_cpu());
    volatile float *p = ast_arena_take(&a, MIB);
    fence(&a);
    ast_arena_give_back(&a, (void *)p, MIB);
    float v = p[7];
    cr_log_error("read %g from a span handed back without a report", (double)v);
    ast_arena_free(&a);
}
#endif

/* ---- gradients handed back by the backward pass ------------------------------- */

enum { CHAIN = 16 };

/* y_16 = s^16 x through 16 affine nodes of 1 MiB each: once a node's
 * backward has run, its output's gradient is reused, so the backward
 * holds two gradients at a time instead of all 16. */
Test(ctx, backward_reuses_the_memory_of_finished_gradients)
{
    const float s = 1.0001f;
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 1, (int64_t[]){MIB / sizeof(float)}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y[CHAIN + 1] = {x};
    for (int k = 1; k <= CHAIN; k++) y[k] = ast_affine(c, y[k - 1], s, 0.0f);
    size_t forward = ast_ctx_arena_used(c);
    ast_backward(c, ast_sum(c, y[CHAIN]));
    size_t peak = ast_ctx_arena_peak(c);
    cr_assert_lt(peak, forward + 3 * MIB, "peak %zu MiB over a forward of %zu MiB", peak / MIB, forward / MIB);
    float want = 1.0f;
    for (int k = 0; k < CHAIN; k++) want *= s; /* the backward's products, in its order */
    for (int64_t i = 0; i < x->size; i += 4099) cr_assert_eq(x->grad[i], want, "dx[%lld]", (long long)i);
    for (int k = 1; k <= CHAIN; k++) cr_assert_null(y[k]->grad, "y%d keeps its gradient", k);
    ast_ctx_free(c);
    ast_params_free(p);
}

/* out += k a, the gradient flowing through: MoE's combine nodes add into
 * one output like this. */
static void add_into_backward(ast_ctx *c, const ast_node *n)
{
    float *g = ast_grad(c, n->in[0]);
    for (int64_t i = 0; g && i < n->out->size; i++) g[i] += n->farg[0] * n->out->grad[i];
}

static void add_into(ast_ctx *c, ast_tensor *out, ast_tensor *a, float k)
{
    for (int64_t i = 0; i < out->size; i++) out->data[i] += k * a->data[i];
    ast_record(c, &(ast_node){.op = "add_into", .backward = add_into_backward, .out = out, .in = {a}, .n_in = 1,
                              .farg = {k}});
}

/* The output's gradient is handed back only after the earliest of the
 * nodes that write it; handed back after the latest, a would get none. */
Test(ctx, nodes_adding_into_one_output_all_get_its_gradient)
{
    ast_params *p = ast_params_new(2);
    ast_tensor *a = gc_input(p, "a", 1, (int64_t[]){4}, 1.0f), *b = gc_input(p, "b", 1, (int64_t[]){4}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *out = ast_zeros(c, 1, (int64_t[]){4});
    add_into(c, out, a, 1.0f);
    add_into(c, out, b, 2.0f);
    ast_backward(c, ast_sum(c, out));
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(a->grad[i], 1.0f, "da[%d] = %g", i, a->grad[i]);
        cr_assert_eq(b->grad[i], 2.0f, "db[%d] = %g", i, b->grad[i]);
    }
    ast_ctx_free(c);
    ast_params_free(p);
}

/* t *= 2 in place: the node's output is its input, whose gradient the
 * backward turns into the gradient of t before the op. */
static void double_in_place_backward(ast_ctx *c, const ast_node *n)
{
    for (int64_t i = 0; i < n->out->size; i++) n->out->grad[i] *= 2.0f;
}

/* A leaf of the step written in place keeps its gradient: the in-place
 * node is not where it first appears. */
Test(ctx, an_op_writing_into_its_input_leaves_the_gradient)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *t = ast_tensor_from(c, 1, (int64_t[]){3}, (float[]){1, 2, 3});
    t->flags |= AST_REQUIRES_GRAD;
    for (int i = 0; i < 3; i++) t->data[i] *= 2.0f;
    ast_record(c, &(ast_node){.op = "double_in_place", .backward = double_in_place_backward, .out = t, .in = {t},
                              .n_in = 1});
    ast_backward(c, ast_sum(c, t));
    cr_assert_not_null(t->grad, "the leaf's gradient was handed back");
    for (int i = 0; i < 3; i++) cr_assert_eq(t->grad[i], 2.0f, "dt[%d] = %g", i, t->grad[i]);
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

/* The CPU's kernels and memory under a device's flag: what a device does
 * with a step's statistics (copies into pinned memory with the step's ops,
 * ast_ctx_read_later), where the copies are memcpy. */
static const ast_backend *device_like(void)
{
    static ast_backend b;
    if (!b.name) {
        b = *ast_backend_cpu();
        b.name = "device-like";
        b.memory = AST_MEM_DEVICE;
    }
    return &b;
}

/* A device's statistic tensors come to host memory outside the step
 * arena, at addresses every step carving the same statistics repeats (a
 * captured step keeps writing where the host reads), with the values the
 * CPU publishes; a statistic larger than a pinned block gets its own. */
Test(ctx, device_statistics_are_read_later_where_every_step_puts_them)
{
    enum { BIG = 20000 };
    ast_ctx *dev = ast_ctx_new_on(device_like(), 0), *cpu = ast_ctx_new(0);
    const float *first[3] = {0};
    float *big = malloc(BIG * sizeof *big);
    for (int step = 0; step < 3; step++) {
        ast_ctx *cs[2] = {dev, cpu};
        for (int k = 0; k < 2; k++) {
            ast_ctx *c = cs[k];
            ast_ctx_reset(c);
            ast_tensor *x = ast_zeros(c, 2, (int64_t[]){3, 4}), *b = ast_zeros(c, 1, (int64_t[]){BIG});
            for (int i = 0; i < 12; i++) big[i] = (float)(i * (step + 1)) - 5.5f;
            ast_tensor_write(c, x, 0, 12, big);
            for (int i = 0; i < BIG; i++) big[i] = (float)(i + step);
            ast_tensor_write(c, b, 0, BIG, big);
            ast_publish_stat_tensor(c, "norms", 0, ast_vecnorm(c, x));
            ast_publish_stat_tensor(c, "big", -1, b);
            ast_publish_stat_tensor(c, "norms", 1, ast_vecnorm(c, x));
        }
        const ast_stat *d = ast_ctx_stats(dev), *h = ast_ctx_stats(cpu);
        cr_assert_eq(ast_ctx_n_stats(dev), 3);
        for (int i = 0; i < 3; i++) {
            cr_assert(d[i].n == h[i].n && d[i].layer == h[i].layer && !strcmp(d[i].name, h[i].name));
            cr_assert(!memcmp(d[i].values, h[i].values, (size_t)d[i].n * sizeof(float)), "step %d stat %d", step, i);
            if (step == 0) first[i] = d[i].values;
            cr_assert_eq(d[i].values, first[i], "step %d: statistic %d moved", step, i);
        }
        cr_assert(d[1].values + BIG <= d[0].values || d[0].values + 3 <= d[1].values, "overlapping statistics");
    }
    free(big);
    ast_ctx_free(dev), ast_ctx_free(cpu);
}

/* The numbers of `op`'s row of the profile table. */
typedef struct profile_row {
    double calls, forward_ms, backward_ms, share, fwd_mb, bwd_mb;
} profile_row;

static int profile_row_of(const char *table, const char *op, profile_row *r)
{
    char head[32];
    snprintf(head, sizeof head, "\n%s ", op);
    const char *line = strstr(table, head);
    return line && sscanf(line + strlen(head), "%lf %lf %lf %lf%% %lf %lf", &r->calls, &r->forward_ms, &r->backward_ms,
                          &r->share, &r->fwd_mb, &r->bwd_mb) == 6;
}

/* ALPHAST_PROFILE=1: the table printed when the context is freed names the
 * ops of the steps with their forward and backward times and the arena
 * megabytes each asks for: gelu's output and the Phi its backward keeps
 * (1 MiB each) and, in its backward, its input's gradient (1 MiB). */
Test(ctx, profile_prints_a_table_of_the_steps_ops, .init = cr_redirect_stderr)
{
    setenv("ALPHAST_PROFILE", "1", 1);
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){256, 1024}, 1.0f);
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
    profile_row gelu, relu, sum;
    cr_assert(profile_row_of(out, "gelu", &gelu) && profile_row_of(out, "relu", &relu) &&
              profile_row_of(out, "sum", &sum), "got: %s", out);
    cr_assert(gelu.fwd_mb == 2.0 && gelu.bwd_mb == 1.0, "gelu asks %g MB forward, %g MB backward", gelu.fwd_mb,
              gelu.bwd_mb);
    cr_assert_eq(relu.bwd_mb, 0.0, "x's gradient is the parameter's, not the arena's");
    double peak = 0.0;
    cr_assert(sscanf(strstr(out, "\narena peak ") + 12, "%lf", &peak) == 1 && peak >= 5.0 && peak < 6.0,
              "two activations, Phi and two gradients of 1 MiB: got: %s", out);
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
