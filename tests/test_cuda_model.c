/* The model on the CUDA backend against the CPU backend: training steps
 * (forward, diffusion loss, backward, clipping, AdamW) of the four ablation
 * configs from the same seed and batch, two CUDA runs bit for bit, the
 * gated attention plugin's CUDA kernel against its CPU kernel (the
 * descriptor's kernels table) at N = 7 ... 1000 with padding and dropout,
 * and the MoE FFN's forward and backward. Skipped, saying why, without
 * CUDA in the build or without a GPU (cf_gpu). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn_gated_kernel.h"
#include "cuda_fixture.h"
#include "engine/graph.h"
#include "model/loss.h"
#include "model_fixture.h"
#include "plugin/loader.h"
#include "train/optim.h"

enum { B = 2, N = 37, G = 24, PAD = 5, STEPS = 4 };
#define SEED 11
#define LR 1e-3f

static const ast_adamw_config adamw_cfg = {
    .lr = LR, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 1e-5f, .amsgrad = 1};

static const char *const configs[] = {"baseline", "gated", "moe", "gated_moe"};

/* The ablation configs (docs/model.md §10.1) at a small size: BASE_CONFIG
 * with G genes and the plugins of each. */
static void ablation_config(ast_model_config *cfg, int which, const char *device)
{
    ast_model_config_base(cfg, G);
    if (which == 1 || which == 3) mf_gated(cfg, "headwise");
    if (which >= 2) mf_moe(cfg, "4", "2", "split");
    cfg->device = device;
}

/* One batch, host memory: noised inputs, clean targets, a padded set. */
typedef struct batch {
    float z_expr[B * N * G], z_pos[B * N * 3], t[B], expr[B * N * G], pos[B * N * 3], mask[B * N];
} batch;

static void batch_init(batch *b)
{
    cf_normal(1, b->z_expr, B * N * G, 1.0f);
    cf_normal(2, b->z_pos, B * N * 3, 1.0f);
    cf_normal(3, b->expr, B * N * G, 1.0f);
    cf_normal(4, b->pos, B * N * 3, 10.0f);
    b->t[0] = 0.125f, b->t[1] = 0.75f;
    for (int i = 0; i < B * N; i++) b->mask[i] = i / N == B - 1 && i % N >= N - PAD ? 0.0f : 1.0f;
}

/* Scales each noised expression value by 1 + jitter g, g ~ N(0, 1): a
 * stand-in, on the CPU, for another backend's rounding. */
static void batch_jitter(batch *b, float jitter)
{
    static float g[B * N * G];
    cf_normal(5, g, B * N * G, jitter);
    for (int i = 0; i < B * N * G; i++) b->z_expr[i] *= 1.0f + g[i];
}

/* What a run leaves: each step's loss, the first step's gradients and the
 * parameters after the last step, flattened in registration order. */
typedef struct run {
    float loss[STEPS];
    float *grad0, *params0, *params;
    int64_t n;
} run;

static float *read_params(ast_ctx *c, ast_params *p, int grads)
{
    float *all = ast_xmalloc((size_t)ast_params_numel(p) * sizeof *all);
    int64_t at = 0;
    for (int i = 0; i < ast_params_count(p); i++) {
        ast_tensor *t = ast_params_at(p, i);
        float *v = grads ? cf_read_grad(c, t) : cf_read(c, t);
        memcpy(all + at, v, (size_t)t->size * sizeof *v);
        free(v);
        at += t->size;
    }
    return all;
}

static void train_step(ast_model *m, ast_ctx *c, ast_adamw *opt, const batch *b, ast_structure structure, run *r,
                       int step)
{
    ast_params *p = ast_model_params(m);
    ast_params_zero_grad(p);
    ast_ctx_reset(c);
    ast_ctx_set_training(c, 1);
    ast_tensor *x = ast_tensor_from(c, 3, (int64_t[]){B, N, G}, b->z_expr);
    ast_tensor *pos = ast_tensor_from(c, 3, (int64_t[]){B, N, 3}, b->z_pos);
    ast_tensor *t = ast_tensor_from(c, 2, (int64_t[]){B, 1}, b->t);
    ast_tensor *mask = ast_tensor_from(c, 2, (int64_t[]){B, N}, b->mask);
    ast_model_out out = ast_model_forward(m, c, x, t, pos, mask, NULL, NULL);
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    lc.structure = structure;
    ast_loss_parts lp = ast_diffusion_loss(c, &lc, &out, ast_tensor_from(c, 3, (int64_t[]){B, N, G}, b->expr),
                                           ast_tensor_from(c, 3, (int64_t[]){B, N, 3}, b->pos), mask);
    ast_backward(c, lp.total);
    ast_tensor_read(c, lp.total, 0, 1, &r->loss[step]);
    if (step == 0) r->grad0 = read_params(c, p, 1);
    ast_clip_grad_norm(p, 1.0);
    ast_adamw_step(opt, LR);
}

/* STEPS steps of config `which` on backend b, with the loss's structure
 * terms and the inputs jittered (batch_jitter). */
static run train(int which, const ast_backend *b, ast_structure structure, float jitter)
{
    ast_model_config cfg;
    ablation_config(&cfg, which, b->name);
    ast_model *m = mf_model(&cfg, SEED);
    ast_params *p = ast_model_params(m);
    if (ast_params_backend(p) != b) ast_params_to_backend(p, b); /* where the model does not move them itself */
    ast_ctx *c = ast_ctx_new_on(b, SEED);
    ast_adamw *opt = ast_adamw_new(p, &adamw_cfg);
    batch *data = ast_xmalloc(sizeof *data);
    batch_init(data);
    batch_jitter(data, jitter);
    run r = {.n = ast_params_numel(p), .params0 = read_params(c, p, 0)};
    for (int s = 0; s < STEPS; s++) train_step(m, c, opt, data, structure, &r, s);
    r.params = read_params(c, p, 0);
    free(data);
    ast_adamw_free(opt);
    ast_ctx_free(c);
    ast_model_free(m);
    return r;
}

static void run_free(run *r) { free(r->grad0), free(r->params0), free(r->params); }

/* sqrt(sum (a - b)^2 / sum b^2) over n; 0 when both are all zero. */
static double norm_err(const float *a, const float *b, int64_t n)
{
    double num = 0.0, den = 0.0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0.0);
}

/* Tolerances against the CPU (float32 rounding of other summation orders,
 * cf_sum_tol's ~1e-6 per op, through a 2-layer network's ~50 ops forward
 * and backward, softmax and normalisations included):
 * - the loss of the first step: 1e-4 relative;
 * - the first step's gradient of each parameter, normwise: 1e-3 (a
 *   gradient sums over the batch's 74 cells and the chain of layers);
 * - later losses: 1e-3. AdamW moves an element by ~lr whatever its
 *   gradient's size, so an element whose gradient is within rounding of 0
 *   may move the other way on the GPU (2 lr per step);
 * - the parameters' change over the STEPS steps, normwise: 2e-2, for the
 *   same reason (such elements are rare: ~1e-5 of them, sqrt(4 x 1e-5)
 *   of the change each). */
#define LOSS0_TOL 1e-4
#define GRAD_TOL 1e-3
#define LOSS_TOL 1e-3
#define UPDATE_TOL 2e-2

/* The first step on CUDA against the CPU: its loss and each parameter's
 * gradient. Returns the worst gradient's error. */
static double compare_first_step(const char *name, const run *gpu, const run *cpu, const ast_model_config *cfg)
{
    double e0 = fabs((double)gpu->loss[0] - cpu->loss[0]) / fabs((double)cpu->loss[0]);
    cr_assert(e0 <= LOSS0_TOL, "%s: first loss %.9g on CUDA, %.9g on the CPU (%.3g)", name, gpu->loss[0],
              cpu->loss[0], e0);
    /* gradients per parameter: names from a CPU model of the same config */
    ast_model *m = mf_model(cfg, SEED);
    ast_params *p = ast_model_params(m);
    double worst = 0.0;
    int64_t at = 0;
    for (int i = 0; i < ast_params_count(p); i++) {
        ast_tensor *t = ast_params_at(p, i);
        double e = norm_err(gpu->grad0 + at, cpu->grad0 + at, t->size);
        cr_assert(e <= GRAD_TOL, "%s: gradient of %s off by %.3g normwise", name, t->name, e);
        worst = fmax(worst, e);
        at += t->size;
    }
    ast_model_free(m);
    return worst;
}

/* The parameters' change over the STEPS steps of run a against run b's,
 * normwise. */
static double update_err(const run *a, const run *b)
{
    float *da = ast_xmalloc((size_t)a->n * sizeof *da), *db = ast_xmalloc((size_t)b->n * sizeof *db);
    for (int64_t i = 0; i < b->n; i++) da[i] = a->params[i] - a->params0[i], db[i] = b->params[i] - b->params0[i];
    double e = norm_err(da, db, b->n);
    free(da), free(db);
    return e;
}

static void compare_runs(const char *name, const run *gpu, const run *cpu, const ast_model_config *cfg)
{
    double worst = compare_first_step(name, gpu, cpu, cfg);
    for (int s = 1; s < STEPS; s++) {
        double e = fabs((double)gpu->loss[s] - cpu->loss[s]) / fabs((double)cpu->loss[s]);
        cr_assert(e <= LOSS_TOL, "%s: loss of step %d %.9g on CUDA, %.9g on the CPU (%.3g)", name, s, gpu->loss[s],
                  cpu->loss[s], e);
    }
    double eu = update_err(gpu, cpu);
    cr_assert(eu <= UPDATE_TOL, "%s: parameter change over %d steps off by %.3g normwise", name, STEPS, eu);
    cr_log_info("%s: CUDA vs CPU: worst gradient %.2g, update %.2g (relative)", name, worst, eu);
}

/* Training is compared without the structure losses: those make the
 * STEPS steps' update chaotic (update_is_well_conditioned). Their host
 * round trip (the prediction read from the device, the gradient uploaded)
 * is compared at the first step, where it is not: on the CPU, a 1e-6
 * jitter of the inputs moves the first step's worst gradient by 2.7e-4
 * normwise (gated_moe; 1.4e-4 baseline), inside GRAD_TOL. */
static void check_config(int which)
{
    const ast_backend *gpu = cf_gpu(), *cpu_b = ast_backend_cpu();
    const char *name = configs[which];
    ast_model_config cfg;
    ablation_config(&cfg, which, "cpu");
    run cpu = train(which, cpu_b, AST_STRUCTURE_NONE, 0.0f), a = train(which, gpu, AST_STRUCTURE_NONE, 0.0f),
        b = train(which, gpu, AST_STRUCTURE_NONE, 0.0f);
    cr_assert_eq(a.n, cpu.n);
    compare_runs(name, &a, &cpu, &cfg);
    cr_assert_arr_eq(a.loss, b.loss, sizeof a.loss, "%s: two CUDA runs, different losses", name);
    cr_assert_arr_eq(a.params, b.params, (size_t)a.n * sizeof(float), "%s: two CUDA runs, different parameters", name);
    run cpu_s = train(which, cpu_b, AST_STRUCTURE_BOTH, 0.0f), gpu_s = train(which, gpu, AST_STRUCTURE_BOTH, 0.0f);
    double worst = compare_first_step(name, &gpu_s, &cpu_s, &cfg);
    cr_log_info("%s with the structure losses: first step, worst gradient %.2g (relative)", name, worst);
    run_free(&cpu), run_free(&a), run_free(&b), run_free(&cpu_s), run_free(&gpu_s);
}

Test(cuda_model, baseline_trains_as_on_the_cpu) { check_config(0); }
Test(cuda_model, gated_trains_as_on_the_cpu) { check_config(1); }
Test(cuda_model, moe_trains_as_on_the_cpu) { check_config(2); }
Test(cuda_model, gated_moe_trains_as_on_the_cpu) { check_config(3); }

/* On the CPU alone, GPU or not: the update compared above is a stable
 * function of the inputs, so UPDATE_TOL can tell a wrong backward from
 * rounding. A relative jitter of 1e-6 (another backend's rounding is of
 * that order: cf_sum_tol) moves the update by 7e-5 (baseline) to 5.6e-4
 * (moe) normwise; a tenth of UPDATE_TOL leaves 3.5x margin. With
 * loss.structure: both on, the same jitter moves it by 0.022 (baseline),
 * 0.013 (gated), 0.094 (moe) and 0.36 (gated_moe), as far as CUDA's
 * rounding moved it on an H200 (moe 0.069, gated_moe 0.127): that is why
 * the training comparison leaves those losses out. */
Test(cuda_model, update_is_well_conditioned)
{
    for (int which = 0; which < 4; which++) {
        run a = train(which, ast_backend_cpu(), AST_STRUCTURE_NONE, 0.0f);
        run b = train(which, ast_backend_cpu(), AST_STRUCTURE_NONE, 1e-6f);
        double e = update_err(&b, &a);
        cr_assert(e <= UPDATE_TOL / 10, "%s: a 1e-6 jitter of the inputs moves the update by %.3g normwise",
                  configs[which], e);
        cr_log_info("%s: a 1e-6 jitter moves the update by %.2g", configs[which], e);
        run_free(&a), run_free(&b);
    }
}

/* ---- the step as a CUDA graph (engine/graph.h) ---------------------------- */

enum { GRAPH_STEPS = 5 };

/* A run of GRAPH_STEPS steps as the trainer's graph path takes them: a new
 * batch each step in pinned memory, AdamW's constants staged, the step
 * queued (eager before capture_at, captured at it, replayed after) and its
 * loss read at the end. capture_at < 0: eager throughout. NULL, with why,
 * when the step could not be captured. */
static float *graph_run(int which, int capture_at, float loss[GRAPH_STEPS], int64_t *n_params, char *why, size_t why_n)
{
    const ast_backend *gpu = cf_gpu();
    ast_model_config cfg;
    ablation_config(&cfg, which, gpu->name);
    cfg.dropout = 0.2f; /* the replay must draw new masks, as eager steps do */
    ast_model *m = mf_model(&cfg, SEED);
    ast_params *p = ast_model_params(m);
    if (ast_params_backend(p) != gpu) ast_params_to_backend(p, gpu); /* where the model does not move them itself */
    ast_ctx *c = ast_ctx_new_on(gpu, SEED);
    ast_ctx_set_stats(c, 0); /* as a run without monitors: no statistics are reduced */
    ast_adamw *opt = ast_adamw_new(p, &adamw_cfg);
    batch *data = gpu->host_alloc(gpu, sizeof *data), *clean = ast_xmalloc(sizeof *clean);
    batch_init(clean);
    ast_graph *g = NULL;
    const float *loss_at = NULL;
    float *params = NULL;
    for (int s = 0; s < GRAPH_STEPS; s++) {
        *data = *clean;
        for (int i = 0; i < B * N * G; i++) data->z_expr[i] += 0.1f * (float)s; /* each step's own inputs */
        ast_adamw_stage(opt, LR);
        if (g) ast_graph_replay(g);
        else {
            int capturing = s == capture_at && ast_graph_begin(c, why, why_n) == 0;
            ast_params_zero_grad(p);
            ast_ctx_reset(c);
            ast_ctx_set_training(c, 1);
            ast_tensor *mask = ast_tensor_from(c, 2, (int64_t[]){B, N}, data->mask);
            ast_model_out out = ast_model_forward(m, c, ast_tensor_from(c, 3, (int64_t[]){B, N, G}, data->z_expr),
                                                  ast_tensor_from(c, 2, (int64_t[]){B, 1}, data->t),
                                                  ast_tensor_from(c, 3, (int64_t[]){B, N, 3}, data->z_pos), mask, NULL, NULL);
            ast_loss_config lc;
            ast_loss_config_default(&lc); /* the aligned position loss: all on the device (ops.def aligned_mse) */
            ast_loss_parts lp = ast_diffusion_loss(c, &lc, &out, ast_tensor_from(c, 3, (int64_t[]){B, N, G}, data->expr),
                                                   ast_tensor_from(c, 3, (int64_t[]){B, N, 3}, data->pos), mask);
            ast_backward(c, lp.total);
            ast_adamw_queue(opt, 1.0, lp.total->data);
            loss_at = lp.total->data;
            if (capturing) {
                if (!(g = ast_graph_end(c, why, why_n))) goto out;
                ast_graph_replay(g);
            }
        }
        gpu->to_host(gpu, &loss[s], loss_at, sizeof loss[s]);
    }
    params = read_params(c, p, 0);
    *n_params = ast_params_numel(p);
out:
    ast_graph_free(g);
    gpu->host_free(gpu, data);
    free(clean);
    ast_adamw_free(opt);
    ast_ctx_free(c);
    ast_model_free(m);
    return params;
}

/* Replays give the eager steps' losses and weights bit for bit: the same
 * kernels on the same data, new inputs read from pinned memory, new
 * dropout keys (engine and attention plugin) drawn in the same order. */
static void check_graph(int which)
{
    float eager[GRAPH_STEPS], replayed[GRAPH_STEPS];
    char why[320] = "";
    int64_t n = 0;
    float *a = graph_run(which, -1, eager, &n, why, sizeof why), *b = graph_run(which, 1, replayed, &n, why, sizeof why);
    cr_assert(b, "%s: not captured: %s", configs[which], why);
    cr_assert_arr_eq(eager, replayed, sizeof eager, "%s: the replayed steps' losses differ", configs[which]);
    for (int s = 1; s < GRAPH_STEPS; s++) cr_assert_neq(eager[s], eager[s - 1], "the inputs change step to step");
    cr_assert_arr_eq(a, b, (size_t)n * sizeof(float), "%s: the weights differ after %d steps", configs[which], GRAPH_STEPS);
    cr_log_info("%s: %d steps, eager and replayed: losses and weights bit for bit", configs[which], GRAPH_STEPS);
    free(a), free(b);
}

Test(cuda_model, baseline_step_replays_as_a_graph) { check_graph(0); }
Test(cuda_model, gated_step_replays_as_a_graph) { check_graph(1); }

/* MoE routes in device memory (the plan ops, ABI 2.6): nothing waits for
 * the host, and the replay draws the router noise's and dropout's keys as
 * the eager steps do. */
Test(cuda_model, moe_step_replays_as_a_graph) { check_graph(2); }
Test(cuda_model, gated_moe_step_replays_as_a_graph) { check_graph(3); }

/* ---- plugins: instances on a backend ------------------------------------ */

static const ast_plugin *load(ast_plugin_kind kind, const char *name)
{
    ast_error e = {""};
    cr_assert(ast_plugins_init(&e), "%s", e.msg);
    const ast_plugin *p = ast_plugin_load(kind, name, &e);
    cr_assert_not_null(p, "%s", e.msg);
    return p;
}

/* The gated attention's fused core for the context's backend, from the
 * plugin's kernels table as its create() finds it. */
typedef struct core_arg {
    attn_core_cfg cfg;
    int masked;
} core_arg;

static ast_tensor *run_core(ast_ctx *c, ast_tensor *const *in, const void *arg)
{
    const core_arg *a = arg;
    const ast_plugin_desc *d = ast_plugin_desc_of(load(AST_KIND_ATTENTION, "gated"));
    const char *backend = ast_ctx_backend(c)->name;
    attn_core_fn fn = (attn_core_fn)ast_kernel_find(d->kernels, d->n_kernels, "gated_attention", backend);
    cr_assert_not_null(fn, "attn_gated has no %s kernel of gated_attention", backend);
    return fn(c, in[0], in[1], in[2], a->masked ? in[3] : NULL, &a->cfg);
}

#define QKV(n, dh) CF_IN(1, FILL_NORMAL, 2, 3, n, dh)
#define KEYS(n) CF_IN(0, FILL_MASK, 2, n)

/* Tiled online softmax on both, in other tile orders and rescalings: a
 * row sums its N keys (cf_sum_tol(N)), in the forward and in the backward's
 * dV = P^T dO and dK = dS^T Q. Dropout: the same hash of (seed, b, h, i,
 * j) drops the same cells on both. */
Test(cuda_model, gated_attention_kernel_is_the_cpus)
{
    const ast_backend *gpu = cf_gpu();
    const core_arg plain = {{ATTN_KERNEL_TILED, 64, 0.0f}, 0}, padded = {{ATTN_KERNEL_TILED, 64, 0.0f}, 1};
    const core_arg dropped = {{ATTN_KERNEL_TILED, 64, 0.2f}, 1};
    const cf_case cases[] = {
        {"attention N=7", run_core, &plain, 3, {QKV(7, 16), QKV(7, 16), QKV(7, 16)}, cf_sum_tol(7)},
        {"attention N=64 padded", run_core, &padded, 4, {QKV(64, 32), QKV(64, 32), QKV(64, 32), KEYS(64)},
         cf_sum_tol(64)},
        {"attention N=300 padded, dropout", run_core, &dropped, 4, {QKV(300, 32), QKV(300, 32), QKV(300, 32), KEYS(300)},
         cf_sum_tol(300)},
        {"attention N=1000 padded, dropout", run_core, &dropped, 4,
         {QKV(1000, 32), QKV(1000, 32), QKV(1000, 32), KEYS(1000)}, cf_sum_tol(1000)},
        {"attention N=1000", run_core, &plain, 3, {QKV(1000, 16), QKV(1000, 16), QKV(1000, 16)}, cf_sum_tol(1000)},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) cf_check_case(gpu, &cases[i]);
}

/* ---- the MoE FFN on each backend ----------------------------------------- */

static const ast_layer_dims moe_dims = {.d_model = 32, .heads = 4, .d_ff = 64, .d_time = 8, .num_layers = 1,
                                        .dropout = 0.1f, .ln_eps = 1e-6f};

/* The statistics the MoE FFN publishes, in its order (ffn_moe.c, moe_device.c). */
enum { MOE_STATS = 5 };
static const char *const moe_stat_names[MOE_STATS] = {"moe.tokens_per_expert", "moe.router_prob_mean",
                                                      "moe.dropped_tokens", "moe.aux_loss", "moe.set_tokens_per_expert"};

typedef struct moe_out {
    float *y, *gx, *gparams, *stat[MOE_STATS];
    int64_t ny, nx, np;
    int n_stat[MOE_STATS];
} moe_out;

typedef struct moe_setup {
    const ast_optsrc *opts;
    int n_opts;
    const float *x, *time, *mask, *dy; /* mask NULL: no padding */
} moe_setup;

/* Host copies of the published statistics (a device's tensors are copied here, after the step). */
static void read_moe_stats(ast_ctx *c, moe_out *o)
{
    const ast_stat *st = ast_ctx_stats(c);
    for (int i = 0; i < ast_ctx_n_stats(c); i++)
        for (int k = 0; k < MOE_STATS; k++) {
            if (strcmp(st[i].name, moe_stat_names[k])) continue;
            o->stat[k] = ast_xmalloc((size_t)st[i].n * sizeof(float));
            memcpy(o->stat[k], st[i].values, (size_t)st[i].n * sizeof(float));
            o->n_stat[k] = st[i].n;
        }
}

/* One forward (training: router noise and dropout) and backward of the
 * MoE FFN, created for backend b with its parameters moved there. */
static moe_out moe_on(const ast_backend *b, const moe_setup *su)
{
    const ast_plugin *pl = load(AST_KIND_FFN, "moe");
    ast_error e = {""};
    cr_assert_eq(ast_plugin_check_backend(pl, b->name, &e), 0, "%s", e.msg);
    ast_optval vals[AST_MAX_PLUGIN_OPTS];
    cr_assert(ast_plugin_options(pl, su->opts, su->n_opts, vals, &e), "%s", e.msg);
    const ast_plugin_desc *d = ast_plugin_desc_of(pl);
    ast_params *p = ast_params_new(SEED);
    char err[256] = "";
    void *self = d->create(&(ast_create_args){ast_host_table(), ast_scope_new(p, "ffn"), &moe_dims, vals, b->name},
                           err, sizeof err);
    cr_assert_not_null(self, "moe on %s: %s", b->name, err);
    ast_params_to_backend(p, b);
    ast_ctx *c = ast_ctx_new_on(b, SEED);
    ast_ctx_set_training(c, 1);
    ast_tensor *xt = ast_tensor_from(c, 3, (int64_t[]){B, N, moe_dims.d_model}, su->x);
    xt->flags |= AST_REQUIRES_GRAD;
    ast_tensor *tt = ast_tensor_from(c, 2, (int64_t[]){B, moe_dims.d_time}, su->time);
    ast_tensor *mask = su->mask ? ast_tensor_from(c, 2, (int64_t[]){B, N}, su->mask) : NULL;
    ast_tensor *y = d->forward(self, c, xt, &(ast_fwd_args){.time = tt, .mask = mask});
    ast_backward_seed(c, y, su->dy);
    moe_out o = {.y = cf_read(c, y), .gx = cf_read_grad(c, xt), .ny = y->size, .nx = xt->size};
    o.gparams = read_params(c, p, 1);
    o.np = ast_params_numel(p);
    read_moe_stats(c, &o);
    ast_ctx_free(c);
    ast_plugin_destroy(d, self);
    ast_params_free(p);
    return o;
}

static void free_moe_out(moe_out *o)
{
    free(o->y), free(o->gx), free(o->gparams);
    for (int k = 0; k < MOE_STATS; k++) free(o->stat[k]);
}

/* The statistics: counts (decisions) the same, the probabilities' mean and
 * the balance loss (sums of up to 74 terms) within tol. */
static void check_moe_stats(const moe_out *cuda, const moe_out *cpu, double tol)
{
    for (int k = 0; k < MOE_STATS; k++) {
        cr_assert(cpu->stat[k] && cuda->stat[k], "%s: published on the CPU %d, on CUDA %d", moe_stat_names[k],
                  cpu->stat[k] != NULL, cuda->stat[k] != NULL);
        cr_assert_eq(cuda->n_stat[k], cpu->n_stat[k], "%s: %d values on CUDA, %d on the CPU", moe_stat_names[k],
                     cuda->n_stat[k], cpu->n_stat[k]);
        cf_assert_close(moe_stat_names[k], cuda->stat[k], cpu->stat[k], cpu->n_stat[k], k == 1 || k == 3 ? tol : 0.0);
    }
}

/* The CPU (host routing) against CUDA (the plan ops), and CUDA twice. */
static void check_moe(const moe_setup *su, double tol)
{
    moe_out cpu = moe_on(ast_backend_cpu(), su), cuda = moe_on(cf_gpu(), su), again = moe_on(cf_gpu(), su);
    cf_assert_close("moe output", cuda.y, cpu.y, cpu.ny, tol);
    cf_assert_close("moe input gradient", cuda.gx, cpu.gx, cpu.nx, tol);
    cf_assert_close("moe parameter gradients", cuda.gparams, cpu.gparams, cpu.np, tol);
    cf_assert_close("moe, second CUDA run", again.gparams, cuda.gparams, cpu.np, 0.0);
    check_moe_stats(&cuda, &cpu, tol);
    free_moe_out(&cpu), free_moe_out(&cuda), free_moe_out(&again);
}

/* Router logits sum E = 32 products; each expert's GEMMs 32 or 16 (split
 * width); the weight gradients sum the expert's tokens (at most 74): the
 * tolerance counts 74. Routing decisions are the same unless two logits
 * tie within rounding (~1e-6), which random data does not give. */
Test(cuda_model, moe_ffn_forward_backward_is_the_cpus)
{
    cf_gpu();
    int64_t nx = (int64_t)B * N * moe_dims.d_model;
    float *x = ast_xmalloc((size_t)nx * sizeof *x), *dy = ast_xmalloc((size_t)nx * sizeof *dy), time[B * 8];
    cf_normal(21, x, nx, 1.0f);
    cf_normal(22, dy, nx, 1.0f);
    cf_normal(23, time, B * moe_dims.d_time, 1.0f);
    const ast_optsrc opts[] = {{"num_experts", "4", "test"}, {"top_k", "2", "test"}, {"expert_hidden", "split", "test"}};
    check_moe(&(moe_setup){opts, 3, x, time, NULL, dy}, cf_sum_tol(74));
    free(x), free(dy);
}

/* Padded cells (not routed on the CPU; routed to nothing on the device),
 * a capacity that drops pairs, a shared expert and the time projection:
 * the same decisions (the counts) and values within the same bound. */
Test(cuda_model, moe_ffn_with_padding_capacity_shared_and_time_is_the_cpus)
{
    cf_gpu();
    int64_t nx = (int64_t)B * N * moe_dims.d_model;
    float *x = ast_xmalloc((size_t)nx * sizeof *x), *dy = ast_xmalloc((size_t)nx * sizeof *dy), time[B * 8];
    float mask[B * N];
    cf_normal(31, x, nx, 1.0f);
    cf_normal(32, dy, nx, 1.0f);
    cf_normal(33, time, B * moe_dims.d_time, 1.0f);
    for (int i = 0; i < B * N; i++) mask[i] = i / N == B - 1 && i % N >= N - PAD ? 0.0f : 1.0f;
    const ast_optsrc opts[] = {{"num_experts", "4", "test"},        {"top_k", "2", "test"},
                               {"expert_hidden", "split", "test"},   {"capacity_factor", "0.8", "test"},
                               {"num_shared_experts", "1", "test"}, {"time_conditioned", "true", "test"}};
    check_moe(&(moe_setup){opts, 6, x, time, mask, dy}, cf_sum_tol(74));
    free(x), free(dy);
}
