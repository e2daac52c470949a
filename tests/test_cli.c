/* alphast-run as a user calls it: exit statuses, --help, --version, the
 * plugin listing and the one-line usage errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alphast/plugin.h"

#define FIXTURES ALPHAST_BUILD_DIR "/tests/plugins"

typedef struct run_result {
    int status;
    char out[16384]; /* stdout */
    char err[4096];  /* stderr */
} run_result;

static void slurp(const char *path, char *buf, size_t n)
{
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(buf, 1, n - 1, f) : 0;
    buf[got] = '\0';
    if (f) fclose(f);
}

/* Runs alphast-run with args and the given plugin path, stdout and
 * stderr kept apart. */
static run_result *run_in(const char *plugin_path, const char *args)
{
    static run_result r;
    char cmd[4096], out[] = "/tmp/alphast-cli-out-XXXXXX", err[] = "/tmp/alphast-cli-err-XXXXXX";
    close(mkstemp(out));
    close(mkstemp(err));
    snprintf(cmd, sizeof cmd, "ALPHAST_PLUGIN_PATH=%s %s/alphast-run %s >%s 2>%s", plugin_path, ALPHAST_BUILD_DIR, args,
             out, err);
    int st = system(cmd);
    cr_assert(WIFEXITED(st), "%s did not exit", cmd);
    r.status = WEXITSTATUS(st);
    slurp(out, r.out, sizeof r.out);
    slurp(err, r.err, sizeof r.err);
    remove(out);
    remove(err);
    return &r;
}

static run_result *run(const char *args) { return run_in(FIXTURES, args); }

#define assert_has(text, part) cr_assert(strstr((text), (part)), "'%s' not in: %s", (part), (text))

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* A usage error is two lines on stderr: the error, then the --help hint. */
static void assert_usage_error(const run_result *r, const char *msg, const char *hint)
{
    cr_assert_eq(r->status, 2, "exit %d: %s", r->status, r->err);
    assert_has(r->err, msg);
    assert_has(r->err, hint);
    cr_assert_eq(lines(r->err), 2, "%s", r->err);
    cr_assert_str_empty(r->out);
}

Test(cli, help_lists_commands_and_options)
{
    run_result *r = run("--help");
    cr_assert_eq(r->status, 0);
    assert_has(r->out, "Usage: alphast-run");
    assert_has(r->out, "--list-plugins");
    assert_has(r->out, "  plugins ");
    assert_has(r->out, "  ALPHAST_BUILD_DIR    a build tree");
}

Test(cli, every_command_has_help)
{
    run_result *r = run("plugins --help");
    cr_assert_eq(r->status, 0);
    assert_has(r->out, "Usage: alphast-run plugins [--kind KIND]");
    assert_has(r->out, "-k, --kind KIND");
}

/* --data is train's; eval and sample, which read the dataset again, say
 * which one: the run's, as train's --data or the config gave it. */
Test(cli, every_command_reading_the_dataset_says_where_it_comes_from)
{
    run_result *r = run("train --help");
    cr_assert_eq(r->status, 0);
    assert_has(r->out, "-d, --data FILE");
    static const char *const readers[] = {"eval --help", "sample --help"};
    for (int i = 0; i < 2; i++) {
        r = run(readers[i]);
        cr_assert_eq(r->status, 0);
        assert_has(r->out, "config.yaml's data.path (the config's,\nor train's --data FILE");
    }
}

Test(cli, version_names_the_abi)
{
    char want[128];
    snprintf(want, sizeof want, "alphast-run %s (plugin ABI %d.%d)\n", PACKAGE_VERSION, AST_ABI_MAJOR, AST_ABI_MINOR);
    run_result *r = run("--version");
    cr_assert_eq(r->status, 0);
    cr_assert_str_eq(r->out, want);
}

Test(cli, list_plugins_shows_options_aligned)
{
    run_result *r = run("--list-plugins");
    cr_assert_eq(r->status, 0, "%s", r->err);
    assert_has(r->out, "attention plugins (search path " ALPHAST_BUILD_DIR "/tests/plugins:");
    assert_has(r->out, "  fixture 1.2.3: loader test fixture: copies its input\n");
    assert_has(r->out, "attn_fixture.so\n");
    /* Column widths come from the longest entry: learning_rate, elementwise
     * and headwise|elementwise|none. */
    assert_has(r->out, "    option         type    default      allowed                    meaning\n");
    assert_has(r->out, "    heads          int     4            [1, 64]                    an integer in [1, 64]\n");
    assert_has(r->out, "    gate           enum    elementwise  headwise|elementwise|none  one of three choices\n");
    assert_has(r->out, "    scale          float   -2.5         any ");
    assert_has(r->out, "  legacy 0.1: descriptor of the smallest size\n");
    assert_has(r->err, "warning: attention plugin 'badabi'");
    cr_assert_null(strstr(r->out, "badabi"), "a broken plugin was listed");
}

Test(cli, plugins_filters_by_kind)
{
    run_result *r = run("plugins --kind=monitor");
    cr_assert_eq(r->status, 0, "%s", r->err);
    assert_has(r->out, "legacy");
    cr_assert_null(strstr(r->out, "fixture"));
    assert_usage_error(run("plugins -k atention"), "alphast-run plugins: --kind must be attention, ffn or monitor, not 'atention'",
                       "Try 'alphast-run plugins --help'");
}

Test(cli, unknown_command_suggests)
{
    assert_usage_error(run("plugns"), "alphast-run: unknown command 'plugns' (did you mean 'plugins'?)",
                       "Try 'alphast-run --help'");
}

Test(cli, unknown_flags)
{
    assert_usage_error(run("--frobnicate"), "alphast-run: unknown option '--frobnicate'", "Try 'alphast-run --help'");
    assert_usage_error(run("plugins --knd ffn"), "alphast-run plugins: unknown option '--knd' (did you mean '--kind'?)",
                       "Try 'alphast-run plugins --help'");
    assert_usage_error(run("plugins --kind"), "option '--kind' needs a value (KIND)", "plugins --help");
    assert_usage_error(run("plugins extra"), "unexpected argument 'extra'", "plugins --help");
    /* the option of predict, where sample and eval would be tried first */
    assert_usage_error(run("sample runs/x --data new.h5ad --out x.csv"),
                       "alphast-run sample: --data: sample works on the run's own data and splits; to place the cells "
                       "of another dataset use 'alphast-run predict RUN_DIR --data FILE --out FILE'", "sample --help");
    assert_usage_error(run("eval runs/x --data=new.h5ad"), "alphast-run eval: --data: eval works", "eval --help");
}

Test(cli, no_command_is_a_usage_error)
{
    assert_usage_error(run(""), "alphast-run: no command given", "Try 'alphast-run --help'");
}

Test(cli, bad_plugin_path_fails_with_one_line)
{
    run_result *r = run_in("/nonexistent", "plugins");
    cr_assert_eq(r->status, 1);
    cr_assert_str_eq(r->err, "alphast-run: ALPHAST_PLUGIN_PATH: '/nonexistent' is not a directory; "
                             "set it to a colon-separated list of plugin directories\n");
    cr_assert_str_empty(r->out);
}

/* Hostile configs and overrides: one line naming the place, exit status 1,
 * no crash (30,000 levels used to overflow the stack; a key that is not
 * UTF-8 made the dumper free twice). */
Test(cli, hostile_configs_and_overrides_fail_with_one_located_line)
{
    run_result *r = run("train --config " ALPHAST_SOURCE_DIR "/tests/data/config_bad/deep_nesting_30000.yaml");
    cr_assert_eq(r->status, 1, "%s", r->err);
    assert_has(r->err, "deep_nesting_30000.yaml:1:67: nesting deeper than 64 levels; ");
    cr_assert_eq(lines(r->err), 1, "%s", r->err);
    r = run("train --config " ALPHAST_SOURCE_DIR "/tests/data/sweeps/tiny.yaml 'attention.gat\x93\xa0pe=x'");
    cr_assert_eq(r->status, 1, "%s", r->err);
    cr_assert_str_eq(r->err, "alphast-run: override:1:14: attention.gat\\x93\\xa0pe: the key path is not valid UTF-8 "
                             "text (byte 0x93 at column 14); write key names in UTF-8 without control characters\n");
}

Test(cli, sweep_and_train_offer_the_trust_opt_in)
{
    assert_has(run("sweep --help")->out, "--trust-script");
    assert_has(run("train --help")->out, "--trust-script");
}

/* ---- Hydra's override grammar and --cfg (docs/config.md) ------------------------ */

#define TINY ALPHAST_SOURCE_DIR "/tests/data/sweeps/tiny.yaml"

Test(cli, cfg_prints_the_config_with_every_form_of_override_and_runs_nothing)
{
    run_result *r = run("train --cfg --config " TINY " training.epochs=3 +training.patience=4 ++seed.value=9 "
                        "'+monitors=[grad_norm]' '~ffn' 'data.loading={rotation:false}' '~attention=linear'");
    cr_assert_eq(r->status, 0, "%s", r->err);
    cr_assert_str_empty(r->err);
    assert_has(r->out, "  epochs: 3\n");
    assert_has(r->out, "  patience: 4\n");
    assert_has(r->out, "seed:\n  value: 9\n");
    assert_has(r->out, "monitors:\n- grad_norm\n");
    assert_has(r->out, "  loading:\n    rotation: false\n");
    cr_assert_null(strstr(r->out, "ffn:"), "~ffn deleted it:\n%s", r->out);
    cr_assert_null(strstr(r->out, "attention:"), "~attention=linear deleted it:\n%s", r->out);
    cr_assert_null(strstr(r->out, "alphast:"), "nothing was trained:\n%s", r->out);
}

Test(cli, overrides_fail_with_the_override_s_column)
{
    run_result *r = run("train --cfg --config " TINY " +training.epochs=3");
    cr_assert_eq(r->status, 1);
    cr_assert_str_eq(r->err, "alphast-run: override:1:2: training.epochs: the config already sets it ('2', at " TINY
                             ":9:56), and + only adds a key the config leaves out; write training.epochs=VALUE or "
                             "++training.epochs=VALUE to change it\n");
    r = run("train --cfg --config " TINY " training.epochs=1,2");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "alphast-run: override:1:17: training.epochs: '1,2' is a sweep (several values), which runs "
                       "with `alphast-run sweep -m`");
    r = run("train --cfg --config " TINY " '~training.patience'");
    cr_assert_eq(r->status, 1);
    cr_assert_str_eq(r->err, "alphast-run: override:1:2: training.patience: the config does not set it, so there is "
                             "nothing to delete (it is at its default, 10)\n");
}

/* The limit used to show as "unexpected argument" without a number. */
Test(cli, more_overrides_than_the_limit_name_the_limit)
{
    char args[2048];
    int n = snprintf(args, sizeof args, "train --cfg --config " TINY);
    for (int i = 1; i <= 64; i++) n += snprintf(args + n, sizeof args - (size_t)n, " seed.value=%d", i);
    run_result *r = run(args);
    cr_assert_eq(r->status, 0, "%s", r->err);
    assert_has(r->out, "seed:\n  value: 64\n");
    snprintf(args + n, sizeof args - (size_t)n, " seed.value=65");
    assert_usage_error(run(args), "alphast-run train: more than 64 overrides: 'seed.value=65' is one too many; put "
                                  "the settings in a config file instead", "Try 'alphast-run train --help'");
}

/* The reference's file loads and asks for bf16, which train takes (where
 * the machine cannot run it: train_refuses_bf16_where_it_cannot_run);
 * float16 it refuses, and wandb. */
Test(cli, train_refuses_keys_it_accepts_but_does_not_implement)
{
    run_result *r = run("train --cfg --config " ALPHAST_SOURCE_DIR "/tests/data/reference_config.yaml");
    cr_assert_eq(r->status, 0, "%s", r->err);
    r = run("train --cfg --config " ALPHAST_SOURCE_DIR "/tests/data/reference_config.yaml training.precision=16-mixed");
    cr_assert_eq(r->status, 1);
    cr_assert_str_eq(r->err, "alphast-run: override:1:20: training.precision: '16-mixed' is not supported: alphast "
                             "computes in float32, or with bf16 GEMMs (bf16-mixed) or a GPU's TF32 GEMMs (tf32); "
                             "it has no float16 mode: write training.precision: 32-true, bf16-mixed, tf32 or leave it "
                             "out\n");
    r = run("train --cfg --config " ALPHAST_SOURCE_DIR "/tests/data/reference_config.yaml training.precision=32-true");
    cr_assert_eq(r->status, 0, "%s", r->err);
    r = run("train --config " TINY " logging.logger=wandb");
    cr_assert_eq(r->status, 1);
    cr_assert_str_eq(r->err, "alphast-run: override:1:16: logging.logger: 'wandb' is not supported: alphast logs to "
                             "TensorBoard, not to Weights & Biases: write logging.logger: tensorboard (the default) or "
                             "none\n");
    r = run("train --config " TINY " distributed.num_nodes=2");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "override:1:23: distributed.num_nodes: '2' is not supported: alphast does not read "
                       "Lightning's distributed settings: one run over several processes is mpirun -np R");
}

/* bf16-mixed on a machine that cannot run it: here a CPU held below
 * AVX512-BF16 (ONEDNN_MAX_CPU_ISA), or a build without oneDNN. The run
 * stops before training, at the value, saying why and what to write. */
Test(cli, train_refuses_bf16_where_it_cannot_run)
{
    setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE", 1);
    char out[64] = "/tmp/alphast-cli-bf16-XXXXXX", args[512];
    cr_assert_not_null(mkdtemp(out));
    snprintf(args, sizeof args, "train --config " TINY " --out %s training.precision=bf16-mixed", out);
    run_result *r = run(args);
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "alphast-run: override:1:20: training.precision: 'bf16-mixed' cannot run here: ");
#if AST_HAVE_ONEDNN
    assert_has(r->err, "this CPU has neither AVX512-BF16 nor AMX");
#else
    assert_has(r->err, "this alphast was built without oneDNN (install it with apt-get install libdnnl-dev");
#endif
    assert_has(r->err, "; train in float32 with training.precision: 32-true\n");
    snprintf(args, sizeof args, "%s/metrics.jsonl", out);
    cr_assert_neq(access(args, F_OK), 0, "a refused run wrote metrics");
    rmdir(out);
}

/* tf32 is a GPU's mode: on the CPU the run stops at the value, saying what to write. */
Test(cli, train_refuses_tf32_on_the_cpu)
{
    char out[64] = "/tmp/alphast-cli-tf32-XXXXXX", args[512];
    cr_assert_not_null(mkdtemp(out));
    snprintf(args, sizeof args, "train --config " TINY " --out %s --device cpu training.precision=tf32", out);
    run_result *r = run(args);
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "alphast-run: override:1:20: training.precision: 'tf32' is a GPU's mode (TF32 tensor "
                       "cores) and the run is on the CPU; train on a GPU (device: cuda) or in float32 with "
                       "training.precision: 32-true\n");
    snprintf(args, sizeof args, "%s/metrics.jsonl", out);
    cr_assert_neq(access(args, F_OK), 0, "a refused run wrote metrics");
    rmdir(out);
}

Test(cli, params_takes_overrides)
{
    run_result *r = run("params --genes 10 " TINY " 'ffn={name:moe,num_experts:2}' ~attention");
    cr_assert_eq(r->status, 0, "%s", r->err);
    assert_has(r->out, "attention linear, ffn moe");
    r = run("params " TINY " ffn.top_k=1,2");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "override:1:11: ffn.top_k: '1,2' is a sweep");
}
