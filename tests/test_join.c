/* Results that join back (issue 12 item 3), at the training loop: weights
 * and checkpoints say what they were trained on (genes, config, version),
 * training.init_from starts a run from saved weights (ours, a Lightning
 * state_dict's "model." names, with or without mask tokens) and refuses
 * other genes, resuming refuses a checkpoint of other genes, and every
 * line of metrics.jsonl has a kind and a wall-clock time. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "io/safetensors.h"
#include "train/train.h"
#include "train_fixture.h"

static const char *tiny_yaml =
    "training_mode: joint\n"
    "data: {set_size: 12, preprocessing: {position_key: spatial, cell_type_key: null}}\n"
    "diffusion: {diffusion_steps: 50}\n"
    "training: {learning_rate: 1e-3, batch_size: 2, epochs: 1, steps_per_epoch: 2, val_sets: 2,\n"
    "           val_t_points: 1, early_stopping: false}\n" TINY_MODEL_YAML;

/* A run in dir with the overrides (NULL-terminated), its config.yaml
 * written as `train` does. 0, or -1 with e set by the trainer. On success
 * *out is the trained model (free it), if out is not NULL. */
static int train(const char *dir, const char *const *overrides, ast_model **out, ast_error *e)
{
    train_setup f;
    train_setup_open(&f, tiny_yaml, overrides);
    ast_model *m = ast_model_new(&f.mc, f.tc.seed, e);
    cr_assert(m, "%s", e->msg);
    char *yaml = ast_cfg_dump_string(f.cfg, e);
    cr_assert(yaml, "%s", e->msg);
    ast_trainer *t = ast_trainer_new(m, &f.d, f.sp, &f.tc, dir, yaml, e);
    cr_assert(t, "%s", e->msg);
    cr_assert(ast_trainer_add_monitors(t, f.cfg, e) == 0, "%s", e->msg);
    ast_train_result r;
    int rc = ast_trainer_resume(t, e) < 0 || ast_trainer_run(t, &r, e) < 0 ? -1 : 0;
    ast_trainer_free(t);
    free(yaml);
    train_setup_close(&f);
    if (rc == 0 && out) *out = m;
    else ast_model_free(m);
    return rc;
}

static void train_ok(const char *dir, const char *const *overrides, ast_model **out)
{
    ast_error e = {""};
    cr_assert_eq(train(dir, overrides, out, &e), 0, "%s", e.msg);
}

static char *in_dir(const char *dir, const char *file)
{
    static char buf[4][512];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, file);
    return p;
}

/* src's tensors (names with `prefix` in front) and metadata (the gene list
 * replaced by `genes` unless NULL) into dst. */
static void rewrite(const char *src, const char *dst, const char *prefix, const char *genes)
{
    ast_error e = {""};
    ast_st_file *f = ast_st_open(src, &e);
    cr_assert(f, "%s", e.msg);
    ast_st_writer *w = ast_st_writer_new();
    char name[1024];
    for (int i = 0; i < ast_st_count(f); i++) {
        snprintf(name, sizeof name, "%s%s", prefix, ast_st_name(f, i));
        ast_st_writer_add(w, name, ast_st_dtype_of(f, i), ast_st_ndim(f, i), ast_st_shape(f, i), ast_st_data(f, i));
    }
    for (int i = 0; i < ast_st_metadata_count(f); i++) {
        const char *key = ast_st_metadata_key(f, i);
        ast_st_writer_metadata(w, key, genes && !strcmp(key, AST_META_GENES) ? genes : ast_st_metadata_value(f, i));
    }
    cr_assert_eq(ast_st_writer_write(w, dst, &e), 0, "%s", e.msg);
    ast_st_writer_free(w);
    ast_st_close(f);
}

/* Every parameter of a equals b's, bit for bit. */
static int same_weights(ast_model *a, ast_model *b)
{
    ast_params *p = ast_model_params(a), *q = ast_model_params(b);
    for (int i = 0; i < ast_params_count(p) && i < ast_params_count(q); i++) {
        const ast_tensor *x = ast_params_at(p, i), *y = ast_params_find(q, x->name);
        if (!y || x->size != y->size || memcmp(x->data, y->data, (size_t)x->size * sizeof(float))) return 0;
    }
    return 1;
}

/* A model of the tiny config with the weights of `path`. */
static ast_model *model_from(const char *path)
{
    train_setup f;
    train_setup_open(&f, tiny_yaml, NULL);
    ast_error e = {""};
    ast_model *m = ast_model_new(&f.mc, 1234, &e);
    cr_assert(m, "%s", e.msg);
    cr_assert_eq(ast_params_load(ast_model_params(m), path, 0, &e), 0, "%s", e.msg);
    train_setup_close(&f);
    return m;
}

Test(join, weights_and_checkpoints_say_what_they_were_trained_on, .timeout = 60)
{
    char *dir = train_tmp_dir("join");
    train_ok(dir, NULL, NULL);
    train_setup f;
    train_setup_open(&f, tiny_yaml, NULL);
    const char *files[2] = {"best.safetensors", "checkpoint.safetensors"};
    for (int k = 0; k < 2; k++) {
        ast_error e = {""};
        ast_st_file *st = ast_st_open(in_dir(dir, files[k]), &e);
        cr_assert(st, "%s", e.msg);
        cr_assert_str_eq(ast_st_metadata(st, AST_META_VERSION), PACKAGE_VERSION, "%s", files[k]);
        cr_assert_eq(ast_st_check_genes(st, (const char *const *)f.d.genes, f.d.n_genes, &e), 0, "%s", e.msg);
        cr_assert(strstr(ast_st_metadata(st, AST_META_GENES), "\"Gja1\""), "%s: the names themselves", files[k]);
        const char *config = ast_st_metadata(st, AST_META_CONFIG);
        cr_assert(config && strstr(config, "steps_per_epoch: 2"), "%s: the resolved config", files[k]);
        ast_st_close(st);
    }
    train_setup_close(&f);
}

/* pandas.read_json(lines=True) makes one table of metrics.jsonl only when
 * every line says what it is and when it was written. */
Test(join, every_metrics_line_has_a_kind_and_a_wall_clock_time, .timeout = 60)
{
    char *dir = train_tmp_dir("join");
    const char *const overrides[] = {"monitors=[{name: grad_norm, every: 1}]", NULL};
    double start = ast_wall_clock();
    train_ok(dir, overrides, NULL);
    double end = ast_wall_clock();
    FILE *f = fopen(in_dir(dir, "metrics.jsonl"), "r");
    cr_assert(f);
    char line[4096];
    int kinds[3] = {0};
    static const char *const names[3] = {"train", "epoch", "monitor"};
    while (fgets(line, sizeof line, f)) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *kind = cJSON_GetObjectItem(o, "kind"), *time = cJSON_GetObjectItem(o, "time");
        cr_assert(cJSON_IsString(kind), "no kind: %s", line);
        cr_assert(cJSON_IsNumber(time) && time->valuedouble >= start - 1 && time->valuedouble <= end + 1,
                  "no wall-clock time in [%.3f, %.3f]: %s", start, end, line);
        int k = ast_name_index(kind->valuestring, names, 3);
        cr_assert_geq(k, 0, "unknown kind: %s", line);
        kinds[k]++;
        cJSON_Delete(o);
    }
    fclose(f);
    cr_assert_eq(kinds[0], 2, "a line per step");
    cr_assert_eq(kinds[1], 1, "a line per epoch");
    cr_assert_gt(kinds[2], 0, "the monitor's lines");
}

Test(join, init_from_starts_from_the_saved_weights, .timeout = 120)
{
    char *a = train_tmp_dir("join"), best[512], lightning[512], init[600];
    train_ok(a, NULL, NULL);
    snprintf(best, sizeof best, "%s", in_dir(a, "best.safetensors"));
    ast_model *saved = model_from(best);
    /* the same file under Lightning's names */
    snprintf(lightning, sizeof lightning, "%s", in_dir(a, "lightning.safetensors"));
    rewrite(best, lightning, AST_LIGHTNING_PREFIX, NULL);
    /* A learning rate of 1e-30 leaves float32 weights as they start. */
    const char *const files[2] = {best, lightning};
    for (int k = 0; k < 2; k++) {
        snprintf(init, sizeof init, "training.init_from=%s", files[k]);
        const char *const overrides[] = {init, "training.learning_rate=1e-30", NULL};
        ast_model *m;
        train_ok(train_tmp_dir("join"), overrides, &m);
        cr_assert(same_weights(m, saved), "the run started from %s", files[k]);
        ast_model_free(m);
    }
    /* masked training adds mask tokens the file does not have: they start fresh */
    const char *const masked[] = {init, "training.learning_rate=1e-30", "masking.enable=true", NULL};
    ast_model *m;
    train_ok(train_tmp_dir("join"), masked, &m);
    cr_assert(same_weights(saved, m), "the model's weights came from the file");
    cr_assert(ast_params_find(ast_model_params(m), "masking_module.mask_token.expression_mask_token"));
    ast_model_free(m);
    /* without init_from the run starts elsewhere */
    const char *const fresh[] = {"training.learning_rate=1e-30", NULL};
    train_ok(train_tmp_dir("join"), fresh, &m);
    cr_assert_not(same_weights(m, saved));
    ast_model_free(m);
    ast_model_free(saved);
}

Test(join, init_from_refuses_other_genes_and_names_the_key, .timeout = 60)
{
    char *a = train_tmp_dir("join");
    train_ok(a, NULL, NULL);
    char other[512], init[600];
    snprintf(other, sizeof other, "%s", in_dir(a, "other.safetensors"));
    rewrite(in_dir(a, "best.safetensors"), other, "", "[\"Vip\"]");
    snprintf(init, sizeof init, "training.init_from=%s", other);
    const char *const overrides[] = {init, NULL};
    ast_error e = {""};
    cr_assert_eq(train(train_tmp_dir("join"), overrides, NULL, &e), -1);
    cr_assert(strstr(e.msg, "training.init_from: ") == e.msg && strstr(e.msg, "trained on 1 genes, the data has 28") &&
              strstr(e.msg, "gene 1 is 'Vip' there and 'Slc17a7' here"), "%s", e.msg);
    const char *const missing[] = {"training.init_from=/nonexistent/w.safetensors", NULL};
    cr_assert_eq(train(train_tmp_dir("join"), missing, NULL, &e), -1);
    cr_assert(strstr(e.msg, "training.init_from: /nonexistent/w.safetensors") == e.msg, "%s", e.msg);
}

Test(join, resuming_refuses_a_checkpoint_of_other_genes, .timeout = 60)
{
    char *dir = train_tmp_dir("join");
    train_ok(dir, NULL, NULL);
    char path[512];
    snprintf(path, sizeof path, "%s", in_dir(dir, "checkpoint.safetensors"));
    rewrite(path, in_dir(dir, "edited.safetensors"), "", "[\"Vip\"]");
    cr_assert_eq(rename(in_dir(dir, "edited.safetensors"), path), 0);
    const char *const more[] = {"training.epochs=2", NULL};
    ast_error e = {""};
    cr_assert_eq(train(dir, more, NULL, &e), -1);
    cr_assert(strstr(e.msg, path) == e.msg && strstr(e.msg, "gene 1 is 'Vip' there"), "%s", e.msg);
}
