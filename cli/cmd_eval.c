/* `alphast-run eval RUN_DIR`: the held-out evaluation of a trained run, as
 * at the end of `alphast-run train`, on the test or validation split. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "run_setup.h"

enum { OPT_SPLIT, OPT_STEPS, OPT_JSON, OPT_DEVICE, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_SPLIT] = {"split", 's', "test|val", "held-out cells to evaluate on (default test)"},
    [OPT_STEPS] = {"steps", 'n', "N", "sampling network evaluations (default: the config's sampling.num_steps)"},
    [OPT_JSON] = {"json", 'j', "FILE",
                  "the report (default RUN_DIR/eval.json, or eval_val.json); - = stdout, table to stderr"},
    [OPT_DEVICE] = CLI_DEVICE_OPTION,
};

static const cli_spec spec = {
    .name = "eval",
    .usage = "RUN_DIR [--split test|val] [--steps N] [--json FILE] [--device NAME] [KEY=VALUE ...]",
    .about = "Evaluates a trained run (RUN_DIR/config.yaml with best.safetensors, else the\n"
             "checkpoint) on held-out cells: places every held-out cell of each slice at once\n"
             "(sets split by expression alone; evaluation.protocol=oracle_neighbourhoods for\n"
             "the old true-position neighbourhoods), scores them (k-NN preservation at 5/10/20,\n"
             "distance-row Spearman, aligned RMSD, k-NN graph F1, distance correlations,\n"
             "Procrustes, Moran's I; expression metrics when expression is generated), scores\n"
             "the baselines (random, expression MDS and Isomap, kNN and MLP regression) on the\n"
             "same cells, and reports the uncertainty of evaluation.noise_seeds samples per set\n"
             "(spread/skill, energy score, coverage) and the score by step count. Cells, sets and\n"
             "noise come from evaluation.seed. KEY=VALUE overrides sampling.* and evaluation.*\n"
             "keys (evaluation.max_set_size=256, sampling.return=z0). See docs/evaluation.md.\n"
             "The dataset is the one the run trained on: config.yaml's data.path (the config's,\n"
             "or train's --data FILE, written there as an absolute path).\n"
             "The placed cells go beside the report: RUN_DIR/placement.csv (placement_val.csv\n"
             "for --split val), or STEM.placement.csv for --json STEM.json; with --json - to\n"
             "RUN_DIR as by default. A pos_to_expr run places no cells and writes none.\n"
             "--device cuda samples on a GPU (docs/gpu.md).",
    .options = options,
    .n_options = N_OPTS,
    .max_args = 1 + CLI_MAX_OVERRIDES,
};

/* Where the placed cells go: beside a report given as FILE, its
 * extension (if any) replaced by .placement.csv, so two reports never
 * share one; else (the default report, or stdout) in the run directory,
 * where training writes them. */
static void placement_path(const char *json, const char *dir, int which, char *buf, size_t n)
{
    if (!json || !strcmp(json, "-")) {
        snprintf(buf, n, "%s/%s", dir, which == AST_SPLIT_TEST ? "placement.csv" : "placement_val.csv");
        return;
    }
    const char *name = strrchr(json, '/') ? strrchr(json, '/') + 1 : json, *dot = strrchr(name, '.');
    size_t stem = dot && dot != name ? (size_t)(dot - json) : strlen(json); /* .json alone is a name */
    snprintf(buf, n, "%.*s.placement.csv", (int)stem, json);
}

static int eval(const char **v, const char **args, int n_args, ast_error *e)
{
    int which = v[OPT_SPLIT] ? cli_split_parse(v[OPT_SPLIT]) : AST_SPLIT_TEST;
    cli_run r;
    char json[4096], placement[4096 + 32];
    int rc = cli_run_open(&r, args[0], args + 1, n_args - 1, v[OPT_DEVICE], e);
    if (rc == 0 && v[OPT_STEPS]) rc = ast_cfg_set(r.cfg, "sampling.num_steps", v[OPT_STEPS], e);
    if (rc == 0) {
        snprintf(json, sizeof json, "%s/%s", args[0], which == AST_SPLIT_TEST ? "eval.json" : "eval_val.json");
        placement_path(v[OPT_JSON], args[0], which, placement, sizeof placement);
        rc = cli_evaluate(r.cfg, r.m, &r.d, r.sp, which, v[OPT_JSON] ? v[OPT_JSON] : json, placement, e);
    }
    cli_run_close(&r);
    return rc < 0 ? cli_fail(e) : CLI_OK;
}

int cmd_eval(int argc, char **argv)
{
    const char *v[N_OPTS], *args[1 + CLI_MAX_OVERRIDES];
    int n_args;
    int rc = cli_refuse_data("eval", argc, argv);
    if (rc == CLI_CONTINUE) rc = cli_parse(&spec, argc, argv, v, args, &n_args);
    if (rc != CLI_CONTINUE) return rc;
    if (n_args < 1) return cli_usage_error("eval", "missing RUN_DIR");
    if (v[OPT_SPLIT] && cli_split_parse(v[OPT_SPLIT]) < 0)
        return cli_usage_error("eval", "--split must be test or val (got '%s')", v[OPT_SPLIT]);
    ast_error e = {""};
    return eval(v, args, n_args, &e);
}
