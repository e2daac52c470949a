/* Lua sweep scripts in the default, restricted environment (checked at
 * start with a probe script through ast_sweep_load; the inputs then run
 * through ast_sweep_load_limited with the default restrictions and smaller
 * instruction and memory limits): any script either declares a sweep or
 * fails with a message, never crashes, hangs or leaves the sandbox. The script is written next
 * to tiny.yaml (a.config("tiny.yaml") works) and the shipped configs are
 * reachable by name. A sweep that loads has named runs whose resolved YAML
 * loads again, and its schedules are called for a few steps. */
#include "config/config.h"
#include "fuzz.h"
#include "sweep/sweep.h"

static const char tiny_yaml[] =
    "training_mode: joint\n"
    "seed: {value: 7}\n"
    "data:\n"
    "  path: data.h5ad\n"
    "  set_size: 12\n"
    "  preprocessing: {position_key: spatial, cell_type_key: null}\n"
    "diffusion: {diffusion_steps: 100}\n"
    "training: {learning_rate: 1e-3, batch_size: 2, epochs: 2, steps_per_epoch: 3, val_sets: 4,\n"
    "           val_t_points: 2, early_stopping: false}\n"
    "mlp_in_expression_setting: {mlp_in_expression_dims: 8, mlp_out_expression_dims: 8}\n"
    "mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 4, mlp_out_diffusion_time_dims: 4}\n"
    "PositionMLP_setting: {hidden_dims: 4}\n"
    "TransformerLayer_setting: {num_layers: 1, num_heads: 2, dim_ff_expression: 8, dim_ff_diffusion_time: 4}\n"
    "mlp_out_expression_setting: {hidden_dims: 8}\n"
    "mlp_out_position_norm_setting: {hidden_dims: 4}\n"
    "attention: linear\n"
    "ffn: dense\n";

/* Fails (and so stops the fuzzer before it runs anything) unless scripts
 * run restricted: each of these calls must raise an error. Unrestricted,
 * each would return without one and do nothing harmful. */
static const char probe_lua[] =
    "local a = alphast or require 'alphast'\n"
    "local open = {}\n"
    "local function refused(name, f) if pcall(f) then open[#open + 1] = name end end\n"
    "refused('os.execute', function() return os.execute() end)\n"
    "refused('os.remove', function() return os.remove('/nonexistent/alphast-fuzz') end)\n"
    "refused('os.rename', function() return os.rename('/nonexistent/alphast-fuzz', '/nonexistent/x') end)\n"
    "refused('io.popen', function() return io.popen('true'):close() end)\n"
    "refused('io.open for writing', function() return io.open('/nonexistent/alphast-fuzz', 'w') end)\n"
    "refused('package.loadlib', function() return package.loadlib('/nonexistent/x.so', 'f') end)\n"
    "refused('debug.sethook', function() return debug.sethook() end)\n"
    "refused('loadfile', function() return loadfile('/nonexistent/x.lua') end)\n"
    "if #open > 0 then error('UNRESTRICTED: ' .. table.concat(open, ', ')) end\n"
    "a.sweep{name = 'probe', base = a.config('tiny.yaml')}\n";

static char script[4200];
static ast_sweep_limits limits;

/* The default limits, smaller: the same checks trip sooner, so a script
 * that loops or grows its heap ends in milliseconds, well inside the
 * fuzzer's time and memory limits. */
static ast_sweep *load(const uint8_t *data, size_t size, ast_error *e)
{
    fuzz_write(script, data, size);
    return ast_sweep_load_limited(script, &limits, e);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char tiny[4200];
    fuzz_write(fuzz_path("tiny.yaml", tiny, sizeof tiny), tiny_yaml, strlen(tiny_yaml));
    fuzz_path("sweep.lua", script, sizeof script);
    unsetenv("ALPHAST_TRUST_SWEEP");
    ast_error e = {""};
    FUZZ_CHECK(ast_sweep_limits_from_env(&limits, &e) == 0, "%s", e.msg);
    FUZZ_CHECK(!limits.trusted, "scripts are trusted by default");
    limits.script_instructions = 20000000;
    limits.schedule_instructions = 2000000;
    limits.memory_bytes = 256 << 20;
    /* The wall-clock backstop (a library call that never returns ends the
     * process with a message) within the fuzzer's 10 s per input. */
    limits.script_seconds = 5;
    limits.schedule_seconds = 5;
    /* The probe runs as alphast-run sweep runs scripts: ast_sweep_load. */
    fuzz_write(script, probe_lua, strlen(probe_lua));
    ast_sweep *s = ast_sweep_load(script, &e);
    if (!s) {
        fprintf(stderr, "alphast fuzz: sweep scripts do not run restricted by default, or the probe script fails;"
                        " refusing to fuzz them:\n%s\n", e.msg);
        exit(1);
    }
    ast_sweep_free(s);
    return 0;
}

static int safe_name(const char *s)
{
    return s && s[0] && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ast_error e = {""};
    ast_sweep *s = load(data, size, &e);
    if (!s) {
        FUZZ_CHECK_ERROR(&e, "ast_sweep_load");
        return 0;
    }
    FUZZ_CHECK(safe_name(s->name), "the sweep's name '%s' is not a safe directory name", s->name);
    for (int i = 0; i < s->n_runs; i++) {
        const ast_sweep_run *r = &s->runs[i];
        FUZZ_CHECK(r->config_name && safe_name(r->id), "run %d has id '%s'", i, r->id ? r->id : "(null)");
        FUZZ_CHECK(ast_sweep_find(s, r->id) == r, "run %s is not found by its id (two runs share it?)", r->id);
        ast_cfg *cfg = ast_cfg_load_string(r->yaml, r->id, &e);
        FUZZ_CHECK(cfg, "run %s: its resolved config does not load: %s", r->id, e.msg);
        ast_cfg_free(cfg);
        if (i >= 8) continue; /* schedules: a few runs are enough */
        ast_train_config tc;
        memset(&tc, 0, sizeof tc);
        if (ast_sweep_bind_schedule(s, r->id, &tc, &e) != 0) {
            FUZZ_CHECK_ERROR(&e, "ast_sweep_bind_schedule");
            continue;
        }
        FUZZ_CHECK(!r->scheduled || tc.schedule, "run %s has a schedule that is not bound", r->id);
        for (int step = 0; tc.schedule && step < 3; step++) {
            ast_schedule_values v = {.lr = 1e-3f};
            e.msg[0] = 0;
            if (tc.schedule(tc.schedule_ud, step, step / 2, &v, &e) != 0) {
                FUZZ_CHECK_ERROR(&e, "a schedule");
                break;
            }
            FUZZ_CHECK(v.n >= 0 && v.n <= AST_MAX_SCHEDULED, "a schedule published %d values", v.n);
        }
    }
    ast_sweep_free(s);
    return 0;
}
