/* test_distbias: the example plugin tests itself as alphast tests its own
 * plugins, with libalphast-plugintest (alphast/plugin_test.h) and nothing
 * else: load attn_distbias.so, check its options are validated, build an
 * instance, run its forward and check its gradients against finite
 * differences. `make check` builds and runs it:
 *
 *     cc test_distbias.c $(pkg-config --cflags --libs alphast-plugin-test) -lm
 *     ./test_distbias DIR      # DIR holds attn_distbias.so (default .)
 *
 * Exits 0 when every check passes, 1 otherwise, saying which failed. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <alphast/plugin_test.h>

static int failed;

static void check(int ok, const char *what, const char *detail)
{
    printf("%s: %s%s%s\n", ok ? "ok  " : "FAIL", what, detail[0] ? ": " : "", detail);
    failed |= !ok;
}

enum { B = 2, N = 5, E = 8, H = 2, K = 4 };

static const ast_layer_dims dims = {.d_model = E, .heads = H, .d_ff = 16, .d_time = 4, .num_layers = 1,
                                    .ln_eps = 1e-6f};

/* The option table refuses what a config would have refused. */
static void options_are_checked(const ast_plugin_desc *d)
{
    const char *bad[] = {"num_kernels=1", "max_distanse=3", "use_gate=maybe"};
    for (int i = 0; i < 3; i++) {
        ast_test_layer l;
        char err[512] = "";
        int refused = ast_test_create(&l, d, "attention", &dims, 7, &bad[i], 1, err, sizeof err) != 0;
        check(refused, "a bad option is refused", refused ? err : bad[i]);
        if (!refused) ast_test_destroy(&l);
    }
}

/* Forward and gradients of one configuration: x, the positions and every
 * parameter, with padded cells in the mask. */
static void run(const ast_plugin_desc *d, const char *gate)
{
    const char *opts[] = {"num_kernels=4", "max_distance=3.0", gate};
    ast_test_layer l;
    char err[512] = "", what[160];
    if (ast_test_create(&l, d, "attention", &dims, 7, opts, 3, err, sizeof err)) {
        check(0, gate, err);
        return;
    }
    /* The distance-bias weights start at zero: give them values, or the
     * gradient check would not exercise the distance path. */
    ast_tensor *w = ast_test_find(&l, "distance_bias.weight");
    for (int64_t i = 0; w && i < w->size; i++) w->data[i] = 0.6f * sinf(1.7f * (float)i + 0.3f);
    check(w && w->shape[0] == H && w->shape[1] == K, "distance_bias.weight is [H, K]", "");

    const float padded[B * N] = {1, 1, 0, 1, 1, 1, 0, 1, 1, 0};
    ast_tensor *x = ast_test_tensor(3, (int64_t[]){B, N, E}, NULL, 1);
    ast_tensor *pos = ast_test_tensor(3, (int64_t[]){B, N, 3}, NULL, 1);
    ast_tensor *mask = ast_test_tensor(2, (int64_t[]){B, N}, padded, 0);
    ast_test_fill_normal(x, 11, 1.0f);
    ast_test_fill_normal(pos, 12, 1.0f);
    ast_fwd_args args = {.mask = mask, .positions = pos};

    ast_ctx *c = ast_test_ctx_new(1, 0);
    ast_tensor *y = ast_test_forward(&l, c, x, &args);
    int finite = y && y->ndim == 3 && y->shape[0] == B && y->shape[1] == N && y->shape[2] == E;
    for (int64_t i = 0; finite && i < y->size; i++) finite = isfinite(y->data[i]);
    snprintf(what, sizeof what, "%s: forward gives finite [B, N, E]", gate);
    check(finite, what, "");
    const ast_stat *s = ast_test_stat(c, "distbias.attended_distance", 0);
    snprintf(what, sizeof what, "%s: publishes distbias.attended_distance per head", gate);
    check(s && s->n == H, what, "");
    ast_test_ctx_free(c);

    ast_test_gc_result r = ast_test_gradcheck(&l, x, &args, NULL);
    snprintf(what, sizeof what, "%s: gradients of %lld elements match finite differences", gate,
             (long long)r.n_checked);
    snprintf(err, sizeof err, "max relative error %.2g (tolerance %g) at %s[%lld], analytic %g numeric %g",
             r.max_err, AST_TEST_GC_TOL, r.worst, (long long)r.worst_index, r.analytic, r.numeric);
    check(r.pass, what, err);

    ast_test_tensor_free(x);
    ast_test_tensor_free(pos);
    ast_test_tensor_free(mask);
    ast_test_destroy(&l);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    char err[1024] = "";
    ast_test_plugin *p = ast_test_load_named(dir, AST_KIND_ATTENTION, "distbias", err, sizeof err);
    if (!p) {
        check(0, "load attn_distbias", err);
        return 1;
    }
    check(1, "load", ast_test_path(p));
    options_are_checked(ast_test_desc(p));
    run(ast_test_desc(p), "use_gate=false");
    run(ast_test_desc(p), "use_gate=true");
    ast_test_unload(p);
    printf("%s\n", failed ? "test_distbias: FAILED" : "test_distbias: all passed");
    return failed;
}
