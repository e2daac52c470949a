/* What train, eval and sample share: a config with its overrides, the
 * dataset and splits it names, a run directory's model, and the held-out
 * evaluation. Functions return 0, or -1 with e set. */
#ifndef ALPHAST_CLI_RUN_SETUP_H
#define ALPHAST_CLI_RUN_SETUP_H

#include "config/config.h"
#include "data/data.h"
#include "eval/eval_val.h"
#include "eval/sample.h"
#include "model/model.h"
#include "train/train.h"

/* The config at path with KEY=VALUE overrides applied; NULL with e set. */
ast_cfg *cli_load_config(const char *path, const char **args, int n_args, ast_error *e);

/* --device NAME of train, eval, sample, forward and sweep. */
#define CLI_DEVICE_OPTION \
    {"device", 0, "NAME", "where the model runs: cpu, or cuda in a CUDA build (default: the config's device)"}
/* --device names a backend of this build: 0, or -1 with "--device: " and
 * ast_backend_require's one message (NULL: not given, fine). */
int cli_check_device(const char *device, ast_error *e);
/* --device NAME as the override device=NAME, after the others (so it wins);
 * nothing when device is NULL. -1 with e set when this build has no such
 * backend. */
int cli_set_device(ast_cfg *cfg, const char *device, ast_error *e);

/* Reads, preprocesses and splits the dataset the config names (relative
 * paths are relative to cfg_path's directory; data_arg, if not NULL,
 * replaces data.path). The paths used are written back into cfg as
 * absolute paths, so the config.yaml of a run directory finds the same
 * data from anywhere. The same config gives the same splits. */
int cli_load_data(ast_cfg *cfg, const char *cfg_path, const char *data_arg, ast_dataset *d, ast_split sp[3],
                  ast_error *e);

/* A trained run: RUN_DIR/config.yaml (with KEY=VALUE overrides), its data
 * and splits, and the model with RUN_DIR/best.safetensors (else
 * checkpoint.safetensors: `weights`) loaded. */
typedef struct cli_run {
    char cfg_path[4096];
    char weights[4096];
    ast_cfg *cfg;
    ast_dataset d;
    ast_split sp[3];
    ast_model_config mc;
    ast_model *m;
} cli_run;

/* device: --device NAME, or NULL for the config's. The model's parameters
 * are on its device when it returns 0. */
int cli_run_open(cli_run *r, const char *dir, const char **args, int n_args, const char *device, ast_error *e);
void cli_run_close(cli_run *r);

/* Loads RUN_DIR's best weights (the lowest validation loss), else its
 * last checkpoint, into m. */
int cli_load_weights(ast_model *m, const char *dir, ast_error *e);
/* The file cli_load_weights loads, into buf; NULL with e set if there is none. */
const char *cli_weights_file(const char *dir, char *buf, size_t n, ast_error *e);

/* The held-out evaluation of m on split `which` (AST_SPLIT_TEST/VAL) with
 * the config's sampling.* and evaluation.* keys: prints the table to
 * stdout and writes json_path; json_path "-" is stdout, and the table
 * goes to stderr then. placement_path, unless NULL, gets the placed cells
 * (ast_eval_placement_write_csv). */
int cli_evaluate(const ast_cfg *cfg, ast_model *m, const ast_dataset *d, const ast_split sp[3], int which,
                 const char *json_path, const char *placement_path, ast_error *e);

/* d, as read and not yet preprocessed, aligned to `genes` (absent ones
 * 0), and the dense rows[0..n) of its X ([n, n_genes], rows NULL: every
 * cell): the values the .h5ad of sample and predict store as X, not the
 * z-scores the model reads. NULL with e set. */
float *cli_rows_as_read(ast_dataset *d, char *const *genes, int n_genes, const int64_t *rows, int64_t n, ast_error *e);

/* The run's sampling settings (sampling.*, how its model's positions are
 * read, the noise of the placement eval scores: evaluation.seed's) with a
 * command's --mode and --steps (NULL: the config's); mode, if given, is
 * valid. */
int cli_sampler_config(ast_cfg *cfg, const char *mode, const char *steps, ast_train_config *tc, ast_sampler_config *sc,
                       ast_error *e);

/* Checks the config's evaluation keys against the data (before a long
 * training run that ends with an evaluation). */
int cli_check_evaluation(const ast_cfg *cfg, const ast_dataset *d, ast_error *e);

/* sample and eval work on a run's own data: --data in argv is a usage
 * error that points to `alphast-run predict`; else CLI_CONTINUE. */
int cli_refuse_data(const char *cmd, int argc, char **argv);

/* "test" or "val" to AST_SPLIT_*; -1 for anything else. */
int cli_split_parse(const char *name);
const char *cli_split_name(int which);

/* The sampler over split `which`, in the units training used. */
/* Sets tc->val_score to v's sampled validation score (eval/eval_val.h): the
 * val split's cells as the config's evaluation forms them, in the run's
 * length unit, sampled in tc->val_sample_steps steps. 0, or -1 with e set. */
int cli_val_scorer(const ast_cfg *cfg, const ast_dataset *d, const ast_split sp[3], ast_train_config *tc,
                   ast_val_scorer *v, ast_error *e);
ast_set_sampler cli_eval_sets(const ast_cfg *cfg, const ast_dataset *d, const ast_split sp[3], int which);

#endif
