/* `alphast-run sweep SCRIPT.lua`: runs the sweep a Lua script declares,
 * each run in its own `alphast-run train` process, resumable through the
 * sweep directory's ledger. */
#define _GNU_SOURCE /* sched_getaffinity: the cores this process may use */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sweep/ledger.h"
#include "sweep/sweep.h"
#include "cli.h"
#include "commands.h"
#include "sweep_pool.h"

enum { OPT_OUT, OPT_JOBS, OPT_THREADS, OPT_FAIL_FAST, OPT_KEEP_GOING, OPT_DRY_RUN, OPT_CFG, OPT_TRUST, OPT_MULTIRUN,
       OPT_CONFIG, N_OPTS };

static const cli_option options[N_OPTS] = {
    [OPT_OUT] = {"out", 'o', "DIR", "sweep directory (default: sweeps/<the sweep's name>)"},
    [OPT_JOBS] = {"jobs", 'j', "N", "runs at a time (default: the script's jobs, else cores / threads)"},
    [OPT_THREADS] = {"threads", 't', "N", "BLAS threads per run (default: the script's threads, else 1)"},
    [OPT_FAIL_FAST] = {"fail-fast", 0, NULL, "at the first failed run, stop the running ones and start no more"},
    [OPT_KEEP_GOING] = {"keep-going", 0, NULL, "finish every run even when some fail (the default)"},
    [OPT_DRY_RUN] = {"dry-run", 'n', NULL, "list the runs, their overrides and states; run nothing"},
    [OPT_CFG] = {"cfg", 0, NULL, "print each run's resolved config (YAML) and exit"},
    [OPT_TRUST] = {"trust-script", 0, NULL,
                   "give a script you trust Lua's full library: processes, files, native code (or ALPHAST_TRUST_SWEEP=1)"},
    [OPT_MULTIRUN] = {"multirun", 'm', NULL, "no script: the grid of the KEY=V1,V2 overrides over --config (docs/config.md)"},
    [OPT_CONFIG] = {"config", 'c', "FILE", "with -m: the config the grid overrides (default: the bundled configs/starmap.yaml)"},
};

static const cli_spec spec = {
    .name = "sweep",
    .usage = "[--out DIR] [--jobs N] [--threads N] [--fail-fast | --keep-going] [--dry-run] [--cfg]\n"
             "                         [--trust-script] SCRIPT.lua\n"
             "   or: alphast-run sweep [options] -m [--config FILE] KEY=V1,V2 KEY2=range(1,4) ...",
    .about = "Runs the sweep a Lua script declares (docs/sweeps.md): every (config, seed) is one\n"
             "`alphast-run train` process, N at a time, in DIR/runs/<name>-<hash>; their states go\n"
             "to DIR/ledger.jsonl. Running the script again resumes: done runs are skipped, interrupted\n"
             "ones continue from their checkpoints, failed ones are retried. Several runners may share\n"
             "DIR without running anything twice. Ctrl-C stops cleanly; exit status 0 when every run\n"
             "is done, 1 when some failed, 130 when interrupted.\n"
             "The script runs restricted: no processes, file writing or native code, and a budget of\n"
             "instructions and memory. --trust-script lifts the restriction for a script you trust.\n"
             "-m/--multirun takes the grid from the command line instead, as Hydra does: every\n"
             "combination of the overrides' values over --config, the runs a script with\n"
             "alphast.grid{...} would declare, in sweeps/<config name> (docs/config.md).",
    .options = options,
    .n_options = N_OPTS,
    .max_args = 64,
};

static int positive(const char *text, const char *name, int *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < 1 || v > 4096) return cli_usage_error("sweep", "--%s: expected a positive integer, got '%s'", name, text);
    *out = (int)v;
    return CLI_CONTINUE;
}

static int cores(void)
{
    cpu_set_t set;
    if (!sched_getaffinity(0, sizeof set, &set)) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Options over the script's fields over the defaults. */
static int resolve_opts(const char **v, const ast_sweep *s, sweep_opts *o)
{
    if (v[OPT_FAIL_FAST] && v[OPT_KEEP_GOING]) return cli_usage_error("sweep", "--fail-fast and --keep-going exclude each other");
    o->fail_fast = v[OPT_FAIL_FAST] != NULL;
    o->threads = s->threads ? s->threads : 1;
    if (v[OPT_THREADS] && positive(v[OPT_THREADS], "threads", &o->threads) != CLI_CONTINUE) return CLI_USAGE;
    int fit = cores() / o->threads;
    o->jobs = s->jobs ? s->jobs : fit > 1 ? fit : 1;
    if (v[OPT_JOBS] && positive(v[OPT_JOBS], "jobs", &o->jobs) != CLI_CONTINUE) return CLI_USAGE;
    return CLI_CONTINUE;
}

static void list_runs(const ast_sweep *s, const char *dir)
{
    ast_error e = {""};
    ast_ledger *l = ast_ledger_read(dir, &e);
    printf("%s: %d runs from %s, in %s\n", s->name, s->n_runs, s->script, dir);
    for (int i = 0; i < s->n_runs; i++) {
        const ast_sweep_run *r = &s->runs[i];
        ast_run_state st;
        int known = l && ast_ledger_last(l, r->id, &st, NULL);
        printf("  %-40s seed %-6lld %-8s%s", r->id, (long long)r->seed, known ? ast_run_state_name(st) : "new",
               r->scheduled ? " scheduled" : "");
        for (int k = 0; k < r->n_overrides; k++) printf(" %s", r->overrides[k]);
        printf("\n");
    }
    if (!l) fprintf(stderr, "%s: %s\n", CLI_PROG, e.msg);
    ast_ledger_free(l);
}

/* `alphast-run report DIR`, when this build has that command. */
static void report(const char *dir)
{
    if (!cli_command_find("report")) {
        fprintf(stderr, "%s sweep: report = true, but this build has no 'report' command\n", CLI_PROG);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", CLI_PROG, "report", dir, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
        fprintf(stderr, "%s sweep: the report of %s failed\n", CLI_PROG, dir);
}

/* --cfg: the runs' configs as one YAML stream, a document per run. */
static void print_configs(const ast_sweep *s)
{
    for (int i = 0; i < s->n_runs; i++) printf("--- # %s\n%s", s->runs[i].id, s->runs[i].yaml);
}

/* The sweep the script declares, or with -m the grid of the overrides. */
static ast_sweep *load(const char **v, const char **args, int n_args, ast_error *e)
{
    ast_sweep_limits limits;
    if (ast_sweep_limits_from_env(&limits, e) < 0) return NULL;
    limits.trusted |= v[OPT_TRUST] != NULL;
    if (!v[OPT_MULTIRUN]) return ast_sweep_load_limited(args[0], &limits, e);
    char def[4096];
    const char *config = v[OPT_CONFIG] ? v[OPT_CONFIG] : ast_shipped_file("configs/starmap.yaml", def, sizeof def);
    return ast_sweep_grid(config, args, n_args, &limits, e);
}

static int run(const char **v, const char **args, int n_args)
{
    ast_error e = {""};
    ast_sweep *s = load(v, args, n_args, &e);
    if (!s) return cli_fail(&e);
    sweep_opts o;
    int rc = resolve_opts(v, s, &o);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s", v[OPT_OUT] ? "" : "sweeps/", v[OPT_OUT] ? v[OPT_OUT] : s->name);
    o.dir = dir;
    if (rc == CLI_CONTINUE && v[OPT_CFG]) {
        print_configs(s);
        rc = CLI_OK;
    }
    if (rc == CLI_CONTINUE && v[OPT_DRY_RUN]) {
        list_runs(s, dir);
        rc = CLI_OK;
    }
    if (rc == CLI_CONTINUE) {
        char runs[4200];
        snprintf(runs, sizeof runs, "%s/runs", dir);
        sweep_outcome out = ast_make_dirs(runs, &e) < 0 ? SWEEP_ERROR : sweep_pool_run(s, &o, &e);
        if (s->report && (out == SWEEP_ALL_DONE || out == SWEEP_SOME_FAILED)) report(dir);
        rc = out == SWEEP_ALL_DONE ? CLI_OK : out == SWEEP_SOME_FAILED ? CLI_FAILED : out == SWEEP_INTERRUPTED ? 130 : cli_fail(&e);
    }
    ast_sweep_free(s);
    return rc;
}

/* A script, or with -m overrides and no script. */
static int check_args(const char **v, const char **args, int n_args)
{
    if (!v[OPT_MULTIRUN] && v[OPT_CONFIG])
        return cli_usage_error("sweep", "--config goes with -m/--multirun; a script names its configs itself");
    if (!v[OPT_MULTIRUN] && n_args != 1)
        return cli_usage_error("sweep", "expected the sweep script (SCRIPT.lua), or -m KEY=V1,V2 ... for a grid from "
                                        "the command line");
    for (int i = 0; v[OPT_MULTIRUN] && i < n_args; i++) {
        size_t n = strlen(args[i]);
        if (n > 4 && !strcmp(args[i] + n - 4, ".lua"))
            return cli_usage_error("sweep", "-m/--multirun takes its grid from the command line, not from a script: "
                                            "run %s without -m, or put the grid in it with alphast.grid{...}", args[i]);
    }
    return CLI_CONTINUE;
}

int cmd_sweep(int argc, char **argv)
{
    const char *v[N_OPTS], *args[64];
    int n_args;
    int rc = cli_parse(&spec, argc, argv, v, args, &n_args);
    if (rc != CLI_CONTINUE) return rc;
    if ((rc = check_args(v, args, n_args)) != CLI_CONTINUE) return rc;
    return run(v, args, n_args);
}
