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
