/* The training loop on the bundled data with a tiny model: exact resume,
 * the non-finite stop, and the run directory. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "io/safetensors.h"
#include "train/train.h"
#include "train_fixture.h"
#include "test_files.h"

static const char *tiny_yaml =
    "training_mode: joint\n"
    "data: {set_size: 12, preprocessing: {position_key: spatial, cell_type_key: null},\n"
    "       loading: {rotation: true, expression_dropout: 0.1}}\n"
    "diffusion: {diffusion_steps: 100}\n"
    "training: {learning_rate: 1e-3, batch_size: 2, epochs: 4, steps_per_epoch: 3, val_sets: 4,\n"
    "           val_t_points: 2, early_stopping: false, scheduler: {type: cosine, T_max: 4}}\n"
    TINY_MODEL_YAML
    "attention: gated\n"
    "ffn: {name: moe, num_experts: 2, top_k: 1}\n";

typedef train_setup fixture;

static void fixture_open(fixture *f, int epochs)
{
    char set[64];
    snprintf(set, sizeof set, "training.epochs=%d", epochs);
    const char *const overrides[] = {set, NULL};
    train_setup_open(f, tiny_yaml, overrides);
}

/* Trains in dir (resuming if it holds a checkpoint) with `schedule` (may
 * be NULL); returns this process's step losses, malloc'd, and their count. */
static double *train_scheduled_in(const char *dir, int epochs, ast_schedule_fn schedule, int64_t *n, ast_train_result *r)
{
    fixture f;
    fixture_open(&f, epochs);
    f.tc.schedule = schedule;
    double *losses = train_setup_losses(&f, dir, n, r, NULL);
    train_setup_close(&f);
    return losses;
}

static double *train_in(const char *dir, int epochs, int64_t *n, ast_train_result *r)
{
    return train_scheduled_in(dir, epochs, NULL, n, r);
}

Test(train, resumed_run_repeats_the_uninterrupted_losses_exactly, .timeout = 60)
{
    /* Dropout, router noise, rotation, expression dropout and the sampled
     * sets and times all draw from the two RNGs the checkpoint saves, so
     * the continued run must match bit for bit. */
    int64_t n_full, n_first, n_rest;
    ast_train_result r;
    double *full = train_in(train_tmp_dir("train"), 4, &n_full, &r);
    cr_assert_eq(n_full, 12);
    char *dir = train_tmp_dir("train");
    double *first = train_in(dir, 2, &n_first, &r);
    double *rest = train_in(dir, 4, &n_rest, &r);
    cr_assert_eq(n_first, 6);
    cr_assert_eq(n_rest, 6, "the resumed run continues at step 7");
    for (int i = 0; i < 6; i++) cr_assert_eq(first[i], full[i], "step %d", i + 1);
    for (int i = 0; i < 6; i++) cr_assert_eq(rest[i], full[6 + i], "step %d: %.9g vs %.9g", 7 + i, rest[i], full[6 + i]);
    cr_assert_eq(r.steps, 12);
    free(full), free(first), free(rest);
}

/* A "schedule" that delivers SIGUSR1 as step 5 begins, as Slurm's warning
 * would arrive in the middle of an epoch (train/train_stop.h). */
static int signal_at_step_5(void *ud, int64_t step, int epoch, ast_schedule_values *v, ast_error *e)
{
    if (step == 4) raise(SIGUSR1);
    return 0;
}

/* metrics.jsonl without the wall-clock times. */
static char *metrics_untimed(const char *dir)
{
    char path[256], line[1024], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *in = fopen(path, "r"), *out = open_memstream(&text, &len);
    cr_assert(in, "%s missing", path);
    while (fgets(line, sizeof line, in)) {
        char *t = strstr(line, "\"time\":"), *comma = t ? strchr(t, ',') : NULL;
        if (comma) memmove(t, comma + 1, strlen(comma + 1) + 1);
        fputs(line, out);
    }
    fclose(in), fclose(out);
    return text;
}

Test(train, a_signal_stops_mid_epoch_and_the_resumed_run_repeats_the_losses, .timeout = 60)
{
    /* The step under way finishes (step 5 of 12, the 2nd of epoch 2's 3),
     * the checkpoint keeps the epoch's position and loss so far, and the
     * resumed run's steps, epoch means and validation match bit for bit. */
    int64_t n_full, n_first, n_rest;
    ast_train_result r;
    char *full_dir = train_tmp_dir("train"), *dir = train_tmp_dir("train");
    double *full = train_in(full_dir, 4, &n_full, &r);
    double *first = train_scheduled_in(dir, 4, signal_at_step_5, &n_first, &r);
    cr_assert_str_eq(r.stop_reason, "signal");
    cr_assert_eq(r.stop_signal, SIGUSR1);
    cr_assert_eq(n_first, 5, "the step under way ends, no other starts");
    cr_assert_eq(r.steps, 5);
    struct sigaction now;
    sigaction(SIGUSR1, NULL, &now);
    cr_assert(now.sa_handler == SIG_DFL, "the handler is gone after the run");
    double *rest = train_in(dir, 4, &n_rest, &r);
    cr_assert_str_eq(r.stop_reason, "epochs");
    cr_assert_eq(n_rest, 7, "the resumed run continues at step 6");
    for (int i = 0; i < 5; i++) cr_assert_eq(first[i], full[i], "step %d", i + 1);
    for (int i = 0; i < 7; i++) cr_assert_eq(rest[i], full[5 + i], "step %d: %.9g vs %.9g", 6 + i, rest[i], full[5 + i]);
    char *a = metrics_untimed(full_dir), *b = metrics_untimed(dir);
    cr_assert_str_eq(b, a, "metrics.jsonl (epoch means, validation) of the stopped and resumed run differs");
    free(a), free(b), free(full), free(first), free(rest);
}

Test(train, run_directory_holds_the_logs_and_a_loadable_checkpoint, .timeout = 60)
{
    char *dir = train_tmp_dir("train"), path[256];
    int64_t n;
    ast_train_result r;
    free(train_in(dir, 2, &n, &r));
    cr_assert(isfinite(r.best_val) && r.best_val > 0);
    const char *files[] = {"metrics.jsonl", "summary.json", "checkpoint.safetensors", "best.safetensors"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        cr_assert_eq(access(path, R_OK), 0, "%s missing", files[i]);
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    char line[512];
    int train_lines = 0, epoch_lines = 0;
    while (fgets(line, sizeof line, f)) {
        train_lines += strstr(line, "\"kind\":\"train\"") != NULL;
        epoch_lines += strstr(line, "\"kind\":\"epoch\"") != NULL;
    }
    fclose(f);
    cr_assert_eq(train_lines, 6);
    cr_assert_eq(epoch_lines, 2);
    ast_error e;
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    ast_st_file *ck = ast_st_open(path, &e);
    cr_assert(ck, "%s", e.msg);
    cr_assert_str_eq(ast_st_metadata(ck, "step"), "6");
    cr_assert(ast_st_find(ck, "optimizer.exp_avg.mlp_in_expression.0.weight") >= 0);
    ast_st_close(ck);
}

Test(train, non_finite_loss_stops_and_keeps_the_last_checkpoint, .timeout = 60)
{
    char *dir = train_tmp_dir("train"), path[256];
    int64_t n;
    ast_train_result r;
    free(train_in(dir, 1, &n, &r));
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long size_before = ftell(f);
    fclose(f);

    fixture fx;
    fixture_open(&fx, 3);
    ast_error e = {""};
    ast_model *m = ast_model_new(&fx.mc, fx.tc.seed, &e);
    ast_trainer *t = ast_trainer_new(m, &fx.d, fx.sp, &fx.tc, dir, NULL, &e);
    cr_assert_eq(ast_trainer_resume(t, &e), 1, "%s", e.msg);
    ast_params_at(ast_model_params(m), 0)->data[0] = NAN; /* a weight goes bad */
    cr_assert(ast_trainer_run(t, &r, &e) < 0);
    cr_assert(strstr(e.msg, "step 4: the loss is not finite"), "%s", e.msg);
    cr_assert(strstr(e.msg, "checkpoint.safetensors"), "%s", e.msg);
    ast_trainer_free(t);
    ast_model_free(m);
    train_setup_close(&fx);

    ast_st_file *ck = ast_st_open(path, &e);
    cr_assert(ck, "the last good checkpoint must stay readable: %s", e.msg);
    cr_assert_str_eq(ast_st_metadata(ck, "step"), "3");
    ast_st_close(ck);
    f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    cr_assert_eq(ftell(f), size_before);
    fclose(f);
}

/* ---- saved plugin state: the MoE's balance: bias selection bias -------------- */

/* The tiny run with aux-loss-free balancing, a bias step large enough that
 * the bias moves routing within a few steps, and the expert_load monitor
 * every step, so metrics.jsonl records each step's routing. */
static void bias_open(fixture *f, int epochs)
{
    char set[64];
    snprintf(set, sizeof set, "training.epochs=%d", epochs);
    const char *const overrides[] = {set, "ffn.balance=bias", "ffn.bias_update_rate=0.05",
                                     "monitors=[{name: expert_load, every: 1, collapse_threshold: 0}]", NULL};
    train_setup_open(f, tiny_yaml, overrides);
}

/* What a run leaves: its losses, every parameter and every buffer (values
 * in registration order), metrics.jsonl and the result. */
typedef struct run_state {
    int64_t n_losses;
    double *losses;
    int64_t n_param_values, n_buffer_values;
    float *params, *buffers;
    int n_buffers;
    char *metrics;
    ast_train_result r;
} run_state;

static char *slurp(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return test_slurp(path);
}

/* metrics.jsonl without its wall-clock times, which no two runs share. */
static char *without_times(char *text)
{
    char *out = text;
    for (const char *in = text; *in;) {
        if (strncmp(in, "\"time\":", 7)) {
            *out++ = *in++;
            continue;
        }
        in += strcspn(in, ",");
        in += *in == ',';
    }
    *out = 0;
    return text;
}

static float *snapshot(const ast_params *p, int buffers, int64_t *n_values)
{
    int n = buffers ? ast_params_n_buffers(p) : ast_params_count(p);
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += (buffers ? ast_params_buffer_at(p, i) : ast_params_at(p, i))->size;
    float *v = malloc((size_t)(total ? total : 1) * sizeof *v), *at = v;
    for (int i = 0; i < n; i++) {
        const ast_tensor *t = buffers ? ast_params_buffer_at(p, i) : ast_params_at(p, i);
        memcpy(at, t->data, (size_t)t->size * sizeof *at);
        at += t->size;
    }
    *n_values = total;
    return v;
}

/* Trains the bias run in dir up to `epochs` (resuming if dir holds a checkpoint). */
static void train_bias(const char *dir, int epochs, run_state *s)
{
    fixture f;
    bias_open(&f, epochs);
    ast_error e = {""};
    ast_model *m = ast_model_new(&f.mc, f.tc.seed, &e);
    cr_assert(m, "%s", e.msg);
    ast_trainer *t = ast_trainer_new(m, &f.d, f.sp, &f.tc, dir, NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_assert(ast_trainer_add_monitors(t, f.cfg, &e) == 0, "%s", e.msg);
    cr_assert(ast_trainer_resume(t, &e) >= 0, "%s", e.msg);
    cr_assert(ast_trainer_run(t, &s->r, &e) == 0, "%s", e.msg);
    s->n_losses = ast_trainer_n_losses(t);
    s->losses = malloc((size_t)s->n_losses * sizeof *s->losses);
    memcpy(s->losses, ast_trainer_losses(t), (size_t)s->n_losses * sizeof *s->losses);
    ast_params *p = ast_model_params(m);
    s->params = snapshot(p, 0, &s->n_param_values);
    s->buffers = snapshot(p, 1, &s->n_buffer_values);
    s->n_buffers = ast_params_n_buffers(p);
    ast_trainer_free(t);
    ast_model_free(m);
    train_setup_close(&f);
    s->metrics = without_times(slurp(dir, "metrics.jsonl"));
}

static void run_state_free(run_state *s)
{
    free(s->losses), free(s->params), free(s->buffers), free(s->metrics);
}

Test(train, resumed_bias_balanced_moe_repeats_the_uninterrupted_run_exactly, .timeout = 120)
{
    /* The selection bias moves every training step outside autograd: unless
     * the checkpoint carries it, the resumed run routes with a zero bias. */
    run_state full, first, rest;
    char *full_dir = train_tmp_dir("train"), *dir = train_tmp_dir("train");
    train_bias(full_dir, 4, &full);
    train_bias(dir, 2, &first);
    train_bias(dir, 4, &rest);
    cr_assert_eq(full.n_losses, 12);
    cr_assert_eq(rest.n_losses, 6, "the resumed run continues at step 7");
    for (int i = 0; i < 6; i++)
        cr_assert_eq(rest.losses[i], full.losses[6 + i], "step %d: %.9g vs %.9g", 7 + i, rest.losses[i],
                     full.losses[6 + i]);
    cr_assert_eq(full.n_buffers, 1, "one layer, one router.selection_bias");
    cr_assert_eq(rest.n_buffers, 1);
    cr_assert_eq(full.n_buffer_values, 2, "[num_experts]");
    cr_assert(full.buffers[0] != 0.0f || full.buffers[1] != 0.0f, "12 steps moved the bias");
    cr_assert(memcmp(first.buffers, full.buffers, 2 * sizeof(float)),
              "the bias keeps moving after step 6, so the check below can tell");
    cr_assert_eq(memcmp(rest.buffers, full.buffers, (size_t)full.n_buffer_values * sizeof(float)), 0,
                 "bias after resume [%.9g, %.9g] vs uninterrupted [%.9g, %.9g]", rest.buffers[0], rest.buffers[1],
                 full.buffers[0], full.buffers[1]);
    cr_assert_eq(rest.n_param_values, full.n_param_values);
    cr_assert_eq(memcmp(rest.params, full.params, (size_t)full.n_param_values * sizeof(float)), 0,
                 "final parameters differ bitwise");
    cr_assert(strstr(full.metrics, "\"monitor\":\"expert_load\""), "the monitor logs routing every step");
    cr_assert_str_eq(rest.metrics, full.metrics, "metrics.jsonl of the resumed run differs");
    cr_assert_eq(rest.r.best_val, full.r.best_val);
    cr_assert_eq(rest.r.last_val, full.r.last_val);
    run_state_free(&full), run_state_free(&first), run_state_free(&rest);
}

Test(train, best_weights_hold_the_selection_bias_and_evaluation_routes_with_it, .timeout = 120)
{
    run_state s;
    char *dir = train_tmp_dir("train"), path[256];
    train_bias(dir, 4, &s);
    snprintf(path, sizeof path, "%s/best.safetensors", dir);

    fixture f;
    bias_open(&f, 4);
    ast_error e = {""};
    ast_model *m = ast_model_new(&f.mc, f.tc.seed, &e);
    cr_assert(m, "%s", e.msg);
    ast_params *p = ast_model_params(m);
    cr_assert_eq(ast_params_n_buffers(p), 1);
    ast_tensor *bias = ast_params_buffer_at(p, 0);
    cr_assert_str_eq(bias->name, "transformer_layers.0.expression_ffn.ffn.router.selection_bias");
    cr_assert(bias->data[0] == 0.0f && bias->data[1] == 0.0f, "a fresh model starts unbiased");

    float saved[2];
    ast_st_file *best = ast_st_open(path, &e);
    cr_assert(best, "%s", e.msg);
    cr_assert_eq(ast_st_read_f32(best, bias->name, 1, (int64_t[]){2}, saved, &e), 0, "%s", e.msg);
    ast_st_close(best);
    cr_assert(saved[0] != 0.0f || saved[1] != 0.0f, "best.safetensors holds the trained bias");

    /* As alphast-run eval / sample load a run's weights (cli_load_weights). */
    cr_assert_eq(ast_params_load(p, path, 0, &e), 0, "%s", e.msg);
    cr_assert_eq(memcmp(bias->data, saved, sizeof saved), 0, "loaded [%.9g, %.9g] vs saved [%.9g, %.9g]",
                 bias->data[0], bias->data[1], saved[0], saved[1]);
    /* Evaluation routes with it: the validation loss of the loaded model is
     * the one training recorded for the best epoch, and differs without it. */
    ast_trainer *t = ast_trainer_new(m, &f.d, f.sp, &f.tc, train_tmp_dir("train"), NULL, &e);
    cr_assert(t, "%s", e.msg);
    double val = ast_trainer_val_loss(t);
    cr_assert_eq(val, s.r.best_val, "val loss %.17g of the loaded weights vs %.17g in training", val, s.r.best_val);
    memset(bias->data, 0, sizeof saved);
    double unbiased = ast_trainer_val_loss(t);
    cr_assert_neq(unbiased, s.r.best_val, "the bias must change routing for this check to mean anything");
    ast_trainer_free(t);
    ast_model_free(m);
    train_setup_close(&f);
    run_state_free(&s);
}

Test(train, resuming_needs_the_buffers_in_the_checkpoint, .timeout = 60)
{
    /* A checkpoint of the same model but balance: loss has every parameter
     * and no selection bias: resuming with balance: bias must not start
     * from a zero bias silently. */
    char *dir = train_tmp_dir("train"), path[256];
    int64_t n;
    ast_train_result r;
    free(train_in(dir, 1, &n, &r));
    fixture f;
    bias_open(&f, 2);
    ast_error e = {""};
    ast_model *m = ast_model_new(&f.mc, f.tc.seed, &e);
    ast_trainer *t = ast_trainer_new(m, &f.d, f.sp, &f.tc, dir, NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_assert_eq(ast_trainer_resume(t, &e), -1);
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    cr_assert(strstr(e.msg, path), "names the file: %s", e.msg);
    cr_assert(strstr(e.msg, "'transformer_layers.0.expression_ffn.ffn.router.selection_bias'"),
              "names the tensor: %s", e.msg);
    ast_trainer_free(t);
    ast_model_free(m);
    train_setup_close(&f);
}

/* ---- issue 11: the run's bookkeeping and damaged checkpoints ---------------- */

/* summary.json's number for `key` (NAN if absent). */
static double summary_number(const char *dir, const char *key)
{
    char *text = slurp(dir, "summary.json"), pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *at = strstr(text, pat);
    double v = at ? strtod(at + strlen(pat), NULL) : NAN;
    free(text);
    return v;
}

/* The training seconds dir's checkpoint saved. */
static double saved_seconds(const char *dir)
{
    char path[256];
    ast_error e = {""};
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    ast_st_file *ck = ast_st_open(path, &e);
    cr_assert(ck, "%s", e.msg);
    cr_assert(ast_st_metadata(ck, "seconds"));
    double v = strtod(ast_st_metadata(ck, "seconds"), NULL);
    ast_st_close(ck);
    return v;
}

Test(train, summary_describes_the_whole_run_across_invocations, .timeout = 60)
{
    /* A sweep killed after a run's last checkpoint runs it again: that
     * invocation trains no step, and its summary said 0 steps/s (the
     * report then averaged the zeros into the config's step time). */
    char *dir = train_tmp_dir("train");
    int64_t n;
    ast_train_result first, again, more;
    free(train_in(dir, 1, &n, &first));
    double saved = saved_seconds(dir);
    cr_assert(saved > 0 && saved <= first.seconds, "%g of %g", saved, first.seconds);
    free(train_in(dir, 2, &n, &more));
    cr_assert_eq(n, 3);
    /* Time after the last checkpoint (its own write, the summary) is not
     * saved: each invocation adds to the checkpointed seconds. */
    cr_assert_gt(more.seconds, saved, "seconds add up: %g after %g", more.seconds, saved);
    saved = saved_seconds(dir);
    free(train_in(dir, 2, &n, &again));
    cr_assert_eq(n, 0, "nothing left to train");
    cr_assert_eq(again.steps, 6);
    cr_assert_geq(again.seconds, saved);
    cr_assert_leq(again.seconds, more.seconds + 1.0);
    cr_assert_gt(again.steps_per_second, 0.0);
    cr_assert_float_eq(again.steps_per_second, 6.0 / again.seconds, 1e-6 * again.steps_per_second);
    cr_assert_float_eq(summary_number(dir, "steps_per_second"), again.steps_per_second,
                       1e-3 + 1e-4 * again.steps_per_second);
    cr_assert_float_eq(summary_number(dir, "seconds"), again.seconds, 2e-3);
    cr_assert_eq(summary_number(dir, "invocations"), 3);
    cr_assert_gt(summary_number(dir, "peak_arena_bytes"), 0, "the arena peak of the invocations that trained");
}

/* Rewrites dir's checkpoint with metadata `key` set to value (NULL: removed). */
static void edit_checkpoint(const char *dir, const char *key, const char *value)
{
    char path[256];
    ast_error e = {""};
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    ast_st_file *f = ast_st_open(path, &e);
    cr_assert(f, "%s", e.msg);
    ast_st_writer *w = ast_st_writer_new();
    float **data = calloc((size_t)ast_st_count(f), sizeof *data);
    for (int i = 0; i < ast_st_count(f); i++) {
        data[i] = malloc(ast_st_nbytes(f, i) + 4);
        memcpy(data[i], ast_st_data(f, i), ast_st_nbytes(f, i));
        ast_st_writer_add(w, ast_st_name(f, i), AST_ST_F32, ast_st_ndim(f, i), ast_st_shape(f, i), data[i]);
    }
    for (int i = 0; i < ast_st_metadata_count(f); i++)
        if (strcmp(ast_st_metadata_key(f, i), key))
            ast_st_writer_metadata(w, ast_st_metadata_key(f, i), ast_st_metadata_value(f, i));
    if (value) ast_st_writer_metadata(w, key, value);
    cr_assert_eq(ast_st_writer_write(w, path, &e), 0, "%s", e.msg);
    ast_st_writer_free(w);
    for (int i = 0; i < ast_st_count(f); i++) free(data[i]);
    free(data);
    ast_st_close(f);
}

/* Resuming dir: 1 on success, else -1 with the message in msg. */
static int resume_in(const char *dir, char *msg, size_t n)
{
    fixture f;
    fixture_open(&f, 3);
    ast_error e = {""};
    ast_model *m = ast_model_new(&f.mc, f.tc.seed, &e);
    ast_trainer *t = ast_trainer_new(m, &f.d, f.sp, &f.tc, dir, NULL, &e);
    cr_assert(t, "%s", e.msg);
    int rc = ast_trainer_resume(t, &e);
    snprintf(msg, n, "%s", e.msg);
    ast_trainer_free(t);
    ast_model_free(m);
    train_setup_close(&f);
    return rc;
}

/* Issue 25: a run whose checkpoint was deleted started over without a
 * word, writing its metrics over the old run's. Resuming refuses, naming
 * the checkpoint, what shows a run trained here and the fix. A log of an
 * attempt killed before its first checkpoint ended is no such run. */
Test(train, a_deleted_checkpoint_is_refused_not_trained_over, .timeout = 60)
{
    char *dir = train_tmp_dir("train"), ckpt[256], path[256];
    int64_t n;
    ast_train_result r;
    free(train_in(dir, 2, &n, &r));
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", dir);
    cr_assert_eq(remove(ckpt), 0);
    char msg[1024];
    cr_assert_eq(resume_in(dir, msg, sizeof msg), -1);
    snprintf(path, sizeof path, "%s/summary.json", dir);
    cr_assert(strstr(msg, ckpt) && strstr(msg, " is missing, but ") && strstr(msg, path) &&
                  strstr(msg, "--fresh") && strstr(msg, "--out"),
              "%s", msg);
    cr_assert_eq(remove(path), 0);
    cr_assert_eq(resume_in(dir, msg, sizeof msg), -1);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    cr_assert(strstr(msg, path), "a log past the first epoch: %s", msg);
    /* Cut after the first epoch line: an attempt killed before its checkpoint was saved. */
    char *log = slurp(dir, "metrics.jsonl"), *first = strstr(log, "\"kind\":\"epoch\"");
    cr_assert(first);
    FILE *f = fopen(path, "w");
    cr_assert(f && fwrite(log, 1, (size_t)(strchr(first, '\n') + 1 - log), f) > 0 && fclose(f) == 0);
    free(log);
    cr_assert_eq(resume_in(dir, msg, sizeof msg), 0, "%s", msg);
}

static long file_size(const char *dir, const char *name)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s missing", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

Test(train, checkpoint_metadata_out_of_range_is_refused_naming_the_field, .timeout = 120)
{
    /* epoch 1e300 trained forever, metrics_bytes 1e11 grew metrics.jsonl
     * to a 100 GB sparse file, step nan was taken as a step. */
    static const char *const cases[][3] = {
        {"epoch", "1e300", "integer in 0..2147483646"},
        {"epoch", "-1", "integer in 0.."},
        {"step", "nan", "'step' is 'nan'"},
        {"step", "0", "integer in 1..4294967294"}, /* fewer steps than epochs; at most 2^31 - 1 per epoch and the one under way */
        {"epoch_step", "3", "integer in 0..2"},  /* a whole epoch is no longer under way */
        {"epoch_loss_sum", "inf", "'epoch_loss_sum' is 'inf'"},
        {"optimizer_step", "4", "integer in 3..3"},
        {"best_epoch", "3", "integer in -1..0"},
        {"bad_epochs", "1", "integer in 0..0"},
        {"best_val", "nan", "'best_val' is 'nan'"},
        {"last_train", "inf", "'last_train' is 'inf'"},
        {"metrics_bytes", "1e11", "'metrics_bytes' is '1e11'"},
        {"metrics_bytes", "100000000000", "metrics.jsonl holds only"},
        {"metrics_bytes", "10", "ends no line"},
        {"data_rng", "0 0 0 0 0 0", "'data_rng'"},
        {"ctx_rng", "1 2 3 4 7 0", "'ctx_rng'"},
        {"seconds", "-1", "'seconds' is '-1'"},
        {"timed_steps", "4", "integer in 0..3"},
        {"step", NULL, "'step' is missing"},
    };
    char *dir = train_tmp_dir("train"), ref[256], msg[2048];
    int64_t n;
    ast_train_result r;
    free(train_in(dir, 1, &n, &r));
    snprintf(ref, sizeof ref, "%s/checkpoint.good", dir);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "cp %s/checkpoint.safetensors %s", dir, ref);
    cr_assert_eq(system(cmd), 0);
    long log_size = file_size(dir, "metrics.jsonl");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(cmd, sizeof cmd, "cp %s %s/checkpoint.safetensors", ref, dir);
        cr_assert_eq(system(cmd), 0);
        edit_checkpoint(dir, cases[i][0], cases[i][1]);
        cr_assert_eq(resume_in(dir, msg, sizeof msg), -1, "%s=%s was accepted", cases[i][0], cases[i][1]);
        cr_assert(strstr(msg, "checkpoint.safetensors: checkpoint field '"), "%s", msg);
        cr_assert(strstr(msg, cases[i][2]), "%s=%s: '%s' not in: %s", cases[i][0], cases[i][1], cases[i][2], msg);
        cr_assert(strstr(msg, "--fresh"), "the fix: %s", msg);
        cr_assert_eq(file_size(dir, "metrics.jsonl"), log_size, "%s=%s changed the log", cases[i][0], cases[i][1]);
    }
    /* A checkpoint from before the bookkeeping fields still resumes. */
    snprintf(cmd, sizeof cmd, "cp %s %s/checkpoint.safetensors", ref, dir);
    cr_assert_eq(system(cmd), 0);
    const char *added[] = {"seconds", "timed_steps", "peak_arena_bytes", "invocations"};
    for (int i = 0; i < 4; i++) edit_checkpoint(dir, added[i], NULL);
    cr_assert_eq(resume_in(dir, msg, sizeof msg), 1, "%s", msg);
}

/* Rewrites dir's checkpoint with element 1 of tensor `negate` set to -1
 * (NULL: none) and, if `extra`, one more tensor of that name. */
static void rewrite_tensors(const char *dir, const char *negate, const char *extra)
{
    char path[256];
    snprintf(path, sizeof path, "%s/checkpoint.safetensors", dir);
    ast_error e = {""};
    ast_st_file *f = ast_st_open(path, &e);
    cr_assert(f, "%s", e.msg);
    ast_st_writer *w = ast_st_writer_new();
    float **data = calloc((size_t)ast_st_count(f), sizeof *data), one[1] = {1.0f};
    for (int i = 0; i < ast_st_count(f); i++) {
        data[i] = malloc(ast_st_nbytes(f, i) + 4);
        memcpy(data[i], ast_st_data(f, i), ast_st_nbytes(f, i));
        if (negate && !strcmp(ast_st_name(f, i), negate)) data[i][1] = -1.0f;
        ast_st_writer_add(w, ast_st_name(f, i), AST_ST_F32, ast_st_ndim(f, i), ast_st_shape(f, i), data[i]);
    }
    if (extra) ast_st_writer_add(w, extra, AST_ST_F32, 1, (int64_t[]){1}, one);
    for (int i = 0; i < ast_st_metadata_count(f); i++)
        ast_st_writer_metadata(w, ast_st_metadata_key(f, i), ast_st_metadata_value(f, i));
    cr_assert_eq(ast_st_writer_write(w, path, &e), 0, "%s", e.msg);
    ast_st_writer_free(w);
    for (int i = 0; i < ast_st_count(f); i++) free(data[i]);
    free(data);
    ast_st_close(f);
}

Test(train, checkpoint_tensors_the_model_cannot_use_are_refused, .timeout = 60)
{
    char *dir = train_tmp_dir("train"), ref[256], cmd[600], msg[2048];
    int64_t n;
    ast_train_result r;
    free(train_in(dir, 1, &n, &r));
    snprintf(ref, sizeof ref, "%s/checkpoint.good", dir);
    snprintf(cmd, sizeof cmd, "cp %s/checkpoint.safetensors %s", dir, ref);
    cr_assert_eq(system(cmd), 0);
    /* A negative second moment makes AdamW's square root NaN. */
    rewrite_tensors(dir, "optimizer.exp_avg_sq.mlp_in_expression.0.weight", NULL);
    cr_assert_eq(resume_in(dir, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "'optimizer.exp_avg_sq.mlp_in_expression.0.weight' holds -1 at element 1"), "%s", msg);
    /* A tensor of no parameter: the checkpoint of another model (a layer
     * more) was resumed, the extra layer dropped without a word. */
    snprintf(cmd, sizeof cmd, "cp %s %s/checkpoint.safetensors", ref, dir);
    cr_assert_eq(system(cmd), 0);
    rewrite_tensors(dir, NULL, "transformer_layers.1.extra.weight");
    cr_assert_eq(resume_in(dir, msg, sizeof msg), -1);
    cr_assert(strstr(msg, "tensor 'transformer_layers.1.extra.weight' belongs to no parameter of this model"), "%s",
              msg);
}

Test(train, non_finite_loss_in_the_first_epoch_names_no_checkpoint, .timeout = 60)
{
    char *dir = train_tmp_dir("train");
    fixture fx;
    fixture_open(&fx, 2);
    ast_error e = {""};
    ast_model *m = ast_model_new(&fx.mc, fx.tc.seed, &e);
    ast_trainer *t = ast_trainer_new(m, &fx.d, fx.sp, &fx.tc, dir, NULL, &e);
    cr_assert(t, "%s", e.msg);
    ast_params_at(ast_model_params(m), 0)->data[0] = NAN;
    ast_train_result r;
    cr_assert(ast_trainer_run(t, &r, &e) < 0);
    cr_assert(strstr(e.msg, "step 1: the loss is not finite"), "%s", e.msg);
    cr_assert(strstr(e.msg, "No checkpoint was written"), "%s", e.msg);
    cr_assert_null(strstr(e.msg, "checkpoint.safetensors"), "there is none: %s", e.msg);
    ast_trainer_free(t);
    ast_model_free(m);
    train_setup_close(&fx);
}

/* ast_trainer_new's error with the fixture changed by `change`. */
static void expect_new_fails(void (*change)(fixture *), const char *needle)
{
    fixture fx;
    fixture_open(&fx, 1);
    change(&fx);
    ast_error e = {""};
    ast_model *m = ast_model_new(&fx.mc, fx.tc.seed, &e);
    ast_trainer *t = ast_trainer_new(m, &fx.d, fx.sp, &fx.tc, train_tmp_dir("train"), NULL, &e);
    cr_assert_null(t, "accepted; wanted '%s'", needle);
    cr_assert(strstr(e.msg, needle), "'%s' not in: %s", needle, e.msg);
    ast_model_free(m);
    train_setup_close(&fx);
}

static void huge_set(fixture *f) { f->tc.set_size = 1000000; }
static void one_test_cell(fixture *f) { f->sp[AST_SPLIT_TEST].n = 1; }
static void huge_val_sets(fixture *f) { f->tc.val_sets = 2000000000; }

/* set_size 1e6 ran 34 s, then died of memory. */
Test(train, a_set_size_beyond_the_split_is_refused_naming_the_key, .timeout = 60)
{
    expect_new_fails(huge_set, "data.set_size: 1000000 cells per set, but the training split's largest slice has 3200 "
                               "cells (3200 in the split); use at most 3200, or 0 for whole slices");
}

/* A 1-cell test split scored every metric 0.0000. */
Test(train, a_test_split_too_small_to_evaluate_is_refused, .timeout = 60)
{
    expect_new_fails(one_test_cell, "the test split has 1 cell, but evaluation needs at least 3");
}

/* A batch beyond memory died with a byte count and no cause. */
Test(train, a_batch_beyond_memory_names_its_keys, .timeout = 60)
{
    expect_new_fails(huge_val_sets, "out of memory: the validation batch (training.val_sets x data.set_size x genes)");
}

/* ---- training.select_on and the validation grid ------------------------- */

/* A validation score that ranks the epochs against time, the first best,
 * and keeps each scored epoch's parameters to compare best.safetensors with. */
typedef struct scored_epochs {
    int calls;
    float *params[8];
    int64_t n;
} scored_epochs;

static double first_epoch_best(void *ud, ast_model *m, const ast_schedule *s)
{
    scored_epochs *se = ud;
    (void)s;
    cr_assert(se->calls < 8);
    se->params[se->calls] = snapshot(ast_model_params(m), 0, &se->n);
    return 1.0 / (1 + se->calls++);
}

/* Trains the tiny config for 4 epochs selecting on `select_on`, scored by
 * first_epoch_best; the parameters of best.safetensors into *best. */
static void train_selecting(ast_select_on select_on, int patience, scored_epochs *se, ast_train_result *r, float **best)
{
    fixture f;
    fixture_open(&f, 4);
    f.tc.select_on = select_on;
    f.tc.val_score = first_epoch_best, f.tc.val_score_ud = se, f.tc.val_score_name = "knn_k10";
    f.tc.early_stopping = patience > 0, f.tc.patience = patience > 0 ? patience : 1;
    ast_error e = {""};
    char *dir = train_tmp_dir("select"), path[256];
    ast_model *m = ast_model_new(&f.mc, f.tc.seed, &e);
    cr_assert(m, "%s", e.msg);
    ast_trainer *t = ast_trainer_new(m, &f.d, f.sp, &f.tc, dir, NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_assert(ast_trainer_run(t, r, &e) == 0, "%s", e.msg);
    ast_trainer_free(t);
    snprintf(path, sizeof path, "%s/best.safetensors", dir);
    cr_assert_eq(ast_params_load(ast_model_params(m), path, 0, &e), 0, "%s", e.msg);
    int64_t n;
    *best = snapshot(ast_model_params(m), 0, &n);
    cr_assert_eq(n, se->n);
    ast_model_free(m);
    train_setup_close(&f);
}

Test(train, best_weights_follow_the_sampled_score_where_the_loss_disagrees, .timeout = 120)
{
    scored_epochs by_loss = {0}, by_score = {0};
    ast_train_result lr, sr;
    float *loss_best, *score_best;
    train_selecting(AST_SELECT_LOSS, 0, &by_loss, &lr, &loss_best);
    train_selecting(AST_SELECT_SAMPLED, 2, &by_score, &sr, &score_best);
    /* The loss falls over the 4 epochs, the score only falls: they disagree. */
    cr_assert_neq(lr.best_epoch, 0, "the loss must prefer a later epoch for the two criteria to disagree");
    cr_assert_eq(memcmp(loss_best, by_loss.params[lr.best_epoch], (size_t)by_loss.n * sizeof(float)), 0,
                 "select_on loss: best.safetensors is the epoch of the lowest loss");
    cr_assert_eq(sr.best_epoch, 0, "select_on sampled: the epoch of the highest score");
    cr_assert_eq(memcmp(score_best, by_score.params[0], (size_t)by_score.n * sizeof(float)), 0,
                 "select_on sampled: best.safetensors is epoch 1's");
    cr_assert_eq(sr.best_score, 1.0);
    cr_assert_eq(sr.last_score, 1.0 / 3, "the last scored epoch is the third");
    /* Early stopping counts epochs without a better score: 2 after the first. */
    cr_assert_str_eq(sr.stop_reason, "early_stopping");
    cr_assert_eq(sr.epochs, 3);
    cr_assert_eq(lr.epochs, 4);
    for (int i = 0; i < 8; i++) free(by_loss.params[i]), free(by_score.params[i]);
    free(loss_best), free(score_best);
}

Test(train, validation_scores_pure_noise_but_under_reference_parity, .timeout = 60)
{
    fixture f;
    fixture_open(&f, 1);
    int times[3];
    /* T = 100, 2 points: the bin midpoints 25 and 75, then T. */
    cr_assert_eq(ast_trainer_val_times(&f.tc, times), 3);
    cr_assert(times[0] == 25 && times[1] == 75 && times[2] == 100, "%d %d %d", times[0], times[1], times[2]);
    ast_error e = {""};
    ast_model *m = ast_model_new(&f.mc, f.tc.seed, &e);
    cr_assert(m, "%s", e.msg);
    ast_trainer *t = ast_trainer_new(m, &f.d, f.sp, &f.tc, train_tmp_dir("valT"), NULL, &e);
    cr_assert(t, "%s", e.msg);
    double with_T = ast_trainer_val_loss(t);
    ast_trainer_free(t);
    f.tc.val_at_T = 0;
    t = ast_trainer_new(m, &f.d, f.sp, &f.tc, train_tmp_dir("valT"), NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_assert_neq(ast_trainer_val_loss(t), with_T, "the t = T term enters the validation loss");
    ast_trainer_free(t);
    ast_model_free(m);
    train_setup_close(&f);

    const char *const parity[] = {"reference_parity=true", NULL};
    train_setup_open(&f, tiny_yaml, parity);
    cr_assert_eq(ast_trainer_val_times(&f.tc, times), 2, "the reference validates below T");
    cr_assert_eq(f.tc.select_on, AST_SELECT_LOSS, "and selects on the loss");
    train_setup_close(&f);
}

/* The recipe's auto keys settle with the held-out cells: whole slices, one
 * per step and no prior for scattered cells; patches and the Isomap base
 * for held-out regions; the reference's patches and no prior under parity;
 * values written in the config are kept. */
static void recipe(const char *yaml, ast_split_kind kind, const char *sets, int set_size, int batch, const char *prior)
{
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string(yaml, "recipe.yaml", &e);
    cr_assert(cfg, "%s", e.msg);
    cr_assert_eq(ast_train_resolve_recipe(cfg, kind, &e), 0, "%s", e.msg);
    cr_assert_str_eq(ast_cfg_str(cfg, "data.train_sets"), sets, "%s", ast_split_kind_name(kind));
    cr_assert_eq(ast_cfg_int(cfg, "data.set_size"), set_size, "%s", ast_split_kind_name(kind));
    cr_assert_eq(ast_cfg_int(cfg, "training.batch_size"), batch, "%s", ast_split_kind_name(kind));
    cr_assert_str_eq(ast_cfg_str(cfg, "model.prior"), prior, "%s", ast_split_kind_name(kind));
    ast_cfg_free(cfg);
}

Test(train, the_auto_recipe_follows_the_held_out_cells)
{
    const char *plain = "training_mode: expr_to_pos\ndata: {set_size: 128}\ntraining: {batch_size: 8}\n";
    recipe(plain, AST_SPLIT_RANDOM, "slices", 0, 1, "none");
    recipe(plain, AST_SPLIT_BLOCKS, "slices", 0, 1, "none");
    recipe(plain, AST_SPLIT_SLAB, "patches", 128, 8, "isomap");
    recipe(plain, AST_SPLIT_SECTIONS, "patches", 128, 8, "isomap");
    recipe(plain, AST_SPLIT_KEY, "patches", 128, 8, "none");
    const char *parity = "reference_parity: true\ntraining_mode: expr_to_pos\ndata: {set_size: 128}\n"
                         "training: {batch_size: 8}\n";
    recipe(parity, AST_SPLIT_RANDOM, "patches", 128, 8, "none");
    recipe(parity, AST_SPLIT_SLAB, "patches", 128, 8, "none");
    recipe("training_mode: pos_to_expr\ntraining: {batch_size: 8}\n", AST_SPLIT_SLAB, "patches", 64, 8, "none");
    recipe("training_mode: expr_to_pos\ndiffusion: {position_parameterisation: v}\ntraining: {batch_size: 8}\n",
           AST_SPLIT_SLAB, "patches", 64, 8, "none");
    recipe("data: {train_sets: patches}\nmodel: {prior: mds}\ntraining: {batch_size: 8}\n", AST_SPLIT_RANDOM, "patches",
           64, 8, "mds");
    recipe("data: {train_sets: slices}\nmodel: {prior: none}\n", AST_SPLIT_SLAB, "slices", 0, 1, "none");
}
