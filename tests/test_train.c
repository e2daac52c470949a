/* The training loop on the bundled data with a tiny model: exact resume,
 * the non-finite stop, and the run directory. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "io/safetensors.h"
#include "train/train.h"
#include "train_fixture.h"

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

/* Trains in dir (resuming if it holds a checkpoint); returns this
 * process's step losses, malloc'd, and their count. */
static double *train_in(const char *dir, int epochs, int64_t *n, ast_train_result *r)
{
    fixture f;
    fixture_open(&f, epochs);
    ast_error e = {""};
    ast_model *m = ast_model_new(&f.mc, f.tc.seed, &e);
    cr_assert(m, "%s", e.msg);
    ast_trainer *t = ast_trainer_new(m, &f.d, f.sp, &f.tc, dir, NULL, &e);
    cr_assert(t, "%s", e.msg);
    cr_assert(ast_trainer_resume(t, &e) >= 0, "%s", e.msg);
    cr_assert(ast_trainer_run(t, r, &e) == 0, "%s", e.msg);
    *n = ast_trainer_n_losses(t);
    double *losses = malloc((size_t)*n * sizeof *losses);
    memcpy(losses, ast_trainer_losses(t), (size_t)*n * sizeof *losses);
    ast_trainer_free(t);
    ast_model_free(m);
    train_setup_close(&f);
    return losses;
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
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s missing", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = calloc((size_t)n + 1, 1);
    cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
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
    s->metrics = slurp(dir, "metrics.jsonl");
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
