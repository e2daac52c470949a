/* The timed work, run inside a child (bench_in_child): training steps as
 * the trainer takes them (forward, diffusion loss, backward, gradient
 * clipping, AdamW with AMSGrad) and eval-mode forwards, of the whole model
 * or of one plugin alone. Inputs are random from a fixed seed. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/graph.h"
#include "eval/sample.h"
#include "model/diffusion.h"
#include "model/loss.h"
#include "plugin/loader.h"
#include "train/optim.h"
#include "bench.h"

#define BENCH_LR 1e-4f
#define BENCH_CLIP 1.0

static const ast_adamw_config adamw_cfg = {
    .lr = BENCH_LR, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 1e-5f, .amsgrad = 1};

static float *random_buf(ast_rng *r, int64_t n, float scale, int log_expression)
{
    float *v = ast_xmalloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = log_expression ? log1pf(10.0f * ast_rng_uniform01(r)) : scale * ast_rng_gauss(r);
    return v;
}

/* Noised inputs and clean targets, as compare_configs.py's DemoDataset draws
 * them: host arrays, and the same as tensors on the backend the steps run
 * on, made once in a context of their own that is never reset. The timed
 * steps read those, as the PyTorch twin's read tensors it moved to the
 * device before timing: both leave the batch's upload out. */
typedef struct model_inputs {
    int64_t sx[3], sp[3], st[2];
    float *z_expr, *z_pos, *t, *expr, *pos;
    ast_ctx *kept;
    ast_tensor *x_dev, *p_dev, *t_dev, *expr_dev, *pos_dev;
} model_inputs;

static void inputs_place(model_inputs *in, const ast_backend *b)
{
    in->kept = ast_ctx_new_on(b, 0);
    in->x_dev = ast_tensor_from(in->kept, 3, in->sx, in->z_expr);
    in->p_dev = ast_tensor_from(in->kept, 3, in->sp, in->z_pos);
    in->t_dev = ast_tensor_from(in->kept, 2, in->st, in->t);
    in->expr_dev = ast_tensor_from(in->kept, 3, in->sx, in->expr);
    in->pos_dev = ast_tensor_from(in->kept, 3, in->sp, in->pos);
}

static void inputs_init(model_inputs *in, const bench_model_case *mc, uint64_t seed)
{
    ast_rng r;
    ast_rng_seed(&r, seed);
    int64_t B = mc->sets, N = mc->cells, G = mc->cfg.num_genes;
    *in = (model_inputs){.sx = {B, N, G}, .sp = {B, N, 3}, .st = {B, 1}};
    in->z_expr = random_buf(&r, B * N * G, 1.0f, 0);
    in->z_pos = random_buf(&r, B * N * 3, 1.0f, 0);
    in->expr = random_buf(&r, B * N * G, 0.0f, 1);
    in->pos = random_buf(&r, B * N * 3, 10.0f, 0);
    in->t = ast_xmalloc((size_t)B * sizeof *in->t);
    for (int64_t b = 0; b < B; b++) in->t[b] = (1.0f + (float)(ast_rng_next(&r) % 1000)) / 1000.0f;
}

static void inputs_free(model_inputs *in)
{
    free(in->z_expr), free(in->z_pos), free(in->expr), free(in->pos), free(in->t);
    ast_ctx_free(in->kept);
}

static ast_model_out model_pass(ast_model *m, ast_ctx *c, const model_inputs *in, int train)
{
    ast_ctx_reset(c);
    ast_ctx_set_training(c, train);
    ast_ctx_set_grad(c, train);
    return ast_model_forward(m, c, in->x_dev, in->t_dev, in->p_dev, NULL, NULL, NULL);
}

/* The step after AdamW's constants are staged: forward, loss, backward,
 * clipping and AdamW queued (as the trainer's, train_graph.c). */
static void model_queue_step(ast_model *m, ast_ctx *c, ast_adamw *opt, const model_inputs *in, ast_pos_loss pos_loss)
{
    ast_params_zero_grad(ast_model_params(m));
    ast_model_out out = model_pass(m, c, in, 1);
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    lc.position_loss = pos_loss;
    ast_loss_parts lp = ast_diffusion_loss(c, &lc, &out, in->expr_dev, in->pos_dev, NULL);
    ast_backward(c, lp.total);
    ast_adamw_queue(opt, BENCH_CLIP, lp.total->data);
}

/* Median wall (and CPU) seconds and the minimum wall seconds of `steps`
 * calls after `warmup` untimed ones; stops early past budget_s (> 0). */
typedef void (*step_fn)(void *ud);
typedef struct step_times {
    double median, min, cpu;
} step_times;

static int time_steps(step_fn fn, void *ud, int warmup, int steps, double budget_s, step_times *st)
{
    size_t n = (size_t)(steps > 0 ? steps : 1);
    double *dt = ast_xmalloc(n * sizeof *dt), *cpu = ast_xmalloc(n * sizeof *cpu), start = bench_now();
    for (int i = 0; i < warmup; i++) fn(ud);
    int done = 0;
    while (done < steps && (done == 0 || budget_s <= 0 || bench_now() - start < budget_s)) {
        double t0 = bench_now(), c0 = bench_cpu_now();
        fn(ud);
        cpu[done] = bench_cpu_now() - c0;
        dt[done++] = bench_now() - t0;
    }
    st->median = bench_median(dt, done);
    st->min = done ? dt[0] : 0.0;
    st->cpu = bench_median(cpu, done);
    free(dt), free(cpu);
    return done;
}

static void put_times(bench_timing *out, const step_times *st)
{
    out->step_median_s = st->median;
    out->step_min_s = st->min;
    out->step_cpu_s = st->cpu;
}

typedef struct model_state {
    ast_model *m;
    ast_ctx *c;
    ast_adamw *opt;
    model_inputs in;
    ast_pos_loss pos_loss;
    double *enqueue; /* host seconds to queue each step so far */
    int n_steps;
    ast_graph *graph;
} model_state;

/* A device runs the step's kernels asynchronously: a timed step ends when
 * they have (on the CPU synchronize does nothing). */
static void finish(ast_ctx *c)
{
    const ast_backend *b = ast_ctx_backend(c);
    b->synchronize(b);
}

static void model_step_fn(void *ud)
{
    model_state *s = ud;
    double t0 = bench_now();
    ast_adamw_stage(s->opt, BENCH_LR);
    model_queue_step(s->m, s->c, s->opt, &s->in, s->pos_loss);
    s->enqueue[s->n_steps++] = bench_now() - t0;
    finish(s->c);
}

static void model_graph_fn(void *ud)
{
    model_state *s = ud;
    ast_adamw_stage(s->opt, BENCH_LR);
    ast_graph_replay(s->graph);
    finish(s->c);
}

/* The step captured once, then timed replayed; or why it cannot be. */
static void time_graph(model_state *s, const bench_run_opts *run, bench_timing *out)
{
    char why[sizeof out->graph_note] = "";
    ast_adamw_stage(s->opt, BENCH_LR); /* before the capture: it waits for the last update */
    if (ast_graph_begin(s->c, why, sizeof why) == 0) {
        model_queue_step(s->m, s->c, s->opt, &s->in, s->pos_loss);
        s->graph = ast_graph_end(s->c, why, sizeof why);
    }
    if (!s->graph) {
        snprintf(out->graph_note, sizeof out->graph_note, "%s", why);
        return;
    }
    step_times st;
    time_steps(model_graph_fn, s, run->warmup, run->steps, 0, &st);
    out->graph_median_s = st.median;
    ast_graph_free(s->graph);
}

static void model_eval_fn(void *ud)
{
    model_state *s = ud;
    model_pass(s->m, s->c, &s->in, 0);
    finish(s->c);
}

/* Parameters, gradients and AdamW's m, v and AMSGrad's vmax: 5 floats each. */
static size_t state_bytes(int64_t params) { return (size_t)params * 5 * sizeof(float); }

/* Parameters on the backend their steps run on, where the model has not
 * moved them itself. */
static void params_on(ast_params *p, const ast_backend *b)
{
    if (ast_params_backend(p) != b) ast_params_to_backend(p, b);
}

/* The case's model on run->device; NULL with out->error set. */
static ast_model *model_on(const bench_model_case *mc, const bench_run_opts *run, bench_timing *out)
{
    ast_model_config cfg = mc->cfg;
    cfg.device = run->device;
    ast_error e = {""};
    ast_model *m = ast_model_new(&cfg, run->seed, &e);
    if (!m) {
        snprintf(out->error, sizeof out->error, "%s", e.msg);
        return NULL;
    }
    params_on(ast_model_params(m), ast_model_backend(m));
    return m;
}

void bench_model_child(const void *arg, bench_timing *out)
{
    const bench_model_job *job = arg;
    const bench_model_case *mc = job->mc;
    openblas_set_num_threads(bench_threads());
    model_state s = {.m = model_on(mc, &job->run, out), .pos_loss = mc->position_loss};
    if (!s.m) return;
    s.c = ast_ctx_new_on(ast_model_backend(s.m), job->run.seed);
    ast_ctx_set_precision(s.c, job->run.precision);
    ast_ctx_set_stats(s.c, 0); /* as a run without monitors (statistics cost a device's step a wait) */
    s.opt = ast_adamw_new(ast_model_params(s.m), &adamw_cfg);
    inputs_init(&s.in, mc, job->run.seed + 1);
    inputs_place(&s.in, ast_model_backend(s.m));
    s.enqueue = ast_xcalloc((size_t)(job->run.warmup + job->run.steps) + 1, sizeof *s.enqueue);
    step_times st;
    out->steps = time_steps(model_step_fn, &s, job->run.warmup, job->run.steps, 0, &st);
    put_times(out, &st);
    if (ast_model_backend(s.m)->memory != AST_MEM_HOST) {
        out->enqueue_median_s = bench_median(s.enqueue + job->run.warmup, out->steps);
        if (mc->time_graph) time_graph(&s, &job->run, out);
    }
    free(s.enqueue);
    time_steps(model_eval_fn, &s, job->run.warmup, job->run.steps, 0, &st);
    out->eval_median_s = st.median;
    out->flops_eval = bench_flops_model_forward(mc);
    out->flops_step = bench_flops_model_step(mc);
    out->params = ast_model_param_count(s.m);
    out->active_params = ast_model_active_param_count(s.m);
    out->arena_peak = ast_ctx_arena_peak(s.c);
    out->state_bytes = state_bytes(out->params);
    out->threads = ast_parallel_threads();
    out->ok = 1;
    inputs_free(&s.in);
    ast_adamw_free(s.opt);
    ast_ctx_free(s.c);
    ast_model_free(s.m);
}

/* ---- one plugin alone ------------------------------------------------ */

typedef struct plugin_state {
    const ast_plugin_desc *desc;
    void *self;
    ast_params *params;
    ast_ctx *c;
    ast_adamw *opt;
    int64_t shape[3];
    float *x, *target;
} plugin_state;

static void plugin_step_fn(void *ud)
{
    plugin_state *s = ud;
    ast_params_zero_grad(s->params);
    ast_ctx_reset(s->c);
    ast_ctx_set_training(s->c, 1);
    ast_ctx_set_grad(s->c, 1);
    ast_tensor *x = ast_tensor_from(s->c, 3, s->shape, s->x);
    x->flags |= AST_REQUIRES_GRAD; /* as inside the model, where the input's gradient is needed */
    ast_fwd_args args = {.layer = 0};
    ast_tensor *y = s->desc->forward(s->self, s->c, x, &args);
    ast_tensor *loss = ast_mse(s->c, y, ast_tensor_from(s->c, 3, s->shape, s->target), NULL);
    ast_tensor *extra = ast_model_extra_loss(s->c);
    ast_backward(s->c, extra ? ast_add(s->c, loss, extra) : loss);
    ast_adamw_step(s->opt, BENCH_LR);
    finish(s->c);
}

/* Loads and builds the plugin; 0, or -1 with out->error set. */
static int plugin_open(const bench_plugin_job *job, plugin_state *s, bench_timing *out)
{
    ast_error e = {""};
    static ast_optval vals[AST_MAX_PLUGIN_OPTS];
    const ast_plugin *p = ast_plugins_init(&e) ? ast_plugin_load(job->kind, job->plugin, &e) : NULL;
    if (!p || !ast_plugin_options(p, job->opts, job->n_opts, vals, &e)) {
        snprintf(out->error, sizeof out->error, "%s", e.msg);
        return -1;
    }
    s->desc = ast_plugin_desc_of(p);
    s->params = ast_params_new(job->run.seed);
    char err[256] = "";
    const ast_backend *b = ast_backend_find(job->run.device);
    if (!b || ast_plugin_check_backend(p, b->name, &e)) {
        snprintf(out->error, sizeof out->error, "%s", b ? e.msg : "no such backend in this build");
        return -1;
    }
    ast_create_args a = {.host = ast_host_table(), .scope = ast_scope_new(s->params, "bench"), .dims = &job->dims,
                         .opts = vals, .backend = b->name};
    if (!(s->self = s->desc->create(&a, err, sizeof err))) {
        snprintf(out->error, sizeof out->error, "%s: %s", job->plugin, err);
        return -1;
    }
    params_on(s->params, b);
    return 0;
}

void bench_plugin_child(const void *arg, bench_timing *out)
{
    const bench_plugin_job *job = arg;
    openblas_set_num_threads(bench_threads());
    plugin_state s = {0};
    if (plugin_open(job, &s, out)) return;
    s.c = ast_ctx_new_on(ast_params_backend(s.params), job->run.seed);
    ast_ctx_set_precision(s.c, job->run.precision);
    s.opt = ast_adamw_new(s.params, &adamw_cfg);
    int64_t E = job->dims.d_model, n = (int64_t)job->sets * job->cells * E;
    memcpy(s.shape, (int64_t[]){job->sets, job->cells, E}, sizeof s.shape);
    ast_rng r;
    ast_rng_seed(&r, job->run.seed + 1);
    s.x = random_buf(&r, n, 1.0f, 0);
    s.target = random_buf(&r, n, 1.0f, 0);
    step_times st;
    out->steps = time_steps(plugin_step_fn, &s, job->run.warmup, job->run.steps, job->budget_s, &st);
    put_times(out, &st);
    out->flops_step = job->flops_step;
    out->params = out->active_params = ast_params_numel(s.params);
    if (s.desc->active_params) out->active_params = s.desc->active_params(s.self);
    out->arena_peak = ast_ctx_arena_peak(s.c);
    out->state_bytes = state_bytes(out->params);
    out->threads = ast_parallel_threads();
    out->ok = 1;
    free(s.x), free(s.target);
    ast_adamw_free(s.opt);
    ast_ctx_free(s.c);
    ast_plugin_destroy(s.desc, s.self);
    ast_params_free(s.params);
    ast_plugins_shutdown();
}

/* ---- sampling -------------------------------------------------------- */

/* Positions generated from expression for the case's B sets of N cells,
 * the reference's schedule (1000 diffusion steps) walked in run.steps
 * network evaluations; after an untimed warm-up call of run.warmup
 * evaluations (at least one), which faults the model's pages in and starts
 * the thread pool: each call grows an arena of its own, so a longer
 * warm-up would warm nothing more. */
void bench_sample_child(const void *arg, bench_timing *out)
{
    const bench_model_job *job = arg;
    const bench_model_case *mc = job->mc;
    openblas_set_num_threads(bench_threads());
    ast_model *m = model_on(mc, &job->run, out);
    ast_schedule sched;
    ast_error e = {""};
    if (!m || ast_schedule_init(&sched, 1000, 1.0, 1.0, &e)) {
        if (m) snprintf(out->error, sizeof out->error, "%s", e.msg);
        ast_model_free(m);
        return;
    }
    model_inputs in;
    inputs_init(&in, mc, job->run.seed + 1);
    int64_t cells = (int64_t)mc->sets * mc->cells;
    float *pos = ast_xmalloc((size_t)cells * 3 * sizeof *pos);
    ast_sampler_config sc = {.mode = AST_MODE_EXPR_TO_POS, .num_steps = job->run.steps, .ret = AST_RETURN_X0,
                             .seed = job->run.seed, .pos_param = AST_POS_X0, .align = job->run.sample_align,
                             .precision = job->run.precision};
    sc.num_steps = job->run.warmup > 1 ? job->run.warmup : 1;
    ast_sample(m, &sched, &sc, mc->sets, mc->cells, in.expr, NULL, NULL, NULL, pos);
    sc.num_steps = job->run.steps;
    double t0 = bench_now();
    ast_sample(m, &sched, &sc, mc->sets, mc->cells, in.expr, NULL, NULL, NULL, pos);
    double dt = bench_now() - t0;
    out->steps = ast_sample_grid(1000, job->run.steps, NULL);
    out->step_median_s = out->step_min_s = dt / out->steps; /* per network evaluation */
    out->cells_per_s = (double)cells / dt;
    out->params = out->active_params = ast_model_param_count(m);
    out->threads = ast_parallel_threads();
    out->ok = 1;
    free(pos);
    inputs_free(&in);
    ast_schedule_free(&sched);
    ast_model_free(m);
}
