/* Loading configs, data and trained runs for alphast-run's commands. */
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/backend.h"
#include "eval/evaluate.h"
#include "io/safetensors.h"
#include "train/train.h"
#include "train/train_dist.h"
#include "cli.h"
#include "run_setup.h"

ast_cfg *cli_load_config(const char *path, const char **args, int n_args, ast_error *e)
{
    ast_cfg *cfg = ast_cfg_load_file(path, e);
    for (int i = 0; cfg && i < n_args; i++)
        if (ast_cfg_override(cfg, args[i], e) < 0) {
            ast_cfg_free(cfg);
            cfg = NULL;
        }
    return cfg;
}

int cli_check_device(const char *device, ast_error *e)
{
    ast_error why;
    if (!device || ast_backend_require(device, &why)) return 0;
    ast_error_set(e, "--device: %s", why.msg);
    return -1;
}

int cli_set_device(ast_cfg *cfg, const char *device, ast_error *e)
{
    if (!device) return 0;
    if (cli_check_device(device, e) < 0) return -1;
    char text[128];
    snprintf(text, sizeof text, "device=%s", device);
    return ast_cfg_override(cfg, text, e);
}

/* Relative data paths in a config are relative to the config's directory. */
static const char *config_relative(const char *cfg_path, const char *p, char *buf, size_t n)
{
    if (!p || p[0] == '/') return p;
    char *copy = ast_xstrdup(cfg_path);
    snprintf(buf, n, "%s/%s", dirname(copy), p);
    free(copy);
    return buf;
}

/* Sets a path key to the absolute form of `path`, as a single-quoted YAML scalar. */
static int set_absolute(ast_cfg *cfg, const char *key, const char *path, ast_error *e)
{
    char abs[PATH_MAX], yaml[2 * PATH_MAX + 3];
    if (!path || !realpath(path, abs)) return 0; /* reading it has already succeeded or reported */
    size_t n = 0;
    yaml[n++] = '\'';
    for (const char *c = abs; *c; c++) {
        if (*c == '\'') yaml[n++] = '\'';
        yaml[n++] = *c;
    }
    yaml[n++] = '\'';
    yaml[n] = 0;
    return ast_cfg_set(cfg, key, yaml, e);
}

int cli_load_data(ast_cfg *cfg, const char *cfg_path, const char *data_arg, ast_dataset *d, ast_split sp[3],
                  ast_error *e)
{
    char b1[4096], b2[4096];
    ast_data_opts o;
    ast_data_opts_from_cfg(cfg, &o);
    const char *path = data_arg ? data_arg : config_relative(cfg_path, ast_cfg_str(cfg, "data.path"), b1, sizeof b1);
    o.coords_file = config_relative(cfg_path, o.coords_file, b2, sizeof b2);
    if (!path) {
        ast_error_set(e, "%s: no dataset; set data.path or pass --data FILE", cfg_path);
        return -1;
    }
    const char *cache = ast_cfg_str(cfg, "data.cache_dir");
    char b3[4096];
    if (cache && !strcmp(cache, "auto")) cache = ast_data_default_cache_dir(b3, sizeof b3);
    if (ast_data_load(path, &o, cache, d, e) < 0) return -1;
    /* o's strings point into cfg, which set_absolute changes: read them first. */
    char coords[4096];
    snprintf(coords, sizeof coords, "%s", o.coords_file ? o.coords_file : "");
    if (set_absolute(cfg, "data.path", path, e) < 0 ||
        (coords[0] && set_absolute(cfg, "data.coords_file", coords, e) < 0))
        return -1;
    ast_split_opts so;
    if (ast_split_opts_from_cfg(cfg, &so, e) < 0 || ast_data_split_by(d, &so, sp, e) < 0) return -1;
    return ast_train_resolve_recipe(cfg, ast_split_resolve(d, &so), e);
}

const char *cli_weights_file(const char *dir, char *buf, size_t n, ast_error *e)
{
    snprintf(buf, n, "%s/best.safetensors", dir);
    if (!access(buf, F_OK)) return buf;
    snprintf(buf, n, "%s/checkpoint.safetensors", dir);
    if (!access(buf, F_OK)) return buf;
    ast_error_set(e, "%s: no best.safetensors or checkpoint.safetensors; train into this directory first "
                  "(alphast-run train --out %s)", dir, dir);
    return NULL;
}

/* Not strict: the files also hold the mask tokens of masked training
 * (never used when sampling), the checkpoint also the AdamW state.
 * Buffers (the MoE's balance: bias selection bias) load with the
 * weights; a file written before alphast saved them leaves them zero. */
static int load_weights(ast_model *m, const char *path, ast_error *e)
{
    return path ? ast_params_load(ast_model_params(m), path, 0, e) : -1;
}

int cli_load_weights(ast_model *m, const char *dir, ast_error *e)
{
    char path[4096];
    return load_weights(m, cli_weights_file(dir, path, sizeof path, e), e);
}

int cli_run_open(cli_run *r, const char *dir, const char **args, int n_args, const char *device, ast_error *e)
{
    memset(r, 0, sizeof *r);
    snprintf(r->cfg_path, sizeof r->cfg_path, "%s/config.yaml", dir);
    if (access(r->cfg_path, F_OK)) {
        ast_error_set(e, "%s: not a run directory (no config.yaml); pass the --out DIR of alphast-run train", dir);
        return -1;
    }
    if (!(r->cfg = cli_load_config(r->cfg_path, args, n_args, e)) || cli_set_device(r->cfg, device, e) < 0 ||
        cli_load_data(r->cfg, r->cfg_path, NULL, &r->d, r->sp, e) < 0 ||
        ast_cfg_model(r->cfg, r->d.n_genes, &r->mc, e) < 0 || (ast_model_config_data_dims(&r->mc, r->d.coord_dims), 0) ||
        !(r->m = ast_model_new(&r->mc, (uint64_t)ast_cfg_int(r->cfg, "seed.value"), e)) || ast_model_place(r->m, e) < 0)
        return -1;
    return load_weights(r->m, cli_weights_file(dir, r->weights, sizeof r->weights, e), e);
}

void cli_run_close(cli_run *r)
{
    ast_model_free(r->m);
    ast_split_free(r->sp);
    ast_dataset_free(&r->d);
    ast_cfg_free(r->cfg);
    memset(r, 0, sizeof *r);
}

int cli_refuse_data(const char *cmd, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--data") || !strncmp(argv[i], "--data=", 7))
            return cli_usage_error(cmd, "--data: %s works on the run's own data and splits; to place the cells of "
                                   "another dataset use 'alphast-run predict RUN_DIR --data FILE --out FILE'", cmd);
    return CLI_CONTINUE;
}

static const char *const split_names[3] = {"train", "val", "test"};

int cli_split_parse(const char *name)
{
    for (int i = AST_SPLIT_VAL; i <= AST_SPLIT_TEST; i++)
        if (!strcmp(name, split_names[i])) return i;
    return -1;
}

const char *cli_split_name(int which) { return split_names[which]; }

ast_set_sampler cli_eval_sets(const ast_cfg *cfg, const ast_dataset *d, const ast_split sp[3], int which)
{
    int set_size = (int)ast_cfg_int(cfg, "data.set_size"), cap = (int)ast_cfg_int(cfg, "evaluation.max_set_size");
    /* The length unit is the training split's, exactly as ast_trainer_new
     * computes it (whole-slice sets are the same for any N from the largest slice up). */
    float scale = ast_data_position_scale(d, &sp[AST_SPLIT_TRAIN], ast_data_max_set_size(d, &sp[AST_SPLIT_TRAIN], set_size, cap),
                                          (uint64_t)ast_cfg_int(cfg, "seed.value"));
    return (ast_set_sampler){d, &sp[which], ast_data_max_set_size(d, &sp[which], set_size, cap), scale, 0, 0.0f};
}

float *cli_rows_as_read(ast_dataset *d, char *const *genes, int n_genes, const int64_t *rows, int64_t n,
                        ast_error *e)
{
    ast_data_opts align = {.genes = (const char *const *)genes, .n_genes = n_genes}; /* nothing else */
    if (ast_data_preprocess(d, &align, e) < 0) return NULL;
    float *x = ast_xmalloc((size_t)(n ? n : 1) * n_genes * sizeof *x);
    for (int64_t r = 0; r < n; r++) ast_data_row(d, rows ? rows[r] : r, x + r * n_genes);
    return x;
}

int cli_sampler_config(ast_cfg *cfg, const char *mode, const char *steps, ast_train_config *tc, ast_sampler_config *sc,
                       ast_error *e)
{
    if (ast_train_config_from_cfg(cfg, tc, e) < 0 || (steps && ast_cfg_set(cfg, "sampling.num_steps", steps, e) < 0))
        return -1;
    *sc = (ast_sampler_config){.mode = tc->mode, .num_steps = (int)ast_cfg_int(cfg, "sampling.num_steps"),
                               .seed = ast_eval_noise_seed((uint64_t)ast_cfg_int(cfg, "evaluation.seed"), 0), .pos_param = tc->pos_param,
                               .align = tc->loss.position_loss == AST_POS_LOSS_ALIGNED, .precision = tc->precision};
    ast_sample_return_parse(ast_cfg_str(cfg, "sampling.return"), &sc->ret); /* the schema's enum */
    if (mode) ast_mode_parse(mode, &sc->mode);
    return 0;
}

int cli_check_evaluation(const ast_cfg *cfg, const ast_dataset *d, ast_error *e)
{
    ast_eval_config ec;
    if (ast_eval_config_from_cfg(cfg, d, &ec, e) < 0) return -1;
    ast_eval_config_free(&ec);
    return 0;
}

int cli_val_scorer(const ast_cfg *cfg, const ast_dataset *d, const ast_split sp[3], ast_train_config *tc,
                   ast_val_scorer *v, ast_error *e)
{
    ast_eval_config ec;
    if (ast_eval_config_from_cfg(cfg, d, &ec, e) < 0) return -1;
    ast_set_sampler val = cli_eval_sets(cfg, d, sp, AST_SPLIT_VAL);
    ast_val_scorer_init(v, &val, &ec, tc->val_sample_steps);
    tc->val_score = ast_val_scorer_score, tc->val_score_ud = v, tc->val_score_name = ast_eval_primary_name(ec.mode);
    ast_eval_config_free(&ec);
    return 0;
}

int cli_evaluate(const ast_cfg *cfg, ast_model *m, const ast_dataset *d, const ast_split sp[3], int which,
                 const char *json_path, const char *placement_path, ast_error *e)
{
    ast_train_config tc;
    ast_eval_config ec;
    ast_schedule s;
    if (ast_train_config_from_cfg(cfg, &tc, e) < 0 || ast_eval_config_from_cfg(cfg, d, &ec, e) < 0) return -1;
    if (ast_schedule_init(&s, tc.diffusion_steps, tc.nu_expression, tc.nu_position, e) < 0) {
        ast_eval_config_free(&ec);
        return -1;
    }
    ast_set_sampler sets = cli_eval_sets(cfg, d, sp, which);
    ast_eval_report r;
    int rc = ast_evaluate(m, &s, &sets, &sp[AST_SPLIT_TRAIN], &ec, cli_split_name(which), &r, e);
    if (rc == 0 && ast_dist_rank() == 0) { /* the ranks of a training run over MPI sampled together: one reports */
        FILE *table = strcmp(json_path, "-") ? stdout : stderr; /* stdout is the JSON's */
        ast_eval_report_print(&r, table);
        rc = ast_eval_report_write_json(&r, json_path, e);
        if (rc == 0 && placement_path) rc = ast_eval_placement_write_csv(&r, d, placement_path, e);
        if (rc == 0 && table == stdout) printf("  written to %s\n", json_path);
    }
    ast_eval_report_free(&r);
    ast_schedule_free(&s);
    ast_eval_config_free(&ec);
    return rc;
}
