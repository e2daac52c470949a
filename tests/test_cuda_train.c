/* The trainer on the GPU with its step captured as a CUDA graph
 * (training.cuda_graph, train_graph.c) against the same run op by op: the
 * same losses bit for bit, validation and checkpoints in between; and the
 * runs that cannot be captured (MoE routing on the host) train op by op.
 * Skipped, saying why, without CUDA in the build or without a GPU. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fixture.h"
#include "train/train.h"
#include "train_fixture.h"

static const char *tiny_yaml =
    "device: cuda\n"
    "training_mode: joint\n"
    "data: {set_size: 12, preprocessing: {position_key: spatial, cell_type_key: null},\n"
    "       loading: {rotation: true, expression_dropout: 0.1}}\n"
    "diffusion: {diffusion_steps: 100}\n"
    "training: {learning_rate: 1e-3, batch_size: 2, epochs: 3, steps_per_epoch: 4, val_sets: 4,\n"
    "           val_t_points: 2, early_stopping: false, scheduler: {type: cosine, T_max: 3}}\n"
    TINY_MODEL_YAML
    "attention: gated\n";

/* The losses of a run with `graph` and the overrides `more` (NULL-ended,
 * at most 8); malloc'd, *n of them. */
static double *train_losses(const char *graph, const char *const *more, int64_t *n, int *replayed)
{
    cf_gpu();
    char g[64];
    snprintf(g, sizeof g, "training.cuda_graph=%s", graph);
    const char *overrides[12] = {g, "TransformerLayer_setting.dropout=0.2"};
    for (int i = 0; more[i]; i++) overrides[2 + i] = more[i];
    train_setup s;
    train_setup_open(&s, tiny_yaml, overrides);
    ast_train_result r;
    double *losses = train_setup_losses(&s, train_tmp_dir("cuda-graph"), n, &r, replayed);
    train_setup_close(&s);
    return losses;
}

/* The run `what` (overrides `more`) as a graph and op by op: the same
 * losses bit for bit, and a replayed step when expect_graph. */
static void check_replay(const char *what, const char *const *more, int expect_graph)
{
    int64_t n_graph, n_ops;
    int replayed, replayed_off;
    setenv("ALPHAST_TRACE_TRAFFIC", "1", 1); /* where the step waits, if it does: on standard error */
    double *graph = train_losses("true", more, &n_graph, &replayed);
    unsetenv("ALPHAST_TRACE_TRAFFIC");
    double *ops = train_losses("false", more, &n_ops, &replayed_off);
    cr_assert_eq(replayed, expect_graph, "%s: the step %s a graph (see the traffic traced above)", what,
                 replayed ? "became" : "did not become");
    cr_assert_not(replayed_off, "training.cuda_graph: false still captured the step");
    cr_assert_eq(n_graph, 12);
    cr_assert_eq(n_ops, n_graph);
    for (int64_t i = 0; i < n_ops; i++)
        cr_expect_eq(graph[i], ops[i], "%s, step %lld: loss %.9g replayed, %.9g op by op", what, (long long)i + 1,
                     graph[i], ops[i]);
    cr_assert_arr_eq(graph, ops, (size_t)n_ops * sizeof *ops, "%s: the graph's losses are not the eager run's", what);
    cr_log_info("%s: %lld steps over 3 epochs, graph and op by op: the same losses bit for bit (last %.6f)", what,
                (long long)n_ops, ops[n_ops - 1]);
    free(graph), free(ops);
}

static void check_same(const char *ffn, const char *pos, int expect_graph)
{
    char f[64], l[64], what[128];
    snprintf(f, sizeof f, "ffn=%s", ffn);
    snprintf(l, sizeof l, "loss.position_loss=%s", pos);
    snprintf(what, sizeof what, "ffn %s, %s loss", ffn, pos);
    const char *const more[] = {f, l, NULL};
    check_replay(what, more, expect_graph);
}

Test(cuda_train, dense_run_replays_its_graph_with_the_same_losses) { check_same("dense", "distance", 1); }

/* The default aligned position loss runs on the device too (aligned_mse). */
Test(cuda_train, aligned_loss_run_replays_its_graph_with_the_same_losses) { check_same("dense", "aligned", 1); }

/* MoE routes in device memory (the plan ops, ABI 2.6): nothing waits for
 * the host, so the trainer captures its step, with the same numbers. */
Test(cuda_train, moe_run_replays_its_graph_with_the_same_losses) { check_same("moe", "distance", 1); }

/* The structural prior and the geodesic attention's distances are
 * computed on the host from the batch before its upload and copied in
 * with it from pinned memory: the step reads nothing back, is captured,
 * and replays each batch's prior with the eager run's numbers. The prior
 * needs clean expression (expr_to_pos). */
Test(cuda_train, prior_run_replays_its_graph_with_the_same_losses)
{
    const char *const more[] = {"training_mode=expr_to_pos", "model.prior=isomap", "model.prior_inputs=true",
                                "loss.position_loss=aligned", "ffn=dense", NULL};
    check_replay("isomap prior", more, 1);
}

Test(cuda_train, geodesic_attention_run_replays_its_graph_with_the_same_losses)
{
    const char *const more[] = {"training_mode=expr_to_pos", "model.prior=mds", "attention=geodesic",
                                "loss.position_loss=distance", "ffn=dense", NULL};
    check_replay("geodesic attention and mds prior", more, 1);
}

/* ---- the next batch drawn while the device runs the step -------------------- */

/* A "schedule" that delivers SIGUSR1 as step 6 begins: the 2nd step of
 * epoch 2, replayed, during which the host draws step 7's batch ahead. */
static int signal_at_step_6(void *ud, int64_t step, int epoch, ast_schedule_values *v, ast_error *e)
{
    if (step == 5) raise(SIGUSR1);
    return 0;
}

/* Trains the prior config in dir (resuming from its checkpoint) with
 * `schedule`; its step losses, malloc'd, *n of them. */
static double *prior_run_in(const char *dir, ast_schedule_fn schedule, int64_t *n, int *replayed)
{
    cf_gpu();
    const char *const overrides[] = {"training_mode=expr_to_pos", "model.prior=isomap", "ffn=dense",
                                     "TransformerLayer_setting.dropout=0.2", NULL};
    train_setup s;
    train_setup_open(&s, tiny_yaml, overrides);
    s.tc.schedule = schedule;
    ast_train_result r;
    double *losses = train_setup_losses(&s, dir, n, &r, replayed);
    train_setup_close(&s);
    return losses;
}

/* A replayed step draws the next step's batch (sets, noise, prior) while
 * the GPU runs it; the checkpoint a signal writes then keeps the data
 * stream as it was before that draw, so the resumed run draws the batch
 * again: the stopped and resumed runs give the uninterrupted one's losses
 * bit for bit. */
Test(cuda_train, a_batch_drawn_ahead_is_drawn_again_after_a_signal)
{
    int64_t n_full, n_first, n_rest;
    int replayed;
    double *full = prior_run_in(train_tmp_dir("cuda-ahead"), NULL, &n_full, &replayed);
    cr_assert(replayed, "the prior run's step was not captured");
    const char *dir = train_tmp_dir("cuda-ahead");
    double *first = prior_run_in(dir, signal_at_step_6, &n_first, &replayed);
    double *rest = prior_run_in(dir, NULL, &n_rest, &replayed);
    cr_assert_eq(n_full, 12);
    cr_assert_eq(n_first, 6, "the step under way ends, no other starts");
    cr_assert_eq(n_rest, 6, "the resumed run continues at step 7");
    for (int i = 0; i < 6; i++) cr_expect_eq(first[i], full[i], "step %d: %.9g vs %.9g", i + 1, first[i], full[i]);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(rest[i], full[6 + i], "step %d: %.9g resumed, %.9g uninterrupted", 7 + i, rest[i], full[6 + i]);
    cr_log_info("prior run stopped by a signal at step 6 and resumed: the uninterrupted losses (last %.6f)",
                full[n_full - 1]);
    free(full), free(first), free(rest);
}

/* ---- monitors and masking in the captured step ------------------------------ */

/* What a run with monitors and masking leaves: its losses, whether its step
 * was replayed, and its metrics.jsonl's train and monitor lines from
 * "step" on (the wall-clock "time" before it differs between runs). */
typedef struct monitored_run {
    double *losses;
    int64_t n;
    int replayed;
    char *lines;
    int n_monitor, n_masking;
} monitored_run;

static char *step_lines(const char *dir, int *n_monitor, int *n_masking)
{
    char path[256], line[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s: cannot read", path);
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(cap, 1);
    *n_monitor = *n_masking = 0;
    while (fgets(line, sizeof line, f)) {
        const char *from = strstr(line, "\"step\":");
        if (!from || (!strstr(line, "\"kind\":\"monitor\"") && !strstr(line, "\"kind\":\"train\""))) continue;
        *n_monitor += strstr(line, "\"kind\":\"monitor\"") != NULL;
        *n_masking += strstr(line, "masked_expr_reconstruction") != NULL;
        size_t l = strlen(from);
        while (len + l + 1 > cap) out = realloc(out, cap *= 2);
        memcpy(out + len, from, l + 1), len += l;
    }
    fclose(f);
    return out;
}

static monitored_run train_monitored(const char *graph, const char *attention)
{
    cf_gpu();
    char g[64], a[64];
    snprintf(g, sizeof g, "training.cuda_graph=%s", graph);
    snprintf(a, sizeof a, "attention=%s", attention);
    const char *const overrides[] = {g, a, "ffn=dense", "TransformerLayer_setting.dropout=0.2",
                                     "loss.position_loss=distance", "masking.enable=true",
                                     "masking.masking_probability=0.5",
                                     "monitors=[{name: grad_norm, every: 1}, {name: time_conditioning, every: 1}, "
                                     "{name: gate_activation, every: 1}]",
                                     NULL};
    train_setup s;
    train_setup_open(&s, tiny_yaml, overrides);
    ast_error e = {""};
    ast_model *m = ast_model_new(&s.mc, s.tc.seed, &e);
    cr_assert(m, "%s", e.msg);
    const char *dir = train_tmp_dir("cuda-monitored");
    ast_trainer *t = ast_trainer_new(m, &s.d, s.sp, &s.tc, dir, NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_assert(ast_trainer_add_monitors(t, s.cfg, &e) == 0, "%s", e.msg);
    ast_train_result r;
    cr_assert(ast_trainer_run(t, &r, &e) == 0, "%s", e.msg);
    monitored_run out = {.n = ast_trainer_n_losses(t), .replayed = ast_trainer_cuda_graph(t)};
    out.losses = malloc((size_t)(out.n + 1) * sizeof *out.losses);
    memcpy(out.losses, ast_trainer_losses(t), (size_t)out.n * sizeof *out.losses);
    ast_trainer_free(t);
    ast_model_free(m);
    out.lines = step_lines(dir, &out.n_monitor, &out.n_masking);
    train_setup_close(&s);
    return out;
}

/* The first line where a and b differ, for the failure's message. */
static void first_difference(const char *a, const char *b, char *out, size_t n)
{
    int line = 1;
    const char *sa = a;
    while (*a && *a == *b) {
        if (*a == '\n') line++, sa = a + 1;
        a++, b++;
    }
    const char *sb = b - (a - sa), *ea = strchr(sa, '\n'), *eb = strchr(sb, '\n');
    snprintf(out, n, "line %d:\n  graph: %.*s\n  ops:   %.*s", line, ea ? (int)(ea - sa) : (int)strlen(sa), sa,
             eb ? (int)(eb - sb) : (int)strlen(sb), sb);
}

/* Monitors (gradient norms, time conditioning, gate activations: reduced
 * on the device and copied with the step) and masking (masks drawn on the
 * host into pinned memory) no longer keep the step from being captured:
 * the replayed run logs the eager run's losses, masking metrics and
 * monitor values, bit for bit (the same kernels in the same order). */
static void check_monitored(const char *attention)
{
    setenv("ALPHAST_TRACE_TRAFFIC", "1", 1); /* where the step waits, if it does: on standard error */
    monitored_run graph = train_monitored("true", attention);
    unsetenv("ALPHAST_TRACE_TRAFFIC");
    monitored_run ops = train_monitored("false", attention);
    cr_log_info("attention %s: graph run %s, %d monitor lines, %d masking lines", attention,
                graph.replayed ? "replayed" : "NOT replayed", graph.n_monitor, graph.n_masking);
    cr_expect(graph.replayed, "attention %s, monitors and masking on: the step was not captured (see the traffic "
              "traced above)", attention);
    cr_assert_not(ops.replayed, "training.cuda_graph: false still captured the step");
    cr_assert_eq(graph.n, 12);
    cr_assert_eq(ops.n, graph.n);
    for (int64_t i = 0; i < ops.n; i++)
        cr_expect_eq(graph.losses[i], ops.losses[i], "attention %s, step %lld: loss %.9g replayed, %.9g op by op",
                     attention, (long long)i + 1, graph.losses[i], ops.losses[i]);
    cr_assert_gt(ops.n_monitor, 12 * 4, "attention %s: only %d monitor lines", attention, ops.n_monitor);
    cr_assert_eq(ops.n_masking, 12);
    char diff[2048] = "";
    if (strcmp(graph.lines, ops.lines)) first_difference(graph.lines, ops.lines, diff, sizeof diff);
    cr_assert(!diff[0], "attention %s: metrics.jsonl differs at %s", attention, diff);
    cr_log_info("attention %s: %lld steps replayed with the eager run's losses and %d monitor values (last loss %.6f)",
                attention, (long long)ops.n, ops.n_monitor, ops.losses[ops.n - 1]);
    free(graph.losses), free(ops.losses), free(graph.lines), free(ops.lines);
}

Test(cuda_train, monitors_and_masking_replay_with_the_eager_numbers_linear) { check_monitored("linear"); }
Test(cuda_train, monitors_and_masking_replay_with_the_eager_numbers_gated) { check_monitored("gated"); }
