/* Sweeps: the Lua API (runs of grid/list/random, stable ids, overrides,
 * script errors with tracebacks), schedules driving the trainer, claims,
 * and `alphast-run sweep` as a user runs it: failures, two runners on one
 * sweep, and a killed sweep that resumes only what is missing. The scripts
 * are the Lua files in tests/data/sweeps, over a tiny model (tiny.yaml). */
#define _XOPEN_SOURCE 700 /* posix_openpt; the build defines _DEFAULT_SOURCE */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "io/safetensors.h"
#include "sweep/ledger.h"
#include "sweep/sweep.h"
#include "train/schedule_table.h"
#include "test_files.h"

#define SCRIPTS ALPHAST_SOURCE_DIR "/tests/data/sweeps/"
#define CLI ALPHAST_BUILD_DIR "/alphast-run"

/* ---- helpers ----------------------------------------------------------- */

static ast_sweep *load(const char *script)
{
    ast_error e = {""};
    ast_sweep *s = ast_sweep_load(script, &e);
    cr_assert(s, "%s: %s", script, e.msg);
    return s;
}

static void load_fails(const char *script, ast_error *e)
{
    ast_sweep *s = ast_sweep_load(script, e);
    cr_assert_null(s, "%s loaded", script);
}

static void assert_has(const char *text, const char *part)
{
    cr_assert(text && strstr(text, part), "expected \"%s\" in:\n%s", part, text ? text : "(null)");
}


static char *tmp_dir(void)
{
    static char buf[8][64];
    static int i;
    char *d = buf[i++ % 8];
    strcpy(d, "/tmp/alphast-sweep-XXXXXX");
    cr_assert(mkdtemp(d));
    return d;
}

/* `alphast-run ARGS`, output in OUT_FILE; its exit status. */
static int cli(const char *args, const char *out_file)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s %s >%s 2>&1", CLI, args, out_file);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* cli() with PATH set to `path` only: programs the sweep looks for there are absent. */
static int cli_with_path(const char *path, const char *args, const char *out_file)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "PATH=%s %s %s >%s 2>&1", path, CLI, args, out_file);
    int status = system(cmd);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* `alphast-run ARGS...` with stderr on a terminal `width` columns wide
 * (a pty); what the terminal received, into out. */
static void cli_on_terminal(char *const argv[], int width, char *out, size_t n)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    cr_assert(master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0);
    int tty = open(ptsname(master), O_RDWR | O_NOCTTY);
    struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)width};
    cr_assert(tty >= 0 && ioctl(tty, TIOCSWINSZ, &ws) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("COLUMNS");
        dup2(tty, STDERR_FILENO);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    close(tty);
    size_t used = 0;
    int status = 0;
    /* Read while it runs: a full pty would block its writes. */
    for (;;) {
        struct pollfd p = {master, POLLIN, 0};
        ssize_t got = poll(&p, 1, 200) > 0 ? read(master, out + used, n - 1 - used) : 0;
        if (got > 0) used += (size_t)got;
        if (got <= 0 && waitpid(pid, &status, WNOHANG) == pid) break;
        cr_assert_lt(used, n - 1, "more output than expected");
    }
    out[used] = 0;
    close(master);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s", out);
}

static const char *run_path(char *buf, const char *dir, const ast_sweep_run *r, const char *file)
{
    snprintf(buf, 512, "%s/runs/%s/%s", dir, r->id, file);
    return buf;
}

static ast_ledger *ledger(const char *dir)
{
    ast_error e = {""};
    ast_ledger *l = ast_ledger_read(dir, &e);
    cr_assert(l, "%s", e.msg);
    return l;
}

static ast_run_state last_state(const ast_ledger *l, const char *run)
{
    ast_run_state st;
    cr_assert(ast_ledger_last(l, run, &st, NULL), "%s is not in the ledger", run);
    return st;
}

/* The train lines of a run's metrics.jsonl, as cJSON objects in order. */
static int train_lines(const char *path, cJSON **lines, int max)
{
    char *text = test_read_file(path), *save = NULL;
    cr_assert(text, "%s missing", path);
    int n = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        cr_assert(o, "%s: bad line %s", path, line);
        if (strcmp(cJSON_GetObjectItem(o, "kind")->valuestring, "train") || n == max) {
            cJSON_Delete(o);
            continue;
        }
        lines[n++] = o;
    }
    free(text);
    return n;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    cr_assert(cJSON_IsNumber(v), "no number '%s'", key);
    return v->valuedouble;
}

/* Every optimiser step of the run logged exactly once, in order. */
static void assert_steps_once(const char *dir, const ast_sweep_run *r, int steps)
{
    char path[512];
    cJSON *lines[256];
    int n = train_lines(run_path(path, dir, r, "metrics.jsonl"), lines, 256);
    cr_assert_eq(n, steps, "%s: %d train lines, want %d", r->id, n, steps);
    for (int i = 0; i < n; i++) {
        cr_assert_eq((int)num(lines[i], "step"), i + 1, "%s: line %d", r->id, i);
        cJSON_Delete(lines[i]);
    }
}

static ast_cfg *resolved(const ast_sweep_run *r)
{
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_string(r->yaml, r->id, &e);
    cr_assert(cfg, "%s", e.msg);
    return cfg;
}

static const char *value(const ast_cfg *cfg, const char *path)
{
    const ast_cfg_node *n = ast_cfg_get(cfg, path);
    cr_assert(n && n->value, "%s not set", path);
    return n->value;
}

/* ---- the Lua API ----------------------------------------------------------- */

Test(sweep, fnv1a_matches_the_published_test_vectors)
{
    cr_assert_eq(ast_fnv1a(AST_FNV_OFFSET, "", 0), 0xcbf29ce484222325ull);
    cr_assert_eq(ast_fnv1a(AST_FNV_OFFSET, "a", 1), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(ast_fnv1a(AST_FNV_OFFSET, "foobar", 6), 0x85944171f73967e8ull);
}

Test(sweep, ablation_is_every_config_with_every_seed)
{
    ast_sweep *s = load(SCRIPTS "ablation.lua");
    static const char *const names[] = {"Baseline", "Both", "Gated", "MoE"};
    cr_assert_str_eq(s->name, "ablation");
    cr_assert_eq(s->n_runs, 8);
    for (int i = 0; i < 8; i++) {
        const ast_sweep_run *r = &s->runs[i];
        char id[128], seed[32];
        snprintf(id, sizeof id, "%s-%016llx", names[i / 2], (unsigned long long)r->hash);
        snprintf(seed, sizeof seed, "seed.value=%d", 1 + i % 2);
        cr_assert_str_eq(r->config_name, names[i / 2]);
        cr_assert_eq(r->seed, 1 + i % 2);
        cr_assert_str_eq(r->id, id);
        cr_assert_eq(r->hash, ast_fnv1a(AST_FNV_OFFSET, r->yaml, strlen(r->yaml)), "no schedule: the YAML's hash");
        cr_assert_str_eq(r->overrides[r->n_overrides - 1], seed, "the seed is the last override");
        cr_assert_eq(r->scheduled, 0);
        ast_cfg *cfg = resolved(r);
        cr_assert_eq(ast_cfg_int(cfg, "seed.value"), r->seed);
        const char *ffn = ast_cfg_get(cfg, "ffn.name") ? value(cfg, "ffn.name") : value(cfg, "ffn");
        cr_assert_str_eq(value(cfg, "attention"), i / 2 == 1 || i / 2 == 2 ? "gated" : "linear");
        cr_assert_str_eq(ffn, i / 2 == 1 || i / 2 == 3 ? "moe" : "dense");
        ast_cfg_free(cfg);
    }
    ast_sweep_free(s);
}

Test(sweep, ids_are_the_same_on_every_evaluation)
{
    static const char *const scripts[] = {SCRIPTS "ablation.lua", SCRIPTS "random.lua", SCRIPTS "schedule.lua"};
    for (int k = 0; k < 3; k++) {
        ast_sweep *a = load(scripts[k]), *b = load(scripts[k]);
        cr_assert_eq(a->n_runs, b->n_runs);
        for (int i = 0; i < a->n_runs; i++) {
            cr_assert_str_eq(a->runs[i].id, b->runs[i].id);
            for (int j = 0; j < i; j++) cr_assert_str_neq(a->runs[i].id, a->runs[j].id);
        }
        ast_sweep_free(a);
        ast_sweep_free(b);
    }
}

Test(sweep, grid_crosses_every_value_with_the_last_key_fastest)
{
    ast_sweep *s = load(SCRIPTS "grid.lua");
    static const char *const names[] = {
        "attention=linear,epochs=1", "attention=linear,epochs=2", "attention=linear,epochs=3",
        "attention=gated,epochs=1",  "attention=gated,epochs=2",  "attention=gated,epochs=3",
        "hydra:attention=linear,ffn={name: moe, num_experts: 2}", "hydra:attention=linear,ffn=dense",
        "hydra:attention=gated,ffn={name: moe, num_experts: 2}",  "hydra:attention=gated,ffn=dense",
    };
    cr_assert_eq(s->n_runs, 10);
    for (int i = 0; i < 10; i++) {
        cr_assert_str_eq(s->runs[i].config_name, names[i]);
        ast_cfg *cfg = resolved(&s->runs[i]);
        if (i < 6) cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 1 + i % 3);
        if (i >= 6 && i % 2 == 0) cr_assert_str_eq(value(cfg, "ffn.num_experts"), "2");
        ast_cfg_free(cfg);
    }
    /* the directory name keeps no YAML punctuation */
    cr_assert_eq(strncmp(s->runs[6].id, "hydra-attention=linear,ffn=name-moe,num_experts-2-", 50), 0, "%s", s->runs[6].id);
    /* equal configs under different names hash alike: the hash is the config's */
    cr_assert_eq(s->runs[1].hash, s->runs[7].hash);
    ast_sweep_free(s);
}

Test(sweep, list_keeps_order_names_and_a_point_s_own_seed)
{
    ast_sweep *s = load(SCRIPTS "list.lua");
    static const char *const names[] = {"wide", "wide", "attention=gated", "attention=gated", "base", "base",
                                        "use_distance_matrix=false,seed=99"};
    static const int seeds[] = {3, 4, 3, 4, 3, 4, 99};
    cr_assert_eq(s->n_runs, 7);
    for (int i = 0; i < 7; i++) {
        cr_assert_str_eq(s->runs[i].config_name, names[i]);
        cr_assert_eq(s->runs[i].seed, seeds[i]);
    }
    ast_cfg *cfg = resolved(&s->runs[0]);
    cr_assert_eq(ast_cfg_int(cfg, "TransformerLayer_setting.dim_ff_expression"), 16);
    ast_cfg_free(cfg);
    cfg = resolved(&s->runs[6]);
    cr_assert_eq(ast_cfg_bool(cfg, "loss.use_distance_matrix"), 0);
    ast_cfg_free(cfg);
    ast_sweep_free(s);
}

Test(sweep, random_draws_within_bounds_and_depend_on_the_seed)
{
    ast_sweep *s = load(SCRIPTS "random.lua");
    cr_assert_eq(s->n_runs, 8);
    int differ = 0;
    for (int i = 0; i < 8; i++) {
        ast_cfg *cfg = resolved(&s->runs[i]);
        double lr = ast_cfg_float(cfg, "training.learning_rate");
        double drop = ast_cfg_float(cfg, "data.loading.expression_dropout");
        int64_t batch = ast_cfg_int(cfg, "training.batch_size");
        char four[32];
        snprintf(four, sizeof four, "%.4g", lr);
        cr_assert(lr >= 1e-4 && lr <= 1e-2 && drop >= 0 && drop <= 0.5 && batch >= 1 && batch <= 8, "%s", s->runs[i].id);
        cr_assert_eq(strtod(four, NULL), lr, "floats keep 4 significant digits: %.17g", lr);
        cr_assert_eq(strncmp(s->runs[i].config_name, i < 4 ? "s1:" : "s2:", 3), 0);
        if (i >= 4) differ += strcmp(strchr(s->runs[i].config_name, ':'), strchr(s->runs[i - 4].config_name, ':')) != 0;
        ast_cfg_free(cfg);
    }
    cr_assert_gt(differ, 0, "seeds 1 and 2 draw different points");
    ast_sweep_free(s);
}

Test(sweep, overrides_apply_in_order_on_config_objects)
{
    ast_sweep *s = load(SCRIPTS "override.lua");
    cr_assert_eq(s->n_runs, 3);
    cr_assert_str_eq(s->runs[0].config_name, "Base");
    cr_assert_eq(s->runs[0].n_overrides, 0, "no seeds, no overrides");
    ast_cfg *both = resolved(&s->runs[1]), *moe = resolved(&s->runs[2]);
    cr_assert_str_eq(value(both, "attention"), "gated");
    cr_assert_str_eq(value(both, "ffn.num_experts"), "8", "the later override wins");
    cr_assert_str_eq(value(both, "ffn.top_k"), "2");
    cr_assert_eq(ast_cfg_bool(both, "loss.use_distance_matrix"), 0);
    cr_assert_str_eq(value(moe, "ffn.num_experts"), "4");
    cr_assert_float_eq(ast_cfg_float(moe, "training.learning_rate"), 2.5e-4, 0.0, "a Lua float written exactly");
    cr_assert_str_eq(value(moe, "attention"), "linear");
    ast_cfg_free(both);
    ast_cfg_free(moe);
    ast_sweep_free(s);
}

Test(sweep, script_errors_name_the_file_line_and_the_traceback)
{
    ast_error e = {""};
    load_fails(SCRIPTS "bad_key.lua", &e);
    assert_has(e.msg, "bad_key.lua:4: ");
    assert_has(e.msg, "training.learnig_rate: unknown key; did you mean 'learning_rate'?");
    assert_has(e.msg, "stack traceback:");
    assert_has(e.msg, "bad_key.lua:6: in main chunk");
    load_fails(SCRIPTS "syntax_error.lua", &e);
    assert_has(e.msg, "syntax_error.lua:4: '}' expected (to close '{' at line 2)");
    load_fails(SCRIPTS "runtime_error.lua", &e);
    assert_has(e.msg, "runtime_error.lua:2: attempt to index a nil value (local 't')");
    assert_has(e.msg, "runtime_error.lua:3: in main chunk");
    load_fails(SCRIPTS "bad_field.lua", &e);
    assert_has(e.msg, "bad_field.lua:2: sweep: unknown field 'seed'; did you mean 'seeds'?");
    load_fails(SCRIPTS "no_such_script.lua", &e);
    assert_has(e.msg, "no_such_script.lua: cannot open the sweep script: No such file or directory");

    char out[256], *text;
    snprintf(out, sizeof out, "%s/out", tmp_dir());
    cr_assert_eq(cli("sweep --dry-run " SCRIPTS "bad_key.lua", out), 1);
    /* Lua shortens a long script path from the left ("...") in its
     * messages, so only the file name and line are certain (make distcheck
     * runs from a deep build tree). */
    assert_has(text = test_read_file(out), "alphast-run: ");
    assert_has(text, "bad_key.lua:4: ");
    free(text);
}

Test(sweep, dry_run_lists_the_runs_and_runs_nothing)
{
    ast_sweep *s = load(SCRIPTS "ablation.lua");
    char *dir = tmp_dir(), args[512], out[256], sweep_dir[256];
    snprintf(sweep_dir, sizeof sweep_dir, "%s/sweep", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(args, sizeof args, "sweep --dry-run --out %s " SCRIPTS "ablation.lua", sweep_dir);
    cr_assert_eq(cli(args, out), 0);
    char *text = test_read_file(out);
    for (int i = 0; i < s->n_runs; i++) assert_has(text, s->runs[i].id);
    cr_assert(access(sweep_dir, F_OK), "a dry run creates nothing");
    free(text);
    ast_sweep_free(s);
}

/* ---- Hydra's grammar and the command-line grid (docs/config.md) ----------------------- */

Test(sweep, scripts_take_hydra_s_override_grammar)
{
    ast_sweep *s = load(SCRIPTS "hydra.lua");
    static const char *const names[] = {"attention=linear,epochs=1", "attention=gated,epochs=1",
                                        "attention=linear,epochs=2", "attention=gated,epochs=2"};
    cr_assert_eq(s->n_runs, 4);
    for (int i = 0; i < 4; i++) {
        const ast_sweep_run *r = &s->runs[i];
        cr_assert_str_eq(r->config_name, names[i]);
        ast_cfg *cfg = resolved(r);
        cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 1 + i / 2, "range(1,3) is 1, 2");
        cr_assert_str_eq(value(cfg, "attention"), i % 2 ? "gated" : "linear");
        cr_assert_null(ast_cfg_get(cfg, "monitors"), "+monitors, then ~monitors in every point");
        cr_assert_null(ast_cfg_get(cfg, "ffn"), "~ffn");
        cr_assert_eq(ast_cfg_int(cfg, "training.patience"), 3, "++ as a keyed entry");
        cr_assert_eq(ast_cfg_bool(cfg, "data.loading.rotation"), 0, "{rotation:false}");
        cr_assert_str_eq(r->overrides[0], "+monitors=[grad_norm]");
        ast_cfg_free(cfg);
    }
    ast_sweep_free(s);
}

static ast_sweep *grid(const char *const *overrides, int n, ast_error *e)
{
    ast_sweep_limits limits;
    cr_assert_eq(ast_sweep_limits_from_env(&limits, e), 0, "%s", e->msg);
    return ast_sweep_grid(SCRIPTS "tiny.yaml", overrides, n, &limits, e);
}

/* -m's grid is the Lua grid of the same strings: runs, ids, overrides and directory. */
Test(sweep, a_command_line_grid_is_the_lua_grid_of_its_overrides)
{
    static const char *const axes[] = {"attention=linear,gated", "training.epochs=1,2"};
    ast_error e = {""};
    ast_sweep *m = grid(axes, 2, &e), *lua = load(SCRIPTS "multirun.lua");
    cr_assert(m, "%s", e.msg);
    cr_assert_str_eq(m->name, lua->name);
    cr_assert_eq(m->n_runs, 4);
    cr_assert_eq(m->n_runs, lua->n_runs);
    for (int i = 0; i < m->n_runs; i++) {
        const ast_sweep_run *a = &m->runs[i], *b = &lua->runs[i];
        cr_assert_str_eq(a->id, b->id);
        cr_assert_str_eq(a->config_name, b->config_name);
        cr_assert_str_eq(a->base, b->base);
        cr_assert_str_eq(a->yaml, b->yaml);
        cr_assert_eq(a->n_overrides, b->n_overrides);
        for (int k = 0; k < a->n_overrides; k++) cr_assert_str_eq(a->overrides[k], b->overrides[k]);
    }
    ast_sweep_free(m);
    ast_sweep_free(lua);
    static const char *const bad[] = {"training.epochs=1,abc"};
    cr_assert_null(grid(bad, 1, &e));
    cr_assert_str_eq(e.msg, "sweep: configs.epochs=abc: override:1:17: training.epochs: expected an integer, got "
                            "'abc'; write a whole number like 100");
    static const char *const unsupported[] = {"logging.logger=wandb"};
    cr_assert_null(grid(unsupported, 1, &e));
    cr_assert_str_eq(e.msg, "sweep: configs.grid: override:1:16: logging.logger: 'wandb' is not supported: alphast "
                            "logs to TensorBoard, not to Weights & Biases: write logging.logger: tensorboard (the "
                            "default) or none");
}

/* -m's seed= values are the sweep's seeds, as in a script: each config runs
 * once per seed (the report pools them), not each seed a config of its own. */
Test(sweep, a_command_line_grid_s_seeds_are_seeds_of_each_config)
{
    static const char *const axes[] = {"attention=linear,gated", "seed=range(1,3)"};
    ast_error e = {""};
    ast_sweep *m = grid(axes, 2, &e), *lua = load(SCRIPTS "multirun_seeds.lua");
    cr_assert(m, "%s", e.msg);
    cr_assert_eq(m->n_runs, 4);
    cr_assert_eq(m->n_runs, lua->n_runs);
    for (int i = 0; i < m->n_runs; i++) {
        cr_assert_str_eq(m->runs[i].id, lua->runs[i].id);
        cr_assert_str_eq(m->runs[i].config_name, i < 2 ? "attention=linear" : "attention=gated");
        cr_assert_eq(m->runs[i].seed, i % 2 + 1);
    }
    ast_sweep_free(m);
    ast_sweep_free(lua);
    static const char *const bad[] = {"seed.value=1,x"};
    cr_assert_null(grid(bad, 1, &e));
    cr_assert_str_eq(e.msg, "seed.value=1,x: 'x' is not an integer seed; give integers, e.g. seed=1,2,3 or "
                            "seed=range(1,4)");
    static const char *const twice[] = {"seed=1,2", "seed.value=3"};
    cr_assert_null(grid(twice, 2, &e));
    cr_assert_str_eq(e.msg, "seed.value=3: the seeds are given twice; give them once, e.g. seed=range(1,4)");
}

/* Four tiny runs, two at a time, each with its held-out evaluation (about
 * 3.5 s plain, 6 s under ASan, as at 5bcb7bc): 60 s was too little for a
 * sanitizer build beside the rest of a parallel make check (it timed out
 * once in a fresh-clone CI run), so the limit catches a hang, not a pace. */
Test(sweep, multirun_runs_the_grid_and_cfg_prints_each_run_s_config, .timeout = 240)
{
    ast_sweep *lua = load(SCRIPTS "multirun.lua");
    char *dir = tmp_dir(), args[1024], out[256];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(args, sizeof args, "sweep -m --cfg --config " SCRIPTS "tiny.yaml attention=linear,gated training.epochs=1,2");
    cr_assert_eq(cli(args, out), 0);
    char *text = test_read_file(out);
    for (int i = 0; i < lua->n_runs; i++) {
        char doc[256];
        snprintf(doc, sizeof doc, "--- # %s\n", lua->runs[i].id);
        assert_has(text, doc);
        assert_has(text, lua->runs[i].yaml);
    }
    free(text);
    snprintf(args, sizeof args, "sweep --multirun --jobs 2 --out %s/sweep --config " SCRIPTS "tiny.yaml "
             "attention=linear,gated training.epochs=1,2", dir);
    int rc = cli(args, out);
    text = test_read_file(out);
    cr_assert_eq(rc, 0, "%s", text);
    free(text);
    char sweep_dir[128], path[512];
    snprintf(sweep_dir, sizeof sweep_dir, "%s/sweep", dir);
    ast_ledger *l = ledger(sweep_dir);
    for (int i = 0; i < lua->n_runs; i++) {
        cr_assert_eq(last_state(l, lua->runs[i].id), AST_RUN_DONE, "%s", lua->runs[i].id);
        cr_assert_eq(access(run_path(path, sweep_dir, &lua->runs[i], "summary.json"), F_OK), 0, "%s", path);
    }
    ast_ledger_free(l);
    ast_sweep_free(lua);
}

Test(sweep, multirun_takes_no_script_and_config_needs_multirun)
{
    char *dir = tmp_dir(), out[256], *text;
    snprintf(out, sizeof out, "%s/out", dir);
    cr_assert_eq(cli("sweep -m " SCRIPTS "grid.lua attention=linear,gated", out), 2);
    assert_has(text = test_read_file(out), "alphast-run sweep: -m/--multirun takes its grid from the command line, not from a "
                                  "script: run " SCRIPTS "grid.lua without -m, or put the grid in it with alphast.grid{...}");
    free(text);
    cr_assert_eq(cli("sweep --config " SCRIPTS "tiny.yaml " SCRIPTS "grid.lua", out), 2);
    assert_has(text = test_read_file(out), "alphast-run sweep: --config goes with -m/--multirun; a script names its configs itself");
    free(text);
    cr_assert_eq(cli("sweep " SCRIPTS "grid.lua attention=gated", out), 2);
    assert_has(text = test_read_file(out), "expected the sweep script (SCRIPT.lua), or -m KEY=V1,V2 ... for a grid from the "
                                  "command line");
    free(text);
}

/* ---- schedules ----------------------------------------------------------------- */

Test(sweep, schedules_set_the_values_of_every_step, .timeout = 60)
{
    char *dir = tmp_dir(), args[512], out[256], path[512];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(args, sizeof args, "sweep --out %s " SCRIPTS "schedule.lua", dir);
    cr_assert_eq(cli(args, out), 0, "%s", test_read_file(out));
    ast_sweep *s = load(SCRIPTS "schedule.lua");
    cr_assert_eq(s->runs[0].scheduled, 1);
    cJSON *lines[16];
    int n = train_lines(run_path(path, dir, &s->runs[0], "metrics.jsonl"), lines, 16);
    cr_assert_eq(n, 9, "3 epochs x 3 steps");
    for (int i = 0; i < n; i++) {
        int step = (int)num(lines[i], "step") - 1, epoch = (int)num(lines[i], "epoch");
        /* metrics print 6 significant digits of a float32 */
        double want = 2e-3 / (1 + step) + 1e-5 * epoch;
        cr_assert_float_eq(num(lines[i], "lr"), want, 1e-5 * want, "step %d", step);
        cr_assert_float_eq(num(lines[i], "masking.ratio"), 0.25 * epoch, 1e-7);
        cr_assert_float_eq(num(lines[i], "moe.load_balance_weight"), 0.125, 0.0);
        cr_assert_float_eq(num(lines[i], "moe.router_noise"), step < 4 ? 0.5 : 0.0, 0.0);
        cJSON_Delete(lines[i]);
    }
    ast_sweep_free(s);
}

/* The progress line is redrawn in place ("\r\033[K" then the line, no
 * newline): one that reached the last column would wrap, and every
 * redraw would then start a new line. Event lines end with a newline. */
/* Four tiny runs (multirun.lua) are enough for redraws; the eight of
 * list.lua passed 120 s under ASan beside another job. */
Test(sweep, progress_redraws_fit_a_50_column_terminal, .timeout = 180)
{
    char *dir = tmp_dir(), out_dir[256];
    snprintf(out_dir, sizeof out_dir, "%s/sweep", dir);
    char *argv[] = {CLI, "sweep", "--jobs", "2", "--out", out_dir, SCRIPTS "multirun.lua", NULL};
    static char out[1 << 20];
    cli_on_terminal(argv, 50, out, sizeof out);
    int redraws = 0;
    for (const char *p = strstr(out, "\r\033[K"); p; p = strstr(p, "\r\033[K")) {
        p += 4;
        size_t len = strcspn(p, "\r\n");
        if (!strncmp(p + len, "\r\n", 2) || p[len] == '\n') continue; /* an event line */
        cr_assert_leq((int)len, 49, "a redraw of %zu columns: '%.*s'", len, (int)len, p);
        redraws++;
    }
    cr_assert_geq(redraws, 1, "no progress line was drawn:\n%s", out);
}

/* The table the sweep writes holds, at every step, what the schedule's
 * functions give; a run past its end (a changed config) is an error. */
Test(sweep, a_schedule_table_holds_every_step_of_the_run)
{
    char *dir = tmp_dir(), path[512];
    snprintf(path, sizeof path, "%s/schedule.safetensors", dir);
    ast_sweep *s = load(SCRIPTS "schedule.lua");
    ast_error e = {""};
    cr_assert_eq(ast_sweep_tabulate_schedule(s, s->runs[0].id, path, &e), 0, "%s", e.msg);
    ast_schedule_table t;
    cr_assert_eq(ast_schedule_table_load(&t, path, &e), 0, "%s", e.msg);
    cr_assert_eq(t.steps, 9, "3 epochs x 3 steps");
    ast_train_config tc = {0};
    cr_assert_eq(ast_sweep_bind_schedule(s, s->runs[0].id, &tc, &e), 0, "%s", e.msg);
    for (int64_t step = 0; step < t.steps; step++) {
        ast_schedule_values direct = {.lr = 1}, tabled = {.lr = 1};
        cr_assert_eq(tc.schedule(tc.schedule_ud, step, (int)step / 3, &direct, &e), 0, "%s", e.msg);
        cr_assert_eq(ast_schedule_table_lookup(&t, step, (int)step / 3, &tabled, &e), 0, "%s", e.msg);
        cr_assert_eq(tabled.lr, direct.lr, "step %lld", (long long)step);
        cr_assert_eq(tabled.n, 3);
        for (int i = 0; i < tabled.n; i++) {
            cr_assert_str_eq(tabled.named[i].name, direct.named[i].name);
            cr_assert_eq(tabled.named[i].value, direct.named[i].value, "%s at step %lld", direct.named[i].name,
                         (long long)step);
        }
    }
    ast_schedule_values v = {0};
    cr_assert_eq(ast_schedule_table_lookup(&t, 9, 3, &v, &e), -1);
    assert_has(e.msg, "the schedule has 9 steps and the run is at step 9 (epoch 3): the config changed");
    ast_schedule_table_free(&t);
    cr_assert_eq(ast_schedule_table_load(&t, ALPHAST_SOURCE_DIR "/tests/data/golden/baseline.io.safetensors", &e), -1);
    assert_has(e.msg, "baseline.io.safetensors: not a schedule table");
    ast_sweep_free(s);
}

/* A table of the given columns, 3 steps of 0.1 each, marked as a schedule table. */
static void write_table(const char *path, const char *const *names, int n)
{
    static const float v[3] = {0.1f, 0.1f, 0.1f};
    static const int64_t shape[1] = {3};
    ast_st_writer *w = ast_st_writer_new();
    for (int i = 0; i < n; i++) ast_st_writer_add(w, names[i], AST_ST_F32, 1, shape, v);
    ast_st_writer_metadata(w, "alphast.schedule_table", "1");
    ast_error e = {""};
    cr_assert_eq(ast_st_writer_write(w, path, &e), 0, "%s", e.msg);
    ast_st_writer_free(w);
}

/* A table the sweep did not write is refused before a column is read:
 * 9 columns without lr overran the 8 named ones the table has room for
 * (an out-of-bounds write, then a double free), and a name no schedule
 * sets would have been published to plugins as a scheduled value. */
Test(sweep, a_schedule_table_of_other_columns_is_refused)
{
    static const char *const nine[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"},
                             *const unknown[] = {"lr", "masking.ratio", "k0"};
    char *dir = tmp_dir(), path[512];
    ast_schedule_table t;
    ast_error e = {""};
    snprintf(path, sizeof path, "%s/nine.safetensors", dir);
    write_table(path, nine, 9);
    cr_assert_eq(ast_schedule_table_load(&t, path, &e), -1);
    assert_has(e.msg, "nine.safetensors: not a schedule table: 9 columns, at most 8 named ones and lr");
    snprintf(path, sizeof path, "%s/unknown.safetensors", dir);
    write_table(path, unknown, 3);
    cr_assert_eq(ast_schedule_table_load(&t, path, &e), -1);
    assert_has(e.msg, "unknown.safetensors: not a schedule table: column 'k0' is not a value a schedule sets (lr, "
                      "masking.ratio, moe.load_balance_weight, moe.router_noise)");
}

Test(sweep, a_failing_schedule_stops_its_run_with_the_reason, .timeout = 60)
{
    char *dir = tmp_dir(), args[512], out[256], path[512];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(args, sizeof args, "sweep --out %s " SCRIPTS "bad_schedule.lua", dir);
    cr_assert_eq(cli(args, out), 1, "a failed run fails the sweep");
    ast_sweep *s = load(SCRIPTS "bad_schedule.lua");
    ast_ledger *l = ledger(dir);
    cr_assert_eq(last_state(l, s->runs[0].id), AST_RUN_FAILED);
    char *log = test_read_file(run_path(path, dir, &s->runs[0], "train.log"));
    assert_has(log, "schedule.lr(step 3, epoch 1) returned a string; return a number");
    char *text = test_read_file(out);
    assert_has(text, "FAILED");
    assert_has(text, "returned a string");
    free(log), free(text);
    ast_ledger_free(l);
    ast_sweep_free(s);
}

Test(sweep, host_scheduled_values_outlive_the_step_arena)
{
    const ast_host *h = ast_host_table();
    ast_ctx *c = ast_ctx_new(1);
    cr_assert_float_eq(h->scheduled(c, "masking.ratio", 0.4f), 0.4f, 0.0, "nothing scheduled: the fallback");
    ast_ctx_set_scheduled(c, "masking.ratio", 0.1f);
    ast_ctx_set_scheduled(c, "masking.ratio", 0.2f);
    ast_ctx_reset(c);
    cr_assert_float_eq(h->scheduled(c, "masking.ratio", 0.4f), 0.2f, 0.0);
    cr_assert_float_eq(h->scheduled(c, "moe.router_noise", 0.3f), 0.3f, 0.0);
    ast_ctx_free(c);
}

/* ---- claims and the ledger --------------------------------------------------------- */

Test(sweep, one_claim_among_racing_processes_and_dead_claims_are_taken_over)
{
    char *dir = tmp_dir();
    enum { RACERS = 6 };
    int go[2], done[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(done), 0);
    pid_t pids[RACERS];
    for (int i = 0; i < RACERS; i++)
        if ((pids[i] = fork()) == 0) {
            char byte;
            ast_error e = {""};
            ast_claim c;
            if (read(go[0], &byte, 1) != 1) _exit(3);
            int got = ast_claim_take(dir, "run-1", &c, &e);
            if (got == 1 && read(done[0], &byte, 1) != 1) _exit(3); /* hold it until all have tried */
            _exit(got == 1 ? 0 : got == 0 ? 1 : 2);
        }
    cr_assert_eq(write(go[1], "xxxxxx", RACERS), RACERS);
    usleep(300000);
    cr_assert_eq(write(done[1], "x", 1), 1);
    int winners = 0;
    for (int i = 0; i < RACERS; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) <= 1, "racer %d: status %d", i, status);
        winners += WEXITSTATUS(status) == 0;
    }
    cr_assert_eq(winners, 1);
    /* The winner died holding the claim: its file remains, its lock does not. */
    char path[512];
    snprintf(path, sizeof path, "%s/claims/run-1.claim", dir);
    cr_assert_eq(access(path, F_OK), 0);
    ast_error e = {""};
    ast_claim mine, again;
    cr_assert_eq(ast_claim_take(dir, "run-1", &mine, &e), 1, "%s", e.msg);
    cr_assert_eq(ast_claim_take(dir, "run-1", &again, &e), 0, "held by a live claim (ours)");
    ast_claim_release(&mine);
    cr_assert(access(path, F_OK), "released");
}

Test(sweep, ledger_lines_round_trip_and_a_torn_line_is_skipped)
{
    char *dir = tmp_dir(), path[512];
    ast_error e = {""};
    ast_ledger_entry en = {.run = "A-1", .config_name = "A", .hash = "1", .dir = "runs/A-1", .seed = 3,
                           .state = AST_RUN_RUNNING, .pid = 42, .start = 5.0, .exit_code = -1};
    cr_assert_eq(ast_ledger_append(dir, &en, &e), 0, "%s", e.msg);
    en.state = AST_RUN_DONE, en.end = 9.0, en.exit_code = 0;
    cr_assert_eq(ast_ledger_append(dir, &en, &e), 0, "%s", e.msg);
    snprintf(path, sizeof path, "%s/ledger.jsonl", dir);
    FILE *f = fopen(path, "a");
    fputs("{\"run\":\"A-1\",\"state\":\"fail", f); /* a crash mid-line */
    fclose(f);
    ast_ledger *l = ledger(dir);
    cr_assert_eq(last_state(l, "A-1"), AST_RUN_DONE);
    cr_assert_eq(ast_ledger_count(l, "A-1", AST_RUN_RUNNING), 1);
    ast_ledger_free(l);
    char *text = test_read_file(path);
    assert_has(text, "\"run\":\"A-1\",\"config_name\":\"A\",\"seed\":3,\"hash\":\"1\",\"state\":\"done\","
                     "\"dir\":\"runs/A-1\",\"pid\":42,\"start\":5,\"end\":9,\"exit\":0}");
    free(text);
}

/* A full disk cut an append short: the next line must not be glued to the
 * fragment (it was, and the run's 'done' line was lost with it). */
Test(sweep, a_ledger_line_after_a_torn_one_stands_alone)
{
    char *dir = tmp_dir(), path[512];
    ast_error e = {""};
    snprintf(path, sizeof path, "%s/ledger.jsonl", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"time\":1,\"run\":\"A-1\",\"state\":\"runn", f); /* the disk filled up mid-line */
    fclose(f);
    ast_ledger_entry en = {.run = "A-1", .config_name = "A", .hash = "1", .dir = "runs/A-1", .seed = 3,
                           .state = AST_RUN_DONE, .exit_code = 0};
    cr_assert_eq(ast_ledger_append(dir, &en, &e), 0, "%s", e.msg);
    cr_assert_eq(ast_ledger_append(dir, &en, &e), 0, "%s", e.msg);
    ast_ledger *l = ledger(dir);
    cr_assert_eq(last_state(l, "A-1"), AST_RUN_DONE);
    cr_assert_eq(ast_ledger_count(l, "A-1", AST_RUN_DONE), 2, "both appended lines read back");
    ast_ledger_free(l);
    char *text = test_read_file(path);
    cr_assert(strstr(text, "\"state\":\"runn\n{\"time\""), "the fragment ends its own line:\n%s", text);
    cr_assert_null(strstr(text, "\n\n"), "no empty line when the ledger ends whole:\n%s", text);
    free(text);
}

/* ---- running sweeps ------------------------------------------------------------------ */

Test(sweep, a_failed_run_stops_nothing_unless_fail_fast, .timeout = 60)
{
    ast_sweep *s = load(SCRIPTS "fail.lua");
    char *keep = tmp_dir(), *fast = tmp_dir(), args[512], out[256];
    snprintf(out, sizeof out, "%s/out", keep);
    snprintf(args, sizeof args, "sweep --jobs 1 --out %s " SCRIPTS "fail.lua", keep);
    cr_assert_eq(cli(args, out), 1);
    snprintf(out, sizeof out, "%s/out", fast);
    snprintf(args, sizeof args, "sweep --jobs 1 --fail-fast --out %s " SCRIPTS "fail.lua", fast);
    cr_assert_eq(cli(args, out), 1);
    ast_ledger *k = ledger(keep), *f = ledger(fast);
    cr_assert_eq(last_state(k, s->runs[0].id), AST_RUN_FAILED);
    cr_assert_eq(last_state(f, s->runs[0].id), AST_RUN_FAILED);
    for (int i = 1; i < 3; i++) {
        cr_assert_eq(last_state(k, s->runs[i].id), AST_RUN_DONE, "keep going: %s", s->runs[i].id);
        cr_assert_eq(last_state(f, s->runs[i].id), AST_RUN_PENDING, "fail fast: %s", s->runs[i].id);
        cr_assert_eq(ast_ledger_count(f, s->runs[i].id, AST_RUN_RUNNING), 0);
    }
    ast_ledger_free(k);
    ast_ledger_free(f);
    ast_sweep_free(s);
}

static pid_t start_sweep(const char *dir, const char *script, const char *jobs)
{
    char log[512];
    snprintf(log, sizeof log, "%s.%s.log", dir, jobs);
    pid_t pid = fork();
    if (pid == 0) {
        freopen(log, "a", stderr);
        freopen("/dev/null", "w", stdout);
        execl(CLI, "alphast-run", "sweep", "--out", dir, "--jobs", jobs, script, (char *)NULL);
        _exit(127);
    }
    cr_assert_gt(pid, 0);
    return pid;
}

static int wait_status(pid_t pid)
{
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

Test(sweep, two_runners_on_one_sweep_never_run_a_run_twice, .timeout = 90)
{
    ast_sweep *s = load(SCRIPTS "race.lua");
    char dir[256];
    snprintf(dir, sizeof dir, "%s/race", tmp_dir());
    pid_t a = start_sweep(dir, SCRIPTS "race.lua", "1"), b = start_sweep(dir, SCRIPTS "race.lua", "2");
    cr_assert_eq(wait_status(a), 0);
    cr_assert_eq(wait_status(b), 0);
    ast_ledger *l = ledger(dir);
    for (int i = 0; i < s->n_runs; i++) {
        cr_assert_eq(last_state(l, s->runs[i].id), AST_RUN_DONE);
        cr_assert_eq(ast_ledger_count(l, s->runs[i].id, AST_RUN_RUNNING), 1, "%s started once", s->runs[i].id);
        assert_steps_once(dir, &s->runs[i], 6);
    }
    ast_ledger_free(l);
    ast_sweep_free(s);
}

/* Waits until path exists; fails if the sweep ends first. */
static void wait_for_file(pid_t runner, const char *path)
{
    while (access(path, F_OK)) {
        cr_assert_eq(waitpid(runner, NULL, WNOHANG), 0, "the sweep ended before %s appeared", path);
        usleep(10000);
    }
}

Test(sweep, ctrl_c_stops_the_runs_and_puts_them_back_to_pending, .timeout = 90)
{
    ast_sweep *s = load(SCRIPTS "resume.lua");
    char dir[256], ckpt[512], path[512];
    snprintf(dir, sizeof dir, "%s/interrupt", tmp_dir());
    pid_t runner = start_sweep(dir, SCRIPTS "resume.lua", "2");
    wait_for_file(runner, run_path(ckpt, dir, &s->runs[2], "checkpoint.safetensors"));
    kill(runner, SIGINT);
    cr_assert_eq(wait_status(runner), 130);
    ast_ledger *l = ledger(dir);
    cr_assert_eq(last_state(l, s->runs[2].id), AST_RUN_PENDING, "the interrupted run can resume");
    for (int i = 0; i < 4; i++) {
        ast_run_state st = last_state(l, s->runs[i].id);
        cr_assert(st == AST_RUN_DONE || st == AST_RUN_PENDING, "%s: %s", s->runs[i].id, ast_run_state_name(st));
    }
    snprintf(path, sizeof path, "%s/ledger.jsonl", dir);
    char *text = test_read_file(path);
    assert_has(text, "\"state\":\"pending\",\"dir\":\"runs/c_long-");
    /* It stopped at a step with a checkpoint (exit 75), or was killed by the
     * SIGTERM that asked it to, between training and evaluation. */
    assert_has(text, "\"reason\":\"interrupted\"}");
    snprintf(path, sizeof path, "%s/claims/%s.claim", dir, s->runs[2].id);
    cr_assert(access(path, F_OK), "its claim is released");
    free(text);
    ast_ledger_free(l);
    ast_sweep_free(s);
}

/* Is pid a process whose command line mentions `word`? */
static int cmdline_has(int pid, const char *word)
{
    char path[64], buf[8192];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++) buf[i] = buf[i] ? buf[i] : ' '; /* arguments are NUL-separated */
    buf[n] = 0;
    return strstr(buf, word) != NULL;
}

/* SIGKILLs the trainers the ledger says are running (each pid checked to
 * still be that run's trainer). */
static void kill_trainers(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ledger.jsonl", dir);
    char *text = test_read_file(path), *save = NULL;
    ast_ledger *l = ledger(dir);
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *run = cJSON_GetObjectItem(o, "run"), *pid = cJSON_GetObjectItem(o, "pid");
        ast_run_state st;
        if (cJSON_IsNumber(pid) && ast_ledger_last(l, run->valuestring, &st, NULL) && st == AST_RUN_RUNNING &&
            cmdline_has(pid->valueint, run->valuestring))
            kill(pid->valueint, SIGKILL);
        cJSON_Delete(o);
    }
    ast_ledger_free(l);
    free(text);
}

Test(sweep, a_killed_sweep_resumes_only_the_missing_runs, .timeout = 120)
{
    ast_sweep *s = load(SCRIPTS "resume.lua");
    cr_assert_eq(s->n_runs, 4);
    const ast_sweep_run *long_run = &s->runs[2];
    cr_assert_str_eq(long_run->config_name, "c_long");
    char dir[256], ckpt[512];
    snprintf(dir, sizeof dir, "%s/resume", tmp_dir());
    run_path(ckpt, dir, long_run, "checkpoint.safetensors");

    /* Kill everything once the first long run has a checkpoint: by then a
     * short run is done and the long ones are not. */
    pid_t runner = start_sweep(dir, SCRIPTS "resume.lua", "2");
    wait_for_file(runner, ckpt);
    kill(runner, SIGKILL);
    wait_status(runner);
    kill_trainers(dir);

    ast_ledger *l = ledger(dir);
    char *before[4] = {NULL};
    int done_before = 0;
    for (int i = 0; i < 4; i++) {
        ast_run_state st;
        char path[512];
        if (ast_ledger_last(l, s->runs[i].id, &st, NULL) && st == AST_RUN_DONE) {
            before[i] = test_read_file(run_path(path, dir, &s->runs[i], "metrics.jsonl"));
            done_before++;
        }
    }
    ast_ledger_free(l);
    cr_assert_geq(done_before, 1, "a short run finished before the kill");
    cr_assert_null(before[2], "the long run was killed midway");
    cr_assert_null(before[3]);

    cr_assert_eq(wait_status(start_sweep(dir, SCRIPTS "resume.lua", "2")), 0);
    l = ledger(dir);
    for (int i = 0; i < 4; i++) {
        char path[512];
        const ast_sweep_run *r = &s->runs[i];
        cr_assert_eq(last_state(l, r->id), AST_RUN_DONE, "%s", r->id);
        assert_steps_once(dir, r, i < 2 ? 6 : 30);
        if (!before[i]) continue;
        char *after = test_read_file(run_path(path, dir, r, "metrics.jsonl"));
        cr_assert_str_eq(after, before[i], "%s was not trained again", r->id);
        cr_assert_eq(ast_ledger_count(l, r->id, AST_RUN_RUNNING), 1, "%s started once", r->id);
        free(after), free(before[i]);
    }
    char path[512];
    char *log = test_read_file(run_path(path, dir, long_run, "train.log"));
    assert_has(log, "alphast: resuming");
    cr_assert_eq(ast_ledger_count(l, long_run->id, AST_RUN_RUNNING), 2, "started, killed, started again");
    free(log);
    ast_ledger_free(l);
    ast_sweep_free(s);
}

/* ---- what a script may do (docs/sweeps.md) ---------------------------------------------- */

static ast_sweep_limits limits(int trusted)
{
    ast_sweep_limits l;
    ast_error e = {""};
    cr_assert_eq(ast_sweep_limits_from_env(&l, &e), 0, "%s", e.msg);
    l.trusted = trusted;
    return l;
}

static ast_sweep *load_limited_fails(const char *script, const ast_sweep_limits *l, ast_error *e)
{
    ast_sweep *s = ast_sweep_load_limited(script, l, e);
    cr_assert_null(s, "%s loaded", script);
    return s;
}

/* ALPHAST_TEST_SCRATCH: where the scripts that write are pointed. */
static char *scratch(void)
{
    char *dir = tmp_dir();
    setenv("ALPHAST_TEST_SCRATCH", dir, 1);
    return dir;
}

static int exists(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* DIR/NAME holding text; its path, in buf (512 bytes). */
static const char *write_file(char *buf, const char *dir, const char *name, const char *text)
{
    snprintf(buf, 512, "%s/%s", dir, name);
    FILE *f = fopen(buf, "w");
    cr_assert(f, "%s", buf);
    fputs(text, f);
    fclose(f);
    return buf;
}

Test(sweep, a_restricted_script_cannot_start_processes_or_write_files)
{
    char *dir = scratch();
    unsetenv("ALPHAST_TRUST_SWEEP");
    ast_error e = {""};
    load_fails(SCRIPTS "restricted_os_execute.lua", &e);
    assert_has(e.msg, "restricted_os_execute.lua:3: os.execute is not available to a sweep script: it runs restricted "
                      "(no processes, file writing or native code); for a script you trust, run `alphast-run sweep "
                      "--trust-script`");
    assert_has(e.msg, "ALPHAST_TRUST_SWEEP=1 (docs/sweeps.md)");
    load_fails(SCRIPTS "restricted_io_write.lua", &e);
    assert_has(e.msg, "restricted_io_write.lua:3: io.open('");
    assert_has(e.msg, "/victim.txt', 'w'): a restricted sweep script opens files for reading only (mode 'r')");
    cr_assert(!exists(dir, "ran_a_process") && !exists(dir, "victim.txt"), "the scripts did nothing");
    ast_sweep_limits l = limits(0);
    ast_sweep *s = ast_sweep_load_limited(SCRIPTS "pure_library.lua", &l, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(s->trusted, 0);
    ast_cfg *cfg = resolved(&s->runs[0]);
    cr_assert_eq(ast_cfg_int(cfg, "training.epochs"), 2, "the helper module ran");
    ast_cfg_free(cfg);
    ast_sweep_free(s);
}

Test(sweep, a_restricted_script_has_no_way_around_the_restriction, .timeout = 30)
{
    static const char *const attempts[][2] = {
        {"debug.sethook()", "debug.sethook is not available to a sweep script"},
        {"package.loadlib('libc.so.6', 'system')", "package.loadlib is not available"},
        {"require('os').remove('x')", "os.remove is not available"},
        {"load(string.dump(function() end), 'x', 'b')", "load: binary chunks (mode 'b') are not available"},
        {"load('os.exit(1)')()", "os.exit is not available"},
        {"io.lines('/dev/stdin')", "io.lines('/dev/stdin'): a restricted sweep script reads regular files only"},
        {"dofile('x.lua')", "dofile is not available"},
        {"setmetatable({}, {__gc = function() end})", "setmetatable: __gc finalizers are not available"},
        {"require '../escape'", "require '../escape': not a module name"},
        {"print(getmetatable(io).__index)", "attempt to index a boolean value"},
        {"local f = io.open('" SCRIPTS "tiny.yaml'); getmetatable(f).__gc = function() while true do end end",
         "attempt.lua:2: getmetatable(userdata): the metatables of strings and file handles are not available to a "
         "sweep script (__gc finalizers put there run outside the instruction budget); for a script you trust"},
        {"getmetatable('').__index = {}", "getmetatable(string): the metatables of strings and file handles"},
        {"getmetatable(a.config('tiny.yaml')).__gc = print", "attempt to index a boolean value"},
    };
    char *dir = tmp_dir(), script[512], tiny[512];
    snprintf(script, sizeof script, "%s/attempt.lua", dir);
    snprintf(tiny, sizeof tiny, "%s/tiny.yaml", dir);
    cr_assert_eq(symlink(SCRIPTS "tiny.yaml", tiny), 0);
    for (size_t i = 0; i < sizeof attempts / sizeof *attempts; i++) {
        FILE *f = fopen(script, "w");
        fprintf(f, "local a = require 'alphast'\n%s\na.sweep{base = 'tiny.yaml'}\n", attempts[i][0]);
        fclose(f);
        ast_sweep_limits l = limits(0);
        ast_error e = {""};
        cr_assert_null(ast_sweep_load_limited(script, &l, &e), "%s was allowed", attempts[i][0]);
        assert_has(e.msg, attempts[i][1]);
    }
}

/* The batch script runs as the submitter: a restricted script's sbatch
 * options may ask for resources, not choose files, environment or user. */
Test(sweep, a_restricted_script_asks_slurm_for_resources_only)
{
    static const char *const refused[] = {
        "--export=ALL,LD_PRELOAD=/tmp/evil.so", "--output=/tmp/CHOSEN_OUTPUT.txt", "-o/tmp/x", "--error=/tmp/x",
        "-e/tmp/x", "--input=/etc/passwd", "--chdir=/tmp", "-D/tmp", "--get-user-env", "--container=/c",
        "--bb=capacity=1G", "--bbf=/tmp/bb", "--uid=0", "--gid=0", "--exp=ALL", "--export-file=/tmp/env",
        "-pgpu",
    };
    static const char *const resources =
        "'--qos=high', '--account=lab', '--gres=gpu:1', '--constraint=a100', '--nodes=1', '--ntasks-per-node=1'";
    char *dir = tmp_dir(), script[512], text[1024], want[256];
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        snprintf(text, sizeof text, "require('alphast').sweep{base = '" SCRIPTS "tiny.yaml',\n"
                 "  executor = {kind = 'slurm', sbatch = {%s, '%s'}}}\n", resources, refused[i]);
        write_file(script, dir, "escape.lua", text);
        ast_sweep_limits l = limits(0);
        ast_error e = {""};
        load_limited_fails(script, &l, &e);
        snprintf(want, sizeof want, "escape.lua:1: sweep: executor.sbatch: '%.*s' does more than ask for resources",
                 (int)strcspn(refused[i], "="), refused[i]);
        assert_has(e.msg, want);
        assert_has(e.msg, "in their long form); a restricted sweep script may give only those; for a script you "
                          "trust, run `alphast-run sweep --trust-script`");
        l = limits(1);
        ast_sweep *s = ast_sweep_load_limited(script, &l, &e);
        cr_assert(s, "trusted: %s", e.msg);
        cr_assert_eq(s->slurm_opts.n_sbatch, 7);
        cr_assert_str_eq(s->slurm_opts.sbatch[6], refused[i]);
        ast_sweep_free(s);
    }
    snprintf(text, sizeof text, "require('alphast').sweep{base = '" SCRIPTS "tiny.yaml', executor = {kind = "
             "'slurm', partition = 'gpu', time = '10', sbatch = {%s, '--time=20', '--mem=8G'}}}\n", resources);
    write_file(script, dir, "resources.lua", text);
    ast_sweep_limits l = limits(0);
    ast_error e = {""};
    ast_sweep *s = ast_sweep_load_limited(script, &l, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(s->slurm_opts.n_sbatch, 8);
    ast_sweep_free(s);
}

Test(sweep, a_trusted_script_has_the_full_library, .timeout = 30)
{
    char *dir = scratch();
    ast_sweep_limits l = limits(1);
    ast_error e = {""};
    ast_sweep *s = ast_sweep_load_limited(SCRIPTS "restricted_os_execute.lua", &l, &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(s->trusted, 1);
    cr_assert(exists(dir, "ran_a_process"));
    ast_sweep_free(s);
    setenv("ALPHAST_TRUST_SWEEP", "1", 1);
    s = ast_sweep_load(SCRIPTS "restricted_io_write.lua", &e);
    unsetenv("ALPHAST_TRUST_SWEEP");
    cr_assert(s, "%s", e.msg);
    cr_assert(exists(dir, "victim.txt"));
    ast_sweep_free(s);
    setenv("ALPHAST_TRUST_SWEEP", "yes", 1);
    cr_assert_null(ast_sweep_load(SCRIPTS "restricted_io_write.lua", &e));
    unsetenv("ALPHAST_TRUST_SWEEP");
    cr_assert_str_eq(e.msg, "ALPHAST_TRUST_SWEEP=yes: expected 1 (trust sweep scripts) or 0");
}

Test(sweep, an_endless_loop_meets_the_instruction_budget, .timeout = 30)
{
    ast_sweep_limits l = limits(0);
    l.script_instructions = 1000000;
    static const char *const scripts[] = {SCRIPTS "endless_loop.lua", SCRIPTS "endless_pcall_loop.lua"};
    for (int i = 0; i < 2; i++) {
        ast_error e = {""};
        load_limited_fails(scripts[i], &l, &e);
        assert_has(e.msg, ".lua:3: the sweep script ran more than 1000000 Lua instructions (an endless loop?); if it "
                          "needs more, set ALPHAST_SWEEP_INSTRUCTIONS (docs/sweeps.md)");
    }
    /* the default budget through the CLI, and the variable that sets it */
    char out[256], *text;
    snprintf(out, sizeof out, "%s/out", tmp_dir());
    cr_assert_eq(cli("sweep --dry-run " SCRIPTS "endless_loop.lua", out), 1);
    assert_has(text = test_read_file(out), "endless_loop.lua:3: the sweep script ran more than 1000000000 Lua instructions");
    free(text);
    setenv("ALPHAST_SWEEP_INSTRUCTIONS", "2e6", 1);
    cr_assert_eq(cli("sweep --dry-run " SCRIPTS "endless_loop.lua", out), 1);
    unsetenv("ALPHAST_SWEEP_INSTRUCTIONS");
    assert_has(text = test_read_file(out), "ran more than 2000000 Lua instructions");
    free(text);
}

Test(sweep, an_endless_schedule_fails_its_run_and_hangs_nothing, .timeout = 60)
{
    ast_sweep_limits l = limits(0);
    l.schedule_instructions = 100000;
    ast_error e = {""};
    ast_sweep *s = ast_sweep_load_limited(SCRIPTS "endless_schedule.lua", &l, &e);
    cr_assert(s, "%s", e.msg);
    ast_train_config tc = {0};
    cr_assert_eq(ast_sweep_bind_schedule(s, s->runs[0].id, &tc, &e), 0, "%s", e.msg);
    ast_schedule_values v = {0};
    for (int call = 0; call < 2; call++) { /* a second call has a budget of its own */
        cr_assert_eq(tc.schedule(tc.schedule_ud, 0, 0, &v, &e), -1);
        assert_has(e.msg, "schedule.lr(step 0, epoch 0) failed: ");
        assert_has(e.msg, "endless_schedule.lua:4: the schedule ran more than 100000 Lua instructions (an endless "
                          "loop?); if it needs more, set ALPHAST_SCHEDULE_INSTRUCTIONS (docs/sweeps.md)");
    }
    ast_sweep_free(s);

    /* the training process gets the same budget, from the environment */
    char *dir = tmp_dir(), args[512], out[256], path[512];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(args, sizeof args, "sweep --out %s " SCRIPTS "endless_schedule.lua", dir);
    setenv("ALPHAST_SCHEDULE_INSTRUCTIONS", "1e5", 1);
    cr_assert_eq(cli(args, out), 1);
    unsetenv("ALPHAST_SCHEDULE_INSTRUCTIONS");
    s = load(SCRIPTS "endless_schedule.lua");
    char *log = test_read_file(run_path(path, dir, &s->runs[0], "train.log"));
    assert_has(log, "the schedule ran more than 100000 Lua instructions");
    free(log);
    ast_sweep_free(s);
}

/* The pattern backtracks inside one C call for hours: the wall-clock
 * backstop ends the process with a message. In a child, which it ends. */
/* child(script) in a child process, its stderr into msg; its exit status,
 * and in *peak_kb the most memory it held (ru_maxrss). */
static int in_child(void (*child)(const char *), const char *script, char *msg, size_t n, long *peak_kb)
{
    int err[2];
    cr_assert_eq(pipe(err), 0);
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a test that timed out */
        dup2(err[1], STDERR_FILENO);
        child(script);
        _exit(0);
    }
    close(err[1]);
    size_t used = 0;
    ssize_t got;
    while (used < n - 1 && (got = read(err[0], msg + used, n - 1 - used)) > 0) used += (size_t)got;
    msg[used] = '\0';
    close(err[0]);
    int status;
    struct rusage ru;
    cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
    *peak_kb = ru.ru_maxrss;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Loads a script, trusted, with a one-second wall clock and a 16 MiB Lua
 * heap, then closes it. */
static void load_and_close(const char *script)
{
    ast_sweep_limits l = limits(1);
    l.script_seconds = 1;
    l.memory_bytes = 16 << 20;
    ast_error e = {""};
    ast_sweep_free(ast_sweep_load_limited(script, &l, &e));
}

Test(sweep, a_library_call_that_never_returns_meets_the_wall_clock, .timeout = 30)
{
    char msg[1024];
    long peak_kb;
    cr_assert_eq(in_child(load_and_close, SCRIPTS "pattern_bomb.lua", msg, sizeof msg, &peak_kb), 1);
    assert_has(msg, "pattern_bomb.lua: the sweep script ran for more than 1 s, stuck inside a library function (a "
                    "string pattern that backtracks without end?); stopped");
}

/* Lua runs finalizers with hooks off, where no instruction budget counts:
 * a trusted script's, left for when the state closes, still meets the
 * memory cap and the wall clock. */
Test(sweep, finalizers_run_within_the_limits_while_the_state_closes, .timeout = 60)
{
    char *dir = tmp_dir(), script[512], msg[1024];
    long peak_kb, before_kb;
    struct rusage self;
    getrusage(RUSAGE_SELF, &self);
    before_kb = self.ru_maxrss;
    write_file(script, dir, "bomb.lua",
               "keep = setmetatable({}, {__gc = function() local t = {}\n"
               "  for i = 1, 256 do t[i] = string.rep('x', 1 << 20) .. i end end})\n"
               "require('alphast').sweep{base = '" SCRIPTS "tiny.yaml'}\n");
    cr_assert_eq(in_child(load_and_close, script, msg, sizeof msg, &peak_kb), 0, "%s", msg);
    cr_assert_lt(peak_kb - before_kb, 128 << 10, "the finalizer held %ld MiB past the 16 MiB cap",
                 (peak_kb - before_kb) >> 10);
    write_file(script, dir, "spin.lua",
               "keep = setmetatable({}, {__gc = function() while true do end end})\n"
               "require('alphast').sweep{base = '" SCRIPTS "tiny.yaml'}\n");
    cr_assert_eq(in_child(load_and_close, script, msg, sizeof msg, &peak_kb), 1);
    assert_has(msg, "spin.lua: closing the script's Lua state (its __gc finalizers) ran for more than 1 s");
}

Test(sweep, an_error_value_that_is_no_message_says_where_and_what_it_is)
{
    static const char *const raised[][2] = {{"error(nil)", "nil"}, {"error({})", "table"}, {"error(true)", "boolean"}};
    char *dir = tmp_dir(), script[512], text[256], want[256];
    for (size_t i = 0; i < sizeof raised / sizeof *raised; i++) {
        snprintf(text, sizeof text, "local function f()\n  %s\nend\nf()\n", raised[i][0]);
        write_file(script, dir, "raise.lua", text);
        ast_error e = {""};
        load_fails(script, &e);
        snprintf(want, sizeof want, "raise.lua:2: error with a %s value instead of a message; call error with a string",
                 raised[i][1]);
        assert_has(e.msg, want);
        assert_has(e.msg, "raise.lua:4: in main chunk");
    }
}

/* A read from a FIFO blocks until someone writes, where no budget sees it. */
Test(sweep, a_fifo_is_refused_at_once_as_config_module_or_script, .timeout = 30)
{
    char *dir = tmp_dir(), path[512], script[512];
    ast_error e = {""};
    snprintf(path, sizeof path, "%s/fifo.yaml", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    load_fails(write_file(script, dir, "config.lua", "require('alphast').config('fifo.yaml')\n"), &e);
    assert_has(e.msg, "config.lua:1: config 'fifo.yaml': ");
    assert_has(e.msg, "/fifo.yaml is not a regular file (a FIFO, device or directory); name a YAML file");
    snprintf(path, sizeof path, "%s/lib.lua", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    load_fails(write_file(script, dir, "module.lua", "require 'lib'\n"), &e);
    assert_has(e.msg, "module.lua:1: require('");
    assert_has(e.msg, "/lib.lua'): a restricted sweep script reads regular files only");
    load_fails(path, &e);
    assert_has(e.msg, "/lib.lua: not a regular file (a FIFO, device or directory); give the sweep script, a Lua file");
}

Test(sweep, sweep_names_that_are_not_a_directory_name_are_refused)
{
    ast_error e = {""};
    load_fails(SCRIPTS "name_dotdot.lua", &e);
    assert_has(e.msg, "name_dotdot.lua:3: sweep: name '..' is '.' or '..', an existing directory; the name is the "
                      "sweep's directory (sweeps/<name>): use letters, digits, '-', '_' and '.', not '.' or '..'");
    static const char *const names[][2] = {
        {"\".\"", "name '.' is '.' or '..'"},       {"\"a/b\"", "name 'a/b' contains '/'"},
        {"\"a\\0b\"", "contains a NUL byte"},       {"\"a\\nb\"", "name 'a\\x0ab' is not valid UTF-8 text or contains"},
        {"\"\"", "name '' is empty"},               {"\"x\\255\"", "name 'x\\xff' is not valid UTF-8"},
        {"{}", "sweep: name must be a string, not a table"},
    };
    char *dir = tmp_dir(), script[512];
    snprintf(script, sizeof script, "%s/named.lua", dir);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        FILE *f = fopen(script, "w");
        fprintf(f, "require('alphast').sweep{name = %s, base = '%stiny.yaml'}\n", names[i][0], SCRIPTS);
        fclose(f);
        load_fails(script, &e);
        assert_has(e.msg, names[i][1]);
    }
    snprintf(script, sizeof script, "%s/..lua", dir); /* the default name would be "." */
    FILE *f = fopen(script, "w");
    fprintf(f, "require('alphast').sweep{base = '%stiny.yaml'}\n", SCRIPTS);
    fclose(f);
    load_fails(script, &e);
    assert_has(e.msg, "..lua: the sweep's name comes from the file name: name '.' is '.' or '..'");
}

Test(sweep, a_key_that_is_not_utf8_is_an_error_not_a_double_free)
{
    ast_error e = {""};
    load_fails(SCRIPTS "bad_utf8_key.lua", &e);
    assert_has(e.msg, "bad_utf8_key.lua:3: sweep: configs.A: override:1:12: attention.x\\x93\\xa0y: the key path is "
                      "not valid UTF-8 text (byte 0x93 at column 12); write key names in UTF-8 without control "
                      "characters");
    char *dir = tmp_dir(), script[512];
    snprintf(script, sizeof script, "%s/values.lua", dir);
    FILE *f = fopen(script, "w");
    fprintf(f, "local t = {}; t[1] = t\nrequire('alphast').sweep{base = '%stiny.yaml', configs = {A = {ffn = t}}}\n",
            SCRIPTS);
    fclose(f);
    load_fails(script, &e);
    assert_has(e.msg, "values.lua:2: a config value nested deeper than 64 tables (does a table contain itself?)");
}

/* The script is evaluated once, by the sweep: its scheduled runs get
 * their schedules as tables (schedule.safetensors), not the script. */
Test(sweep, the_script_is_evaluated_once_per_process_with_the_sweep_s_trust, .timeout = 90)
{
    char *dir = scratch(), args[512], out[256], evals[512], *text;
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(args, sizeof args, "sweep --out %s/sweep " SCRIPTS "count_evals.lua", dir);
    cr_assert_eq(cli(args, out), 1, "restricted by default");
    assert_has(text = test_read_file(out), "io.open('");
    free(text);
    snprintf(args, sizeof args, "sweep --trust-script --jobs 2 --out %s/sweep " SCRIPTS "count_evals.lua", dir);
    int status = cli(args, out);
    text = test_read_file(out);
    cr_assert_eq(status, 0, "%s", text);
    free(text);
    snprintf(evals, sizeof evals, "%s/evaluations.txt", dir);
    text = test_read_file(evals);
    int n = 0;
    for (char *p = text; (p = strstr(p, "evaluated")); p++) n++;
    cr_assert_eq(n, 1, "the sweep alone, not its 4 scheduled runs:\n%s", text);
    free(text);
}

/* ---- GPU placement (docs/gpu.md) ------------------------------------------ */

/* Where each run on a GPU went, from the ledger: the GPU of its running
 * line, when it started, and when its last line ended it. */
typedef struct placed {
    char run[128], gpu[16];
    double start, end;
} placed;

static int read_placements(const char *dir, placed *p, int cap)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ledger.jsonl", dir);
    char *text = test_read_file(path);
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *o = cJSON_Parse(line);
        const char *state = cJSON_GetStringValue(cJSON_GetObjectItem(o, "state"));
        const char *run = cJSON_GetStringValue(cJSON_GetObjectItem(o, "run"));
        const char *gpu = cJSON_GetStringValue(cJSON_GetObjectItem(o, "gpu"));
        if (state && !strcmp(state, "running")) {
            cr_assert(gpu && n < cap, "a run on a GPU without its GPU: %s", line);
            snprintf(p[n].run, sizeof p[n].run, "%s", run);
            snprintf(p[n].gpu, sizeof p[n].gpu, "%s", gpu);
            p[n].start = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "start")), p[n].end = INFINITY;
            n++;
        } else if (state && cJSON_GetObjectItem(o, "end")) {
            for (int i = 0; i < n; i++)
                if (!strcmp(p[i].run, run)) p[i].end = cJSON_GetNumberValue(cJSON_GetObjectItem(o, "end"));
        }
        cJSON_Delete(o);
    }
    free(text);
    return n;
}

/* Runs with device: cuda get the --gpus round robin, one at a time on each
 * GPU. No GPU is needed: without one (or without CUDA in the build) each
 * run fails at once, but the ledger says which GPU it was given. */
Test(sweep, runs_on_cuda_are_placed_on_the_given_gpus_one_at_a_time, .timeout = 120)
{
    char *dir = tmp_dir(), args[1024], out[256], sweep_dir[128];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(sweep_dir, sizeof sweep_dir, "%s/sweep", dir);
    snprintf(args, sizeof args, "sweep -m --jobs 4 --gpus 3,5 --out %s --config " SCRIPTS "tiny.yaml device=cuda "
             "training.epochs=1,2,3,4,5,6", sweep_dir);
    int rc = cli(args, out);
    char *text = test_read_file(out);
    cr_assert_eq(rc, 1, "every run fails without a GPU: %s", text);
    assert_has(text, "6 runs on GPUs 3,5, at most 1 at a time on each");
    free(text);
    placed p[16];
    int n = read_placements(sweep_dir, p, 16), on[2] = {0};
    cr_assert_eq(n, 6);
    for (int i = 0; i < n; i++) {
        cr_assert(!strcmp(p[i].gpu, "3") || !strcmp(p[i].gpu, "5"), "run %s on GPU %s", p[i].run, p[i].gpu);
        on[!strcmp(p[i].gpu, "5")]++;
        for (int j = 0; j < i; j++) /* one at a time on a GPU: the later one started after the other ended */
            cr_assert(strcmp(p[i].gpu, p[j].gpu) || p[i].start >= p[j].end, "%s and %s overlap on GPU %s", p[i].run,
                      p[j].run, p[i].gpu);
    }
    cr_assert(on[0] > 0 && on[1] > 0, "round robin: %d on GPU 3, %d on GPU 5", on[0], on[1]);
}

/* The GPU options' bad values: usage errors (exit 2) naming what is wrong. */
Test(sweep, bad_gpu_options_are_usage_errors)
{
    static const struct {
        const char *option, *expect;
    } cases[] = {
        {"--gpus 0,x", "--gpus 0,x: expected GPU numbers separated by commas"},
        {"--mps maybe", "--mps: expected auto, on or off, got 'maybe'"},
    };
    char *dir = tmp_dir(), args[1024], out[256];
    snprintf(out, sizeof out, "%s/out", dir);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(args, sizeof args, "sweep -m %s --config " SCRIPTS "tiny.yaml device=cuda training.epochs=1,2",
                 cases[i].option);
        cr_assert_eq(cli(args, out), 2, "%s", cases[i].option);
        char *text = test_read_file(out);
        assert_has(text, cases[i].expect);
        free(text);
    }
}

/* Runs that share a GPU run under a CUDA MPS daemon of the sweep's own
 * (cli/sweep_mps.h); asked for with --mps on where its control program is
 * not on PATH, the sweep stops before any run with one error naming the
 * program and the way out. (Starting the daemon needs a GPU:
 * tests/test_sweep_mps.sh, on the device.) */
Test(sweep, mps_on_without_its_control_program_is_one_clear_error, .timeout = 60)
{
    char *dir = tmp_dir(), args[1024], out[256], sweep_dir[128];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(sweep_dir, sizeof sweep_dir, "%s/sweep", dir);
    snprintf(args, sizeof args, "sweep -m --mps on --gpus 0 --runs-per-gpu 2 --out %s --config " SCRIPTS
             "tiny.yaml device=cuda training.epochs=1,2", sweep_dir);
    int rc = cli_with_path(dir, args, out);
    char *text = test_read_file(out);
    cr_assert_eq(rc, 1, "%s", text);
    assert_has(text, "--mps on: nvidia-cuda-mps-control is not on PATH");
    assert_has(text, "--mps off");
    free(text);
    snprintf(args, sizeof args, "%s/runs", sweep_dir);
    cr_assert(access(args, F_OK) == 0, "the sweep directory is made before the daemon is asked for");
    snprintf(args, sizeof args, "%s/ledger.jsonl", sweep_dir);
    cr_assert(access(args, F_OK) != 0, "no run started");
}

/* With one run per GPU there is nothing to share: --mps on asks for no
 * daemon (PATH has none) and the runs are placed as without it. */
Test(sweep, mps_on_with_one_run_per_gpu_starts_no_daemon, .timeout = 120)
{
    char *dir = tmp_dir(), args[1024], out[256], sweep_dir[128];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(sweep_dir, sizeof sweep_dir, "%s/sweep", dir);
    snprintf(args, sizeof args, "sweep -m --mps on --gpus 0 --out %s --config " SCRIPTS "tiny.yaml device=cuda "
             "training.epochs=1,2", sweep_dir);
    int rc = cli_with_path(dir, args, out);
    char *text = test_read_file(out);
    cr_assert_eq(rc, 1, "every run fails without a GPU: %s", text);
    assert_has(text, "2 runs on GPU 0, at most 1 at a time on each");
    cr_assert(!strstr(text, "nvidia-cuda-mps-control"), "%s", text);
    free(text);
}

/* --status names the GPU of a running run (here: a live claim of ours). */
Test(sweep, status_shows_the_gpu_of_a_running_run)
{
    char *dir = tmp_dir(), args[512], out[256];
    ast_error e = {""};
    ast_claim claim;
    cr_assert_eq(ast_claim_take(dir, "run-1", &claim, &e), 1, "%s", e.msg);
    ast_ledger_entry en = {.run = "run-1", .config_name = "c", .hash = "0", .dir = "runs/run-1", .state = AST_RUN_RUNNING,
                           .pid = getpid(), .start = 1, .exit_code = -1, .gpu = "2"};
    cr_assert_eq(ast_ledger_append(dir, &en, &e), 0, "%s", e.msg);
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(args, sizeof args, "sweep --status %s", dir);
    cr_assert_eq(cli(args, out), 0);
    char *text = test_read_file(out);
    assert_has(text, ", GPU 2, for");
    free(text);
    ast_claim_release(&claim);
}
