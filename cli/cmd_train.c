/* `alphast-run train [--config FILE] [KEY=VALUE ...]`: trains a model on a
 * dataset and writes a run directory; re-running continues from its
 * checkpoint. */
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic_file.h"
#include "config/config.h"
#include "plugin/loader.h"
#include "sweep/sweep.h"
#include "train/schedule_table.h"
#include "train/train.h"
#include "train/train_dist.h"
#include "train/train_stop.h"
#include "cli.h"
#include "commands.h"
#include "run_setup.h"

enum { OPT_CONFIG, OPT_DATA, OPT_OUT, OPT_DEVICE, OPT_FRESH, OPT_QUIET, OPT_SCHEDULE, OPT_TRUST, OPT_CFG, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_CONFIG] = {"config", 'c', "FILE", "run configuration (default: the bundled configs/starmap.yaml)"},
    [OPT_DATA] = {"data", 'd', "FILE", "dataset, .h5ad or CSV/TSV (default: the config's data.path)"},
    [OPT_OUT] = {"out", 'o', "DIR", "run directory (default: runs/<config name>)"},
    [OPT_DEVICE] = CLI_DEVICE_OPTION,
    [OPT_FRESH] = {"fresh", 0, NULL, "start over even if DIR holds a checkpoint"},
    [OPT_QUIET] = {"quiet", 'q', NULL, "no progress bar"},
    [OPT_SCHEDULE] = {"schedule", 0, "SCRIPT:RUN", "the Lua schedules of run RUN of a sweep script, or the table FILE.safetensors a sweep wrote (docs/sweeps.md)"},
    [OPT_TRUST] = {"trust-script", 0, NULL, "evaluate the --schedule script with Lua's full standard library"},
    [OPT_CFG] = {"cfg", 0, NULL, "print the resolved config (YAML: the file with the overrides) and exit"},
};

static const cli_spec spec = {
    .name = "train",
    .usage = "[--config FILE] [--data FILE] [--out DIR] [--device NAME] [--fresh] [--schedule SCRIPT:RUN [--trust-script]]\n"
             "                         [--cfg] [KEY=VALUE | +KEY=VALUE | ++KEY=VALUE | ~KEY ...]",
    .about = "Trains AlphaSTomics on a spatial transcriptomics dataset: neighbourhood sets of\n"
             "cells, diffusion on expression and/or positions (training_mode), AdamW.\n"
             "Overrides change the config in Hydra's grammar (docs/config.md): KEY=VALUE sets\n"
             "(training.epochs=5, attention=gated, data.loading={rotation:false} merges),\n"
             "+KEY=VALUE adds a key the config leaves out, ++KEY=VALUE adds or sets, ~KEY deletes.\n"
             "The run directory gets config.yaml, metrics.jsonl, checkpoint.safetensors,\n"
             "best.safetensors, summary.json, plugins.json (each plugin's version, file and\n"
             "SHA-256) and TensorBoard's events.out.tfevents.* (logging.logger); running\n"
             "again resumes from the checkpoint.\n"
             "Afterwards the best weights are evaluated on the held-out test cells next to the\n"
             "baselines (eval.json; see alphast-run eval), unless evaluation.after_train=false.\n"
             "Started by mpirun -np R (or srun) in a build configured --with-mpi, R processes\n"
             "train the one run together, each on its share of every batch (docs/cluster.md).\n"
             "--device cuda (or device: cuda) trains on a GPU (docs/gpu.md).",
    .options = options,
    .n_options = N_OPTS,
    .max_args = CLI_MAX_OVERRIDES,
};

/* --schedule FILE.safetensors: the table `alphast-run sweep` wrote into
 * the run directory, so the sweep script is never evaluated again here. */
static int load_schedule_table(const char *path, ast_train_config *tc, ast_schedule_table *table, ast_error *e)
{
    if (ast_schedule_table_load(table, path, e) < 0) return -1;
    tc->schedule = ast_schedule_table_lookup;
    tc->schedule_ud = table;
    return 0;
}

/* --schedule SCRIPT:RUN -> the sweep script with RUN's schedule bound to
 * tc, for a run started by hand. The schedule's functions are closures of
 * the script, so this process evaluates it, within the same limits as the
 * sweep (restricted unless trusted). */
static int load_schedule(const char *arg, int trust, ast_train_config *tc, ast_schedule_table *table, ast_sweep **out,
                         ast_error *e)
{
    size_t n = strlen(arg);
    if (n > 12 && !strcmp(arg + n - 12, ".safetensors")) return load_schedule_table(arg, tc, table, e);
    const char *colon = strrchr(arg, ':');
    if (!colon || colon == arg || !colon[1]) {
        ast_error_set(e, "--schedule %s: expected SCRIPT.lua:RUN (a run id that `alphast-run sweep --dry-run` lists) "
                         "or a schedule table FILE.safetensors", arg);
        return -1;
    }
    ast_sweep_limits limits;
    if (ast_sweep_limits_from_env(&limits, e) < 0) return -1;
    limits.trusted |= trust;
    char *script = ast_xstrdup(arg);
    script[colon - arg] = 0;
    *out = ast_sweep_load_limited(script, &limits, e);
    free(script);
    return *out ? ast_sweep_bind_schedule(*out, colon + 1, tc, e) : -1;
}

static void print_summary(const char *dir, const ast_train_result *r, const ast_train_config *tc, const ast_model *m)
{
    printf("\n%s: %lld steps in %d epochs, %.1f s (%.2f steps/s), stopped by %s\n", dir, (long long)r->steps, r->epochs,
           r->seconds, r->steps_per_second, r->stop_reason);
    printf("  validation loss: best %.5f (epoch %d), last %.5f; train loss %.5f\n", r->best_val, r->best_epoch + 1,
           r->last_val, r->last_train);
    if (tc->val_score)
        printf("  validation %s of sampled placements: %.4f at the best epoch (selected by %s), last %.4f\n",
               tc->val_score_name, r->best_score, tc->select_on == AST_SELECT_LOSS ? "the loss" : "it", r->last_score);
    printf("  parameters: %lld total, %lld active\n", (long long)ast_model_param_count(m),
           (long long)ast_model_active_param_count(m));
}

/* The held-out evaluation of the weights with the best validation loss,
 * which are restored first (the last epoch's may be worse), into
 * DIR/eval.json, and the placed cells into DIR/placement.csv for the
 * report's pictures. Skipped without a test split, or when the config says so. */
static int evaluate(const ast_cfg *cfg, ast_model *m, const ast_dataset *d, const ast_split sp[3], const char *dir,
                    ast_error *e)
{
    char json[4096 + 16], placement[4096 + 16]; /* dir is at most 4095 bytes */
    if (!ast_cfg_bool(cfg, "evaluation.after_train")) {
        if (ast_dist_rank() == 0)
            printf("  evaluation.after_train is false: evaluation skipped (alphast-run eval %s runs it)\n", dir);
        return 0;
    }
    if (sp[AST_SPLIT_TEST].n < 1) {
        if (ast_dist_rank() == 0) printf("  no test split (data.split_ratio.test is 0): evaluation skipped\n");
        return 0;
    }
    snprintf(json, sizeof json, "%s/eval.json", dir);
    snprintf(placement, sizeof placement, "%s/placement.csv", dir);
    ast_dist_barrier(); /* over MPI rank 0 wrote best.safetensors: every rank reads it once it is in place */
    return cli_load_weights(m, dir, e) < 0 ? -1 : cli_evaluate(cfg, m, d, sp, AST_SPLIT_TEST, json, placement, e);
}

/* DIR/plugins.json: the plugins this invocation runs, with their versions
 * and files' SHA-256, so a run made with a plugin built out of tree can be
 * traced to the exact file. */
static int write_plugins(const char *dir, ast_error *e)
{
    char path[4096 + 16]; /* dir is at most 4095 bytes */
    char *json = ast_plugins_provenance(e);
    snprintf(path, sizeof path, "%s/plugins.json", dir);
    int rc = json ? ast_atomic_write_bytes(path, json, strlen(json), e) : -1;
    free(json);
    return rc;
}

/* ", over R ranks, ..." for a run over MPI (train_dist.h), else "". */
static const char *ranks_note(const ast_train_config *tc, char *buf, size_t n)
{
    if (ast_dist_size() < 2) return "";
    snprintf(buf, n, ", over %d ranks (AdamW state %s)", ast_dist_size(),
             tc->sharding == AST_SHARD_ZERO1 ? "split, ZeRO-1" : "replicated");
    return buf;
}

/* The run's config: the file, the overrides and --device. NULL with e set,
 * or with *done = 1 when there is nothing to run (--cfg prints it). */
static ast_cfg *train_config(const char **v, const char *cfg_path, const char **args, int n_args, int *done,
                             ast_error *e)
{
    ast_cfg *cfg = cli_load_config(cfg_path, args, n_args, e);
    if (cfg && cli_set_device(cfg, v[OPT_DEVICE], e) < 0) {
        ast_cfg_free(cfg);
        cfg = NULL;
    }
    if (!cfg) return NULL;
    int unsupported = ast_cfg_check_supported(cfg, e) < 0;
    if (unsupported || v[OPT_CFG]) { /* --cfg: what the run would start from, and no run */
        *done = unsupported ? -1 : ast_cfg_dump(cfg, stdout, e) < 0 ? -1 : 1;
        ast_cfg_free(cfg);
        return NULL;
    }
    return cfg;
}

/* runs/<the config file's name without extension>. */
static void default_out_dir(const char *cfg_path, char *out, size_t n)
{
    char *copy = ast_xstrdup(cfg_path), *base = basename(copy), *dot = strrchr(base, '.');
    if (dot) *dot = 0;
    snprintf(out, n, "runs/%s", base);
    free(copy);
}

/* Preempted, or Ctrl-C, in the loop or after it (the last validation, the
 * summary): the work is saved, evaluation waits for the end. A signal
 * during the evaluation lets it finish: the run is then complete. */
static int stopped_by_signal(const char *dir, const ast_train_result *r)
{
    if (strcmp(r->stop_reason, "signal") && !ast_dist_any(ast_train_stop_signal())) return 0;
    int sig = ast_dist_max(ast_train_stop_signal()); /* the ranks stop together, perhaps for one's signal */
    if (ast_dist_rank() == 0)
        fprintf(stderr, "alphast: %s: stopped by signal %d (%s) after step %lld, checkpoint written; run the "
                "same command again to continue\n", dir, sig, strsignal(sig), (long long)r->steps);
    return 1;
}

static int train(const char **v, const char **args, int n_args, ast_error *e)
{
    char def[4096], out[4096], rank_words[96];
    const char *cfg_path = v[OPT_CONFIG] ? v[OPT_CONFIG] : ast_shipped_file("configs/starmap.yaml", def, sizeof def);
    int done_early = -1;
    ast_cfg *cfg = train_config(v, cfg_path, args, n_args, &done_early, e);
    if (!cfg) return done_early < 0 ? -1 : 0;
    ast_dataset d = {0};
    ast_split sp[3] = {{0}};
    ast_model_config mc;
    ast_train_config tc;
    ast_model *m = NULL;
    ast_trainer *t = NULL;
    char *yaml = NULL;
    ast_sweep *sweep = NULL;
    ast_schedule_table table = {0};
    ast_val_scorer scorer = {0};
    int rc = -1;
    if (cli_load_data(cfg, cfg_path, v[OPT_DATA], &d, sp, e) < 0 || cli_check_evaluation(cfg, &d, e) < 0 ||
        ast_cfg_model(cfg, d.n_genes, &mc, e) < 0 || (ast_model_config_data_dims(&mc, d.coord_dims), 0) ||
        ast_train_config_from_cfg(cfg, &tc, e) < 0 || !(m = ast_model_new(&mc, tc.seed, e)) || !(yaml = ast_cfg_dump_string(cfg, e)))
        goto done;
    tc.progress = !v[OPT_QUIET] && ast_dist_rank() == 0; /* one bar for the run, not one per rank */
    if (sp[AST_SPLIT_VAL].n > 0 && cli_val_scorer(cfg, &d, sp, &tc, &scorer, e) < 0) goto done;
    if (v[OPT_SCHEDULE] && load_schedule(v[OPT_SCHEDULE], v[OPT_TRUST] != NULL, &tc, &table, &sweep, e) < 0) goto done;
    if (!v[OPT_OUT]) default_out_dir(cfg_path, out, sizeof out);
    const char *dir = v[OPT_OUT] ? v[OPT_OUT] : out;
    /* Rank 0 writes metrics.jsonl, so it alone runs the monitors. */
    if (!(t = ast_trainer_new(m, &d, sp, &tc, dir, yaml, e)) ||
        (ast_dist_rank() == 0 && (ast_trainer_add_monitors(t, cfg, e) < 0 || write_plugins(dir, e) < 0)))
        goto done;
    int resumed = v[OPT_FRESH] ? 0 : ast_trainer_resume(t, e);
    if (resumed < 0) goto done;
    if (ast_dist_rank() == 0)
        fprintf(stderr, "alphast: %s %s: %lld cells x %d genes (%lld train, %lld validation), %s + %s, %s%s\n",
                resumed ? "resuming" : "training", dir, (long long)d.n_cells, d.n_genes, (long long)sp[0].n,
                (long long)sp[1].n, mc.attention, mc.ffn, ast_mode_name(tc.mode),
                ranks_note(&tc, rank_words, sizeof rank_words));
    ast_train_result r;
    if (ast_trainer_run(t, &r, e) < 0) goto done;
    if (stopped_by_signal(dir, &r)) {
        rc = AST_EXIT_PREEMPTED;
        goto done;
    }
    if (ast_dist_rank() == 0) print_summary(dir, &r, &tc, m);
    if (evaluate(cfg, m, &d, sp, dir, e) < 0) goto done;
    rc = 0;
done:
    ast_trainer_free(t);
    ast_val_scorer_free(&scorer);
    ast_model_free(m);
    ast_split_free(sp);
    ast_dataset_free(&d);
    free(yaml);
    ast_cfg_free(cfg);
    ast_sweep_free(sweep);
    ast_schedule_table_free(&table);
    return rc;
}

/* The error of one rank of several says which it is; then the run ends
 * (ast_dist_fail). */
static void fail_on_rank(const ast_error *e)
{
    if (ast_dist_size() > 1) {
        ast_error mine;
        ast_error_set(&mine, "rank %d of %d: %s", ast_dist_rank(), ast_dist_size(), e->msg);
        cli_fail(&mine);
    } else {
        cli_fail(e);
    }
    ast_dist_fail();
}

int cmd_train(int argc, char **argv)
{
    const char *v[N_OPTS], *args[CLI_MAX_OVERRIDES];
    int n_args;
    int rc = cli_parse(&spec, argc, argv, v, args, &n_args);
    if (rc != CLI_CONTINUE) return rc;
    ast_error e = {""};
    if (ast_dist_start(&e) < 0) return cli_fail(&e);
    ast_train_stop_catch(); /* the whole command, not only the loop: train_stop.h */
    rc = train(v, args, n_args, &e);
    ast_train_stop_release();
    if (rc < 0) {
        fail_on_rank(&e);
        return CLI_FAILED;
    }
    ast_dist_stop();
    return rc; /* CLI_OK, or AST_EXIT_PREEMPTED */
}
