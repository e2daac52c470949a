/* The example out-of-tree plugin (examples/attn_distbias), exercised the
 * way its author would: built with its own Makefile and pkg-config into a
 * temporary directory, loaded by name through ALPHAST_PLUGIN_PATH, then
 * checked for its descriptor and options, values against an independent
 * double-precision reference, gradients, the mask, its statistic and
 * monitor, and a short training run on the bundled data. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "model/model.h"
#include "plugin/loader.h"
#include "engine/sink.h"
#include "train/metrics_jsonl.h"
#include "train/train.h"
#include "distbias_reference.h"
#include "plugin_fixture.h"
#include "test_files.h"

#define PREFIX "attention"

static char dir[] = "/tmp/alphast-example-XXXXXX";

static const char *build_dir(void)
{
    const char *b = getenv("ALPHAST_BUILD_DIR");
    return b ? b : ALPHAST_BUILD_DIR;
}

/* Once, in the runner before any test: builds both example plugins with
 * examples/attn_distbias/Makefile into a fresh directory and puts it first
 * on the plugin search path, which every test inherits. The make flags of
 * `make check` are not the example's business, so they are cleared. */
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    char cmd[8192];
    if (!mkdtemp(dir)) {
        perror(dir);
        return;
    }
    snprintf(cmd, sizeof cmd,
             "MAKEFLAGS= MFLAGS= MAKELEVEL= PKG_CONFIG_PATH='%s' make -s --no-print-directory "
             "-C '%s/examples/attn_distbias' O='%s' CC='%s' PKG_CONFIG='%s' CFLAGS='-O2 -Werror'",
             build_dir(), ALPHAST_SOURCE_DIR, dir, AST_TEST_CC, AST_TEST_PKG_CONFIG);
    if (system(cmd)) fprintf(stderr, "the example does not build: %s\n", cmd);
    setenv("ALPHAST_PLUGIN_PATH", dir, 1);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
}

static void init_plugins(void)
{
    const char *path = getenv("ALPHAST_PLUGIN_PATH");
    char so[4096];
    snprintf(so, sizeof so, "%s/attn_distbias.so", path ? path : "(unset)");
    cr_assert_eq(access(so, R_OK), 0, "%s was not built (see the build error above)", so);
    ast_error e = {""};
    cr_assert(ast_plugins_init(&e), "%s", e.msg);
}

static void shutdown_plugins(void) { ast_plugins_shutdown(); }

TestSuite(example, .init = init_plugins, .fini = shutdown_plugins, .timeout = 60);

static const ast_plugin *load(ast_plugin_kind kind)
{
    ast_error e = {""};
    const ast_plugin *p = ast_plugin_load(kind, "distbias", &e);
    cr_assert_not_null(p, "%s", e.msg);
    char want[4096];
    snprintf(want, sizeof want, "%s/%s_distbias", getenv("ALPHAST_PLUGIN_PATH"), ast_kind_prefix(kind));
    cr_assert(!strncmp(ast_plugin_path(p), want, strlen(want)), "loaded %s, not the one just built",
              ast_plugin_path(p));
    return p;
}

/* ---- descriptor and options ----------------------------------------------- */

Test(example, descriptor_and_option_table)
{
    const ast_plugin_desc *d = ast_plugin_desc_of(load(AST_KIND_ATTENTION));
    cr_assert_eq(d->kind, AST_KIND_ATTENTION);
    cr_assert_str_eq(d->name, "distbias");
    cr_assert_eq(d->abi_major, AST_ABI_MAJOR);
    cr_assert_eq(d->n_options, 3);
    const char *names[] = {"num_kernels", "max_distance", "use_gate"};
    const ast_opt_type types[] = {AST_OPT_INT, AST_OPT_FLOAT, AST_OPT_BOOL};
    for (int i = 0; i < 3; i++) {
        cr_assert_str_eq(d->options[i].name, names[i]);
        cr_assert_eq(d->options[i].type, types[i], "%s", names[i]);
        cr_assert(d->options[i].help && *d->options[i].help, "%s has no help", names[i]);
    }
}

Test(example, options_are_validated_against_the_table)
{
    const ast_plugin *p = load(AST_KIND_ATTENTION);
    ast_optval v[3];
    ast_error e = {""};
    cr_assert(ast_plugin_options(p, NULL, 0, v, &e), "%s", e.msg);
    cr_assert_eq(v[0].i, 16);
    cr_assert_float_eq(v[1].f, 4.0, 0.0);
    cr_assert_eq(v[2].i, 0);

    const ast_optsrc one_kernel = {"num_kernels", "1", "c.yaml:3:5"};
    cr_assert_not(ast_plugin_options(p, &one_kernel, 1, v, &e));
    cr_assert(strstr(e.msg, "c.yaml:3:5") && strstr(e.msg, "[2, 256]"), "%s", e.msg);
    const ast_optsrc typo = {"max_distanse", "3", "c.yaml:4:5"};
    cr_assert_not(ast_plugin_options(p, &typo, 1, v, &e));
    cr_assert(strstr(e.msg, "did you mean 'max_distance'"), "%s", e.msg);
}

/* ---- an instance on small inputs ------------------------------------------- */

enum { B = 2, N = 5, E = 8, H = 2, K = 4 };

static const ast_layer_dims dims = {.d_model = E, .heads = H, .d_ff = 16, .d_time = 4, .num_layers = 1,
                                    .ln_eps = 1e-6f};

static pf_instance make(int gate)
{
    const char *opts[] = {"num_kernels=4", "max_distance=3.0", gate ? "use_gate=true" : "use_gate=false"};
    pf_instance pi = pf_create(ast_plugin_desc_of(load(AST_KIND_ATTENTION)), PREFIX, &dims, 7, opts, 3);
    /* Trained-looking bias weights: the initial zeros would hide the
     * distance path from every check. */
    ast_tensor *w = ast_params_find(pi.params, PREFIX ".distance_bias.weight");
    cr_assert_not_null(w);
    for (int64_t i = 0; i < w->size; i++) w->data[i] = 0.6f * sinf(1.7f * (float)i + 0.3f);
    return pi;
}

typedef struct inputs {
    ast_params *store;
    ast_tensor *x, *pos;
} inputs;

static inputs make_inputs(int n)
{
    inputs in = {.store = ast_params_new(11)};
    in.x = gc_input(in.store, "x", 3, (int64_t[]){B, n, E}, 1.0f);
    in.pos = gc_input(in.store, "pos", 3, (int64_t[]){B, n, 3}, 1.0f);
    return in;
}

static ast_tensor *forward(const pf_instance *pi, ast_ctx *c, ast_tensor *x, ast_tensor *pos, ast_tensor *mask)
{
    ast_fwd_args a = {.mask = mask, .positions = pos, .layer = 0};
    return pi->desc->forward(pi->self, c, x, &a);
}

Test(example, parameters_are_named_like_a_torch_module)
{
    pf_instance plain = make(0), gated = make(1);
    const char *names[] = {"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias", "v_proj.weight",
                           "v_proj.bias", "o_proj.weight", "o_proj.bias", "distance_bias.weight"};
    cr_assert_eq(ast_params_count(plain.params), 9);
    for (int i = 0; i < 9; i++) {
        char full[96];
        snprintf(full, sizeof full, PREFIX ".%s", names[i]);
        cr_assert_str_eq(ast_params_at(plain.params, i)->name, full);
    }
    ast_tensor *w = ast_params_at(plain.params, 8);
    cr_assert(w->ndim == 2 && w->shape[0] == H && w->shape[1] == K);
    cr_assert_eq(ast_params_count(gated.params), 11);
    cr_assert_not_null(ast_params_find(gated.params, PREFIX ".gate_proj.weight"));
    cr_assert_eq(ast_params_find(gated.params, PREFIX ".gate_proj.bias")->shape[0], H);
    pf_destroy(&plain);
    pf_destroy(&gated);
}

static void check_against_reference(int gate, const float *mask_data)
{
    pf_instance pi = make(gate);
    inputs in = make_inputs(N);
    ast_tensor *mask = mask_data ? pf_const(2, (int64_t[]){B, N}, mask_data) : NULL;
    ast_ctx *c = ast_ctx_new(1);
    ast_tensor *y = forward(&pi, c, in.x, in.pos, mask);
    double want[B * N * E];
    ref_distbias(pi.params, PREFIX, (db_dims){B, N, E, H, K, 3.0, gate}, in.x->data, in.pos->data, mask_data, want);
    for (int i = 0; i < B * N * E; i++)
        /* float32 through projections, a softmax and o_proj: a few ulps of values of order 1 */
        cr_assert_float_eq(y->data[i], want[i], 2e-5 * (1.0 + fabs(want[i])), "gate %d mask %d: y[%d] %g vs %g", gate,
                           mask != NULL, i, y->data[i], want[i]);
    ast_ctx_free(c);
    pf_const_free(mask);
    ast_params_free(in.store);
    pf_destroy(&pi);
}

static const float padded[B * N] = {1, 1, 0, 1, 1, 1, 0, 1, 1, 0};

Test(example, forward_matches_an_independent_reference)
{
    for (int gate = 0; gate < 2; gate++) {
        check_against_reference(gate, NULL);
        check_against_reference(gate, padded);
    }
}

/* ---- gradients --------------------------------------------------------------- */

typedef struct gc_run {
    const pf_instance *pi;
    ast_tensor *mask;
} gc_run;

static ast_tensor *gc_forward_fn(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const gc_run *r = ud;
    return forward(r->pi, c, in[0], in[1], r->mask);
}

/* Central differences of step h in float32 against the tape, over x, the
 * positions and every parameter (the distance-bias weights included). */
static void gradcheck(int gate, const float *mask_data)
{
    pf_instance pi = make(gate);
    inputs in = make_inputs(N);
    gc_run r = {&pi, mask_data ? pf_const(2, (int64_t[]){B, N}, mask_data) : NULL};
    int np = ast_params_count(pi.params);
    ast_tensor *all[16] = {in.x, in.pos};
    for (int i = 0; i < np; i++) all[2 + i] = ast_params_at(pi.params, i);
    /* h = 3e-3 balances the O(h^2) truncation against float32 rounding of
     * a loss of order 10 (~1e-6 / h); the floor keeps gradients near 0
     * from turning that rounding into a large ratio. Measured 3.2e-3. */
    gc_result res = gc_check(gc_forward_fn, all, 2 + np, &r, 3e-3f, 1e-2);
    const char *name = res.worst_input == 0 ? "x" : res.worst_input == 1 ? "positions"
                                                  : all[res.worst_input]->name;
    cr_assert_lt(res.max_err, 2e-2, "gate %d mask %d: %s[%lld] analytic %g numeric %g", gate, mask_data != NULL,
                 name, (long long)res.worst_index, res.analytic, res.numeric);
    pf_const_free(r.mask);
    ast_params_free(in.store);
    pf_destroy(&pi);
}

Test(example, gradients_match_finite_differences)
{
    gradcheck(0, NULL);
    gradcheck(1, padded);
}

Test(example, distance_bias_weights_and_positions_get_gradients)
{
    /* The check above passes vacuously if a path is cut (0 vs 0), so the
     * distance path must carry a gradient at all. */
    pf_instance pi = make(0);
    inputs in = make_inputs(N);
    ast_ctx *c = ast_ctx_new(1);
    ast_backward(c, ast_sum(c, ast_mul(c, forward(&pi, c, in.x, in.pos, NULL), in.x)));
    ast_tensor *w = ast_params_find(pi.params, PREFIX ".distance_bias.weight");
    float wmax = 0, pmax = 0;
    for (int64_t i = 0; i < w->size; i++) wmax = fmaxf(wmax, fabsf(w->grad[i]));
    for (int64_t i = 0; i < in.pos->size; i++) pmax = fmaxf(pmax, fabsf(in.pos->grad[i]));
    cr_assert_gt(wmax, 1e-3f);
    cr_assert_gt(pmax, 1e-3f);
    ast_ctx_free(c);
    ast_params_free(in.store);
    pf_destroy(&pi);
}

/* ---- the mask ------------------------------------------------------------------ */

Test(example, padded_cells_do_not_change_valid_outputs)
{
    /* The 3 valid cells alone, then the same cells with 3 padded ones
     * interleaved (random tokens and positions): valid rows must agree. */
    enum { NV = 3, NP = 6 };
    const int slot[NV] = {0, 2, 5};
    const float mask_data[B * NP] = {1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1};
    pf_instance pi = make(1);
    inputs full = make_inputs(NP);
    ast_params *vs = ast_params_new(0);
    ast_tensor *x = gc_input(vs, "x", 3, (int64_t[]){B, NV, E}, 0.0f);
    ast_tensor *pos = gc_input(vs, "pos", 3, (int64_t[]){B, NV, 3}, 0.0f);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < NV; i++) {
            memcpy(x->data + (b * NV + i) * E, full.x->data + (b * NP + slot[i]) * E, E * sizeof(float));
            memcpy(pos->data + (b * NV + i) * 3, full.pos->data + (b * NP + slot[i]) * 3, 3 * sizeof(float));
        }
    ast_tensor *mask = pf_const(2, (int64_t[]){B, NP}, mask_data);
    ast_ctx *c = ast_ctx_new(1);
    ast_tensor *y_valid = forward(&pi, c, x, pos, NULL), *y_padded = forward(&pi, c, full.x, full.pos, mask);
    for (int b = 0; b < B; b++)
        for (int i = 0; i < NV; i++)
            for (int e = 0; e < E; e++) {
                float a = y_valid->data[(b * NV + i) * E + e], p = y_padded->data[(b * NP + slot[i]) * E + e];
                /* padded keys get exactly 0 probability; only BLAS summation
                 * order differs between the two lengths (measured 3e-8) */
                cr_assert_float_eq(a, p, 1e-6f, "set %d cell %d feature %d: %g alone, %g with padding", b, i, e, a, p);
            }
    ast_ctx_free(c);
    pf_const_free(mask);
    ast_params_free(vs);
    ast_params_free(full.store);
    pf_destroy(&pi);
}

/* ---- the statistic and the monitor ------------------------------------------- */

Test(example, publishes_the_attended_distance_per_head)
{
    /* With zero queries and bias weights every valid key gets the same
     * probability, so each head's statistic is the mean distance between
     * valid cells, averaged over the valid query cells. */
    pf_instance pi = make(0);
    const char *zeroed[] = {"q_proj.weight", "q_proj.bias", "distance_bias.weight"};
    for (int i = 0; i < 3; i++) {
        char full[64];
        snprintf(full, sizeof full, PREFIX ".%s", zeroed[i]);
        ast_tensor *t = ast_params_find(pi.params, full);
        memset(t->data, 0, (size_t)t->size * sizeof(float));
    }
    inputs in = make_inputs(N);
    ast_tensor *mask = pf_const(2, (int64_t[]){B, N}, padded);
    ast_ctx *c = ast_ctx_new(1);
    forward(&pi, c, in.x, in.pos, mask);
    double want = 0, queries = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < N; i++) {
            if (!padded[b * N + i]) continue;
            double sum = 0, keys = 0;
            for (int j = 0; j < N; j++)
                if (padded[b * N + j]) sum += ref_distance(in.pos->data, N, b, i, j), keys++;
            want += sum / keys;
            queries++;
        }
    want /= queries;
    cr_assert_eq(ast_ctx_n_stats(c), 1);
    const ast_stat *s = &ast_ctx_stats(c)[0];
    cr_assert_str_eq(s->name, "distbias.attended_distance");
    cr_assert_eq(s->n, H);
    for (int h = 0; h < H; h++)
        /* float32 sums of a few distances of order 1 */
        cr_assert_float_eq(s->values[h], want, 1e-5, "head %d: %g vs %g", h, s->values[h], want);
    ast_ctx_free(c);
    pf_const_free(mask);
    ast_params_free(in.store);
    pf_destroy(&pi);
}

Test(example, monitor_writes_the_mean_and_warns_once_on_collapse)
{
    const ast_plugin *p = load(AST_KIND_MONITOR);
    const ast_plugin_desc *d = ast_plugin_desc_of(p);
    ast_optval v[2];
    ast_error e = {""};
    const ast_optsrc opts[] = {{"every", "2", "m"}, {"collapse_below", "0.5", "m"}};
    cr_assert(ast_plugin_options(p, opts, 2, v, &e), "%s", e.msg);
    char err[256] = "";
    void *mon = d->create(&(ast_create_args){.host = ast_host_table(), .opts = v}, err, sizeof err);
    cr_assert_not_null(mon, "%s", err);

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ast_sink *sink = ast_sink_new(out, ast_metrics_write_monitor, "distbias");
    const float heads[2] = {0.25f, 1.75f};
    ast_stat stat = {"distbias.attended_distance", 1, 2, heads};
    for (int step = 1; step <= 4; step++) {
        ast_sink_set_step(sink, step, 0);
        d->observe(mon, &(ast_observation){AST_PHASE_TRAIN_STEP, step, 0, &stat, 1, sink});
    }
    fflush(out);
    /* every: 2 keeps steps 2 and 4; the mean of the heads is 1 */
    const char *line = "\"monitor\":\"distbias\",\"metric\":\"attended_distance\",\"layer\":1,\"value\":1}";
    const char *first = strstr(text, line);
    cr_assert(first && strstr(first + 1, line) && strstr(text, "\"step\":2") && strstr(text, "\"step\":4"), "%s", text);
    cr_assert_null(strstr(text, "\"step\":1"), "%s", text);
    cr_assert_eq(ast_sink_n_warnings(sink), 1, "head 0 is below collapse_below, warned once");
    ast_sink_free(sink);
    fclose(out);
    free(text);
    ast_plugin_destroy(d, mon);
}

/* ---- it trains ------------------------------------------------------------------- */

static const char *tiny_yaml =
    "training_mode: expr_to_pos\n"
    "data: {set_size: 16, preprocessing: {position_key: spatial, cell_type_key: null},\n"
    "       loading: {rotation: true, expression_dropout: 0.0}}\n"
    "diffusion: {diffusion_steps: 100}\n"
    "training: {learning_rate: 3e-3, batch_size: 4, epochs: 6, steps_per_epoch: 10, val_sets: 16,\n"
    "           val_t_points: 4, early_stopping: false, scheduler: {type: cosine, T_max: 6}}\n"
    "mlp_in_expression_setting: {mlp_in_expression_dims: 16, mlp_out_expression_dims: 16}\n"
    "mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 8, mlp_out_diffusion_time_dims: 8}\n"
    "PositionMLP_setting: {hidden_dims: 8}\n"
    "TransformerLayer_setting: {num_layers: 2, num_heads: 2, dim_ff_expression: 32, dim_ff_diffusion_time: 8,\n"
    "                           dropout: 0.0}\n"
    "mlp_out_expression_setting: {hidden_dims: 16}\n"
    "mlp_out_position_norm_setting: {hidden_dims: 8}\n"
    "attention: {name: distbias, num_kernels: 8, max_distance: 3.0}\n"
    "ffn: dense\n"
    /* the loss the drop below was measured with: in 60 steps the aligned loss falls ~1% */
    "loss: {position_loss: distance}\n";

static double max_abs(const ast_tensor *t)
{
    double m = 0;
    for (int64_t i = 0; i < t->size; i++) m = fmax(m, fabs(t->data[i]));
    return m;
}

Test(example, trains_on_the_bundled_data, .timeout = 120)
{
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string(tiny_yaml, "tiny.yaml", &e);
    cr_assert(cfg, "%s", e.msg);
    ast_data_opts o;
    ast_dataset d;
    ast_split sp[3];
    ast_model_config mc;
    ast_train_config tc;
    ast_data_opts_from_cfg(cfg, &o);
    cr_assert(ast_data_read(ALPHAST_SOURCE_DIR "/data/starmap3d/starmap3d.h5ad", &o, &d, &e) == 0, "%s", e.msg);
    cr_assert(ast_data_preprocess(&d, &o, &e) == 0, "%s", e.msg);
    cr_assert(ast_data_split(&d, 0.1, 0.1, sp, &e) == 0, "%s", e.msg);
    cr_assert(ast_cfg_model(cfg, d.n_genes, &mc, &e) == 0, "%s", e.msg);
    cr_assert(ast_train_config_from_cfg(cfg, &tc, &e) == 0, "%s", e.msg);
    tc.progress = 0;
    ast_model *m = ast_model_new(&mc, tc.seed, &e);
    cr_assert(m, "%s", e.msg);

    char run[] = "/tmp/alphast-example-run-XXXXXX", cmd[128];
    cr_assert_not_null(mkdtemp(run));
    ast_trainer *t = ast_trainer_new(m, &d, sp, &tc, run, NULL, &e);
    cr_assert(t, "%s", e.msg);
    double before = ast_trainer_val_loss(t);
    ast_train_result r;
    cr_assert(ast_trainer_run(t, &r, &e) == 0, "%s", e.msg);
    double after = ast_trainer_val_loss(t);
    /* The validation loss is deterministic (fixed sets and times). 60 steps
     * measured 1.71 -> 0.73; asking for a drop of a fifth leaves room for
     * other BLAS builds and seeds yet fails a model that does not learn. */
    cr_assert_lt(after, 0.8 * before, "validation loss %g -> %g", before, after);
    /* ... and the distance bias itself learnt: it starts at exactly 0. */
    for (int l = 0; l < 2; l++) {
        char name[96];
        snprintf(name, sizeof name, "transformer_layers.%d.attn_model.attention.distance_bias.weight", l);
        ast_tensor *w = ast_params_find(ast_model_params(m), name);
        cr_assert_not_null(w, "%s", name);
        cr_assert_gt(max_abs(w), 1e-4, "%s stayed at 0", name);
    }
    ast_trainer_free(t);
    ast_model_free(m);
    ast_split_free(sp);
    ast_dataset_free(&d);
    ast_cfg_free(cfg);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", run);
    cr_assert_eq(system(cmd), 0);
}

/* ---- it tests itself -------------------------------------------------------------- */

/* The example's own test (test_distbias.c: plain C and libalphast-plugintest)
 * through its Makefile's check target, against this build tree as an author
 * outside it would run it before installing: alphast-plugin-test-uninstalled.pc
 * from PKG_CONFIG_PATH, the library from LD_LIBRARY_PATH. */
Test(example, tests_itself_with_libalphast_plugintest, .timeout = 120)
{
    char out[] = "/tmp/alphast-example-check-XXXXXX", cmd[8192], log[16384];
    cr_assert_not_null(mkdtemp(out));
    const char *ld = getenv("LD_LIBRARY_PATH");
    snprintf(cmd, sizeof cmd,
             "MAKEFLAGS= MFLAGS= MAKELEVEL= PKG_CONFIG_PATH='%s' LD_LIBRARY_PATH='%s/.libs%s%s' "
             "make -s --no-print-directory -C '%s/examples/attn_distbias' O='%s' CC='%s' PKG_CONFIG='%s' "
             "CFLAGS='-O2 -Werror %s' check 2>&1",
             build_dir(), build_dir(), ld && *ld ? ":" : "", ld ? ld : "", ALPHAST_SOURCE_DIR, out, AST_TEST_CC,
             AST_TEST_PKG_CONFIG, AST_TEST_SANITIZER_FLAGS);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "%s", cmd);
    size_t got = fread(log, 1, sizeof log - 1, p);
    log[got] = '\0';
    int status = pclose(p);
    char rm[256];
    snprintf(rm, sizeof rm, "rm -rf '%s'", out);
    cr_assert_eq(system(rm), 0);
    cr_assert_eq(status, 0, "make check of the example failed:\n%s", log);
    /* It ran the checks, not just built: both configurations' gradients. */
    const char *grad = "gradients of ";
    const char *first = strstr(log, grad);
    cr_assert(first && strstr(first + 1, grad) && strstr(log, "test_distbias: all passed"), "%s", log);
    cr_assert_null(strstr(log, "FAIL"), "%s", log);
}

/* ---- the guide ------------------------------------------------------------------ */


/* The text of the line before `at`, into line. */
static void previous_line(const char *text, const char *at, char *line, size_t n)
{
    const char *end = at > text ? at - 1 : at, *start = end;
    while (start > text && start[-1] != '\n') start--;
    snprintf(line, n, "%.*s", (int)(end - start), start);
}

/* A ```c block must be marked "<!-- snippet: FILE -->" naming a compiled
 * file (the example, this test or plugin.h) that holds it verbatim. */
static void check_c_block(const char *guide, const char *fence, const char *body, size_t len)
{
    char marker[512], path[600];
    previous_line(guide, fence, marker, sizeof marker);
    char file[400] = "";
    cr_assert_eq(sscanf(marker, "<!-- snippet: %399s -->", file), 1, "C block without a snippet marker: %.60s",
                 body);
    cr_assert(!strncmp(file, "examples/", 9) || !strcmp(file, "tests/test_example_plugin.c") ||
                  !strcmp(file, "include/alphast/plugin.h"),
              "snippet source %s is not compiled by this test", file);
    snprintf(path, sizeof path, "%s/%s", ALPHAST_SOURCE_DIR, file);
    char *src = test_slurp(path), *code = strndup(body, len);
    cr_assert_not_null(strstr(src, code), "this snippet is no longer in %s:\n%s", file, code);
    free(code);
    free(src);
}

Test(guide, every_c_snippet_is_compiled_code)
{
    char *guide = test_slurp(ALPHAST_SOURCE_DIR "/docs/plugin-guide.md");
    int c_blocks = 0;
    for (const char *fence = strstr(guide, "```"); fence;) {
        const char *lang = fence + 3, *body = strchr(lang, '\n');
        cr_assert_not_null(body);
        body++;
        const char *close = strstr(body, "```");
        cr_assert_not_null(close, "unclosed code block at %.40s", fence);
        size_t lang_len = (size_t)(body - 1 - lang);
        int known = 0;
        for (const char *const *l = (const char *const[]){"c", "sh", "yaml", "text", "json", NULL}; *l; l++)
            known |= strlen(*l) == lang_len && !strncmp(*l, lang, lang_len);
        cr_assert(known, "code block of unknown language '%.*s'", (int)lang_len, lang);
        if (lang_len == 1) {
            check_c_block(guide, fence, body, (size_t)(close - body));
            c_blocks++;
        }
        fence = strstr(close + 3, "```");
    }
    cr_assert_geq(c_blocks, 15, "the guide shows the ABI, a forward, a fused op, options, monitors and tests");
    free(guide);
}
