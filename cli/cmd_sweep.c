/* `alphast-run sweep SCRIPT.lua`: runs the sweep a Lua script declares,
 * each run in its own `alphast-run train` process, resumable through the
 * sweep directory's ledger: here (the local executor, a process pool) or
 * as a Slurm job array (--executor slurm); --status shows where it is. */
#define _GNU_SOURCE /* sched_getaffinity: the cores this process may use */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sweep/ledger.h"
#include "sweep/sweep.h"
#include "base/strlist.h"
#include "cli.h"
#include "commands.h"
#include "run_setup.h"
#include "sweep_gpus.h"
#include "sweep_mps.h"
#include "sweep_pool.h"
#include "sweep_slurm.h"
#include "sweep_status.h"

enum { OPT_OUT, OPT_JOBS, OPT_THREADS, OPT_FAIL_FAST, OPT_KEEP_GOING, OPT_DRY_RUN, OPT_CFG, OPT_TRUST, OPT_MULTIRUN,
       OPT_CONFIG, OPT_STATUS, OPT_EXECUTOR, OPT_DEVICE, OPT_GPUS, OPT_RUNS_PER_GPU, OPT_MPS, OPT_PARTITION, OPT_TIME,
       OPT_MEM, OPT_CPUS, OPT_TASKS, OPT_SBATCH, OPT_WORKER, N_OPTS };
/* The Slurm options, in the order of their keys in the script's executor table. */
#define FIRST_SLURM_OPT OPT_PARTITION
#define LAST_SLURM_OPT OPT_SBATCH
static const char *const slurm_keys[] = {"partition", "time", "mem", "cpus_per_task", "tasks", "sbatch"};

static const cli_option options[N_OPTS] = {
    [OPT_OUT] = {"out", 'o', "DIR", "sweep directory (default: sweeps/<the sweep's name>)"},
    [OPT_JOBS] = {"jobs", 'j', "N", "runs at a time (default: the script's jobs, else cores / threads)"},
    [OPT_THREADS] = {"threads", 't', "N", "BLAS threads per run (default: the script's threads, else 1)"},
    [OPT_FAIL_FAST] = {"fail-fast", 0, NULL, "at the first failed run, stop the running ones and start no more"},
    [OPT_KEEP_GOING] = {"keep-going", 0, NULL, "finish every run even when some fail (the default)"},
    [OPT_DRY_RUN] = {"dry-run", 'n', NULL, "list the runs, their overrides and states (slurm: print the batch script); run nothing"},
    [OPT_CFG] = {"cfg", 0, NULL, "print each run's resolved config (YAML) and exit"},
    [OPT_TRUST] = {"trust-script", 0, NULL,
                   "give a script you trust Lua's full library: processes, files, native code (or ALPHAST_TRUST_SWEEP=1)"},
    [OPT_MULTIRUN] = {"multirun", 'm', NULL, "no script: the grid of the KEY=V1,V2 overrides over --config (docs/config.md)"},
    [OPT_CONFIG] = {"config", 'c', "FILE", "with -m: the config the grid overrides (default: the bundled configs/starmap.yaml)"},
    [OPT_STATUS] = {"status", 0, "DIR", "show the runs of sweep directory DIR: done, running (where), pending, failed"},
    [OPT_EXECUTOR] = {"executor", 0, "local|slurm", "where the runs go: processes here (default) or a Slurm job array (docs/cluster.md)"},
    [OPT_DEVICE] = CLI_DEVICE_OPTION,
    [OPT_GPUS] = {"gpus", 0, "LIST", "GPUs of the runs on a GPU, one each, round robin: 0,1 (default: the script's, else all)"},
    [OPT_RUNS_PER_GPU] = {"runs-per-gpu", 0, "K", "runs at a time on each GPU (default: the script's, else 1)"},
    [OPT_MPS] = {"mps", 0, "auto|on|off", "runs sharing a GPU run at once under a CUDA MPS daemon of the sweep's (auto: "
                                          "when nvidia-cuda-mps-control is on PATH)"},
    [OPT_PARTITION] = {"partition", 0, "NAME", "slurm: the partition (default: the cluster's)"},
    [OPT_TIME] = {"time", 0, "LIMIT", "slurm: a task's time limit (4:00:00, 1-12); SIGUSR1 comes 2 min before"},
    [OPT_MEM] = {"mem", 0, "SIZE", "slurm: memory per node (8G)"},
    [OPT_CPUS] = {"cpus-per-task", 0, "N", "slurm: CPUs of a task (default: --jobs x --threads)"},
    [OPT_TASKS] = {"tasks", 0, "N", "slurm: tasks in the array (default: one per run not done)"},
    [OPT_SBATCH] = {"sbatch", 0, "OPTIONS", "slurm: more sbatch options, last: '--qos=high --account=lab'"},
    [OPT_WORKER] = {"worker", 0, NULL, "what a Slurm task runs: claim runs until none is left, wait for no other runner"},
};

static const cli_spec spec = {
    .name = "sweep",
    .usage = "[--out DIR] [--jobs N] [--threads N] [--fail-fast | --keep-going] [--dry-run] [--cfg]\n"
             "                         [--device NAME] [--gpus LIST] [--runs-per-gpu K] [--mps auto|on|off]\n"
             "                         [--trust-script] [--executor slurm [--time LIMIT] ...] SCRIPT.lua\n"
             "   or: alphast-run sweep [options] -m [--config FILE] KEY=V1,V2 KEY2=range(1,4) ...\n"
             "   or: alphast-run sweep --status DIR",
    .about = "Runs the sweep a Lua script declares (docs/sweeps.md): every (config, seed) is one\n"
             "`alphast-run train` process, N at a time, in DIR/runs/<name>-<hash>; their states go\n"
             "to DIR/ledger.jsonl. Running the script again resumes: done runs are skipped, interrupted\n"
             "ones continue from their checkpoints, failed ones are retried. Several runners may share\n"
             "DIR without running anything twice. Ctrl-C stops cleanly: each run ends its step with a\n"
             "checkpoint. Exit status 0 when every run is done, 1 when some failed, 130 when interrupted.\n"
             "The script runs restricted: no processes, file writing or native code, and a budget of\n"
             "instructions and memory. --trust-script lifts the restriction for a script you trust.\n"
             "-m/--multirun takes the grid from the command line instead, as Hydra does: every\n"
             "combination of the overrides' values over --config, the runs a script with\n"
             "alphast.grid{...} would declare, in sweeps/<config name> (docs/config.md); seed=V1,V2\n"
             "(or seed.value=) gives each config's seeds, as seeds = {...} does in a script.\n"
             "--executor slurm (or the script's executor = {kind = \"slurm\", ...}) submits one Slurm job\n"
             "array instead and returns: each task runs --jobs runs at a time (default 1) and claims\n"
             "more until none is left; before its time limit (SIGUSR1) or when preempted (SIGTERM)\n"
             "the runs write a checkpoint and go back to pending, and a warned task requeues itself.\n"
             "The Slurm options on the command line win over the script's; --dry-run prints the\n"
             "batch script. --status DIR shows any sweep directory, local or Slurm (docs/cluster.md).\n"
             "Runs whose device is cuda (the config's device:, or --device cuda for all) each get one\n"
             "GPU (CUDA_VISIBLE_DEVICES), round robin over --gpus (or the script's executor = {gpus =\n"
             "{0, 1}, runs_per_gpu = 2}; by default every GPU nvidia-smi -L lists), --runs-per-gpu at\n"
             "a time on each; --jobs then defaults to GPUs x runs per GPU (docs/gpu.md). Runs that\n"
             "share a GPU run side by side under CUDA's Multi-Process Service: the sweep starts a\n"
             "daemon of its own for them and quits it at the end (--mps; its log: DIR/mps-control.log).",
    .options = options,
    .n_options = N_OPTS,
    .max_args = CLI_MAX_OVERRIDES,
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

static int any_on_gpu(const ast_sweep *s, const char *device)
{
    for (int i = 0; i < s->n_runs; i++)
        if (sweep_gpus_wanted(&s->runs[i], device)) return 1;
    return 0;
}

/* The GPUs of the runs on one, into *gpus (freed by the caller): --gpus
 * over the script's over every GPU there is; asked only when a run wants one. */
static int resolve_gpus(const char **v, const ast_sweep *s, sweep_opts *o, int **gpus)
{
    ast_error e = {""};
    *gpus = NULL;
    o->runs_per_gpu = s->runs_per_gpu ? s->runs_per_gpu : 1;
    if (v[OPT_RUNS_PER_GPU] && positive(v[OPT_RUNS_PER_GPU], "runs-per-gpu", &o->runs_per_gpu) != CLI_CONTINUE)
        return CLI_USAGE;
    if (v[OPT_GPUS] && sweep_gpus_parse(v[OPT_GPUS], gpus, &o->n_gpus, &e) < 0) return cli_usage_error("sweep", "%s", e.msg);
    if (!*gpus && !any_on_gpu(s, o->device)) return CLI_CONTINUE;
    if (!*gpus && s->n_gpus) {
        *gpus = ast_xmalloc((size_t)s->n_gpus * sizeof **gpus);
        memcpy(*gpus, s->gpus, (size_t)s->n_gpus * sizeof **gpus);
        o->n_gpus = s->n_gpus;
    }
    if (!*gpus) o->n_gpus = sweep_gpus_detect(gpus);
    o->gpus = *gpus;
    return CLI_CONTINUE;
}

/* Options over the script's fields over the defaults. */
static int resolve_opts(const char **v, const ast_sweep *s, sweep_opts *o, int **gpus)
{
    *gpus = NULL;
    if (v[OPT_FAIL_FAST] && v[OPT_KEEP_GOING]) return cli_usage_error("sweep", "--fail-fast and --keep-going exclude each other");
    ast_error why;
    if (cli_check_device(v[OPT_DEVICE], &why) < 0) return cli_usage_error("sweep", "%s", why.msg);
    o->fail_fast = v[OPT_FAIL_FAST] != NULL;
    o->device = v[OPT_DEVICE];
    o->threads = s->threads ? s->threads : 1;
    if (v[OPT_THREADS] && positive(v[OPT_THREADS], "threads", &o->threads) != CLI_CONTINUE) return CLI_USAGE;
    if (resolve_gpus(v, s, o, gpus) != CLI_CONTINUE) return CLI_USAGE;
    int fit = cores() / o->threads;
    /* Runs on GPUs are as many at once as the GPUs take. */
    if (o->gpus) fit = o->n_gpus * o->runs_per_gpu;
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

/* A worker that ended runs reports when the sweep's last run ends, whichever
 * task ran it (a task that only found everything done writes nothing); the
 * report's claim keeps two tasks that end together from writing it at the
 * same time. */
static void report_when_complete(const ast_sweep *s, const char *dir)
{
    ast_error e = {""};
    ast_claim claim;
    if (sweep_pool_left(s, dir, 0, &e) != 0 || ast_claim_take(dir, "report", &claim, &e) != 1) return;
    report(dir);
    ast_claim_release(&claim);
}

/* The local executor: the runs in processes here (a Slurm task's too). */
static int run_here(ast_sweep *s, const sweep_opts *o, sweep_mps_mode mps_mode)
{
    ast_error e = {""};
    char runs[4200];
    snprintf(runs, sizeof runs, "%s/runs", o->dir);
    sweep_tally tally = {0};
    sweep_mps mps;
    sweep_outcome out = SWEEP_ERROR;
    if (ast_make_dirs(runs, &e) == 0 && sweep_mps_start(&mps, mps_mode, o->gpus != NULL, o->runs_per_gpu, &e) == 0) {
        out = sweep_pool_run(s, o, &tally, &e);
        sweep_mps_stop(&mps, o->dir);
    }
    /* Slurm's warning before the time limit: the task comes back for what is left. */
    if (o->worker && out == SWEEP_INTERRUPTED && tally.stop_signal == SIGUSR1) sweep_slurm_requeue(s, o->dir);
    if (s->report && (out == SWEEP_ALL_DONE || out == SWEEP_SOME_FAILED)) {
        if (!o->worker) report(o->dir);
        else if (tally.ended) report_when_complete(s, o->dir);
    }
    return out == SWEEP_ALL_DONE ? CLI_OK : out == SWEEP_SOME_FAILED ? CLI_FAILED : out == SWEEP_INTERRUPTED ? 130 : cli_fail(&e);
}

/* --executor slurm: the script's Slurm options with the command line's over
 * them; each task gets what this command was given to find the runs. */
static int submit_array(const char **v, const char **args, int n_args, const ast_sweep *s, const sweep_opts *o)
{
    ast_slurm_opts given = {0}, opts = {0};
    ast_error e = {""};
    int rc = CLI_CONTINUE;
    for (int k = FIRST_SLURM_OPT; k <= LAST_SLURM_OPT && rc == CLI_CONTINUE; k++)
        if (v[k] && ast_slurm_opt_set(&given, slurm_keys[k - FIRST_SLURM_OPT], v[k], &e) < 0)
            rc = cli_usage_error("sweep", "--%s: %s", options[k].name, e.msg);
    ast_strlist worker = {0};
    if (v[OPT_FAIL_FAST]) ast_strlist_push(&worker, "--fail-fast");
    if (s->trusted) ast_strlist_push(&worker, "--trust-script");
    if (v[OPT_MULTIRUN]) ast_strlist_push(&worker, "-m");
    if (v[OPT_CONFIG]) ast_strlist_push(&worker, "--config"), ast_strlist_push(&worker, v[OPT_CONFIG]);
    for (int k = OPT_DEVICE; k <= OPT_MPS; k++) /* each task places its runs on the GPUs it was given, as asked */
        if (v[k]) {
            char flag[32];
            snprintf(flag, sizeof flag, "--%s", options[k].name);
            ast_strlist_push(&worker, flag), ast_strlist_push(&worker, v[k]);
        }
    for (int i = 0; i < n_args; i++) ast_strlist_push(&worker, args[i]);
    ast_slurm_opts_override(&opts, &s->slurm_opts);
    ast_slurm_opts_override(&opts, &given);
    /* A task runs one run at a time unless --jobs says otherwise: the
     * script's jobs are about this machine, the array's size about the cluster. */
    sweep_submission sub = {.sweep = s, .opts = &opts, .dir = o->dir, .worker = (const char *const *)worker.v,
                            .n_worker = worker.n, .jobs = v[OPT_JOBS] ? o->jobs : 1, .threads = o->threads,
                            .dry_run = v[OPT_DRY_RUN] != NULL};
    if (rc == CLI_CONTINUE) rc = sweep_slurm_submit(&sub);
    ast_strlist_free(&worker);
    ast_slurm_opts_free(&given);
    ast_slurm_opts_free(&opts);
    return rc;
}

/* The first Slurm option given, or -1. */
static int slurm_option_given(const char **v)
{
    for (int k = FIRST_SLURM_OPT; k <= LAST_SLURM_OPT; k++)
        if (v[k]) return k;
    return -1;
}

static int run(const char **v, const char **args, int n_args)
{
    ast_error e = {""};
    ast_sweep *s = load(v, args, n_args, &e);
    if (!s) return cli_fail(&e);
    sweep_opts o = {0};
    int *gpus = NULL;
    int rc = resolve_opts(v, s, &o, &gpus);
    sweep_mps_mode mps = SWEEP_MPS_AUTO;
    if (rc == CLI_CONTINUE && v[OPT_MPS] && sweep_mps_mode_parse(v[OPT_MPS], &mps) < 0)
        rc = cli_usage_error("sweep", "--mps: expected auto, on or off, got '%s'", v[OPT_MPS]);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s", v[OPT_OUT] ? "" : "sweeps/", v[OPT_OUT] ? v[OPT_OUT] : s->name);
    o.dir = dir;
    o.worker = v[OPT_WORKER] != NULL;
    /* A worker runs its share here, whatever the script's executor says. */
    int slurm = !o.worker && (v[OPT_EXECUTOR] ? !strcmp(v[OPT_EXECUTOR], "slurm") : s->slurm);
    int stray = slurm ? -1 : slurm_option_given(v);
    if (rc == CLI_CONTINUE && stray >= 0)
        rc = cli_usage_error("sweep", "--%s is a Slurm option: it goes with --executor slurm (or the script's "
                                      "executor = \"slurm\")", options[stray].name);
    if (rc == CLI_CONTINUE && v[OPT_CFG]) {
        print_configs(s);
        rc = CLI_OK;
    }
    if (rc == CLI_CONTINUE && slurm) rc = submit_array(v, args, n_args, s, &o);
    if (rc == CLI_CONTINUE && v[OPT_DRY_RUN]) {
        list_runs(s, dir);
        rc = CLI_OK;
    }
    if (rc == CLI_CONTINUE) rc = run_here(s, &o, mps);
    ast_sweep_free(s);
    free(gpus);
    return rc;
}

/* A script, or with -m overrides and no script. */
static int check_args(const char **v, const char **args, int n_args)
{
    if (v[OPT_STATUS] && (n_args || v[OPT_MULTIRUN]))
        return cli_usage_error("sweep", "--status DIR shows a sweep directory: it takes no script or grid");
    if (v[OPT_STATUS]) return CLI_CONTINUE;
    if (v[OPT_EXECUTOR] && strcmp(v[OPT_EXECUTOR], "local") && strcmp(v[OPT_EXECUTOR], "slurm"))
        return cli_usage_error("sweep", "--executor: expected local or slurm, got '%s'", v[OPT_EXECUTOR]);
    if (v[OPT_WORKER] && v[OPT_EXECUTOR])
        return cli_usage_error("sweep", "--worker is what a Slurm task runs; it takes no --executor");
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
    const char *v[N_OPTS], *args[CLI_MAX_OVERRIDES];
    int n_args;
    int rc = cli_parse(&spec, argc, argv, v, args, &n_args);
    if (rc != CLI_CONTINUE) return rc;
    if ((rc = check_args(v, args, n_args)) != CLI_CONTINUE) return rc;
    return v[OPT_STATUS] ? sweep_status(v[OPT_STATUS]) : run(v, args, n_args);
}
