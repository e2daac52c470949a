/* The Slurm executor without Slurm (tests/test_slurm.sh runs it against
 * real daemons): its options as the script and the command line give them,
 * the batch script they make, `--dry-run`, the ledger and claims that
 * `--status` reads, and a worker stopped by Slurm's warning signal, whose
 * runs go back to pending and continue with the same losses. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sweep/ledger.h"
#include "sweep/slurm.h"
#include "sweep/sweep.h"
#include "test_files.h"

#define SCRIPTS ALPHAST_SOURCE_DIR "/tests/data/sweeps/"
#define CLI ALPHAST_BUILD_DIR "/alphast-run"

/* ---- helpers ----------------------------------------------------------- */

static char *tmp_dir(void)
{
    static char buf[8][64];
    static int i;
    char *d = buf[i++ % 8];
    strcpy(d, "/tmp/alphast-slurm-XXXXXX");
    cr_assert(mkdtemp(d));
    return d;
}


static void assert_has(const char *text, const char *part)
{
    cr_assert(text && strstr(text, part), "expected \"%s\" in:\n%s", part, text ? text : "(null)");
}

/* `alphast-run ARGS` with SLURM_* unset (a test may run inside a job), its
 * stdout and stderr into *out; its exit status. */
static int cli(const char *args, char **out)
{
    char cmd[2048], path[] = "/tmp/alphast-slurm-out-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    snprintf(cmd, sizeof cmd, "env -u SLURM_JOB_ID -u SLURM_ARRAY_JOB_ID -u SLURM_ARRAY_TASK_ID %s %s >%s 2>&1", CLI,
             args, path);
    int status = system(cmd);
    *out = test_read_file(path);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static ast_slurm_opts opts_of(const char *const *kv)
{
    ast_slurm_opts o = {0};
    ast_error e = {""};
    for (; kv[0]; kv += 2) cr_assert_eq(ast_slurm_opt_set(&o, kv[0], kv[1], &e), 0, "%s=%s: %s", kv[0], kv[1], e.msg);
    return o;
}

/* ---- options --------------------------------------------------------------- */

Test(slurm, time_limits_are_read_in_every_form_slurm_takes)
{
    static const struct { const char *text; long seconds; } cases[] = {
        {"90", 5400},         {"2:30", 150},          {"4:00:00", 14400}, {"1-12", 129600},
        {"1-0:30", 88200},    {"1-2:03:04", 93784},   {"UNLIMITED", 0},   {"infinite", 0},
        {"4h", -1},           {"", -1},               {"1:2:3:4", -1},    {"1-", -1},
        {"-5", -1},           {"1:60", -1},           {"0", -1},          {"1-1-1", -1},
        {"9999999999", -1},   {"1:-1", -1},           {" 5", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_assert_eq(ast_slurm_time_seconds(cases[i].text), cases[i].seconds, "'%s'", cases[i].text);
}

Test(slurm, bad_option_values_say_what_a_good_one_looks_like)
{
    static const char *const cases[][3] = {
        {"partition", "gpu a", "is not a partition name"},
        {"partition", "", "is not a partition name"},
        {"time", "4h", "is not a Slurm time limit: minutes (90), hours:minutes:seconds (4:00:00)"},
        {"mem", "8GB", "is not an amount of memory per node"},
        {"mem", "lots", "is not an amount of memory"},
        {"cpus_per_task", "0", "is not a whole number from 1 to 4096"},
        {"tasks", "two", "is not a whole number from 1 to"},
        {"sbatch", "qos=high", "'qos=high' is not an sbatch option"},
        {"sbatch", "--comment=\"a", "each one word without quotes"},
        {"sbatch", "  ", "no option given"},
        {"nodes", "2", "'nodes' is not a Slurm option (known: partition, time"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ast_slurm_opts o = {0};
        ast_error e = {""};
        cr_assert_eq(ast_slurm_opt_set(&o, cases[i][0], cases[i][1], &e), -1, "%s=%s accepted", cases[i][0], cases[i][1]);
        assert_has(e.msg, cases[i][2]);
        ast_slurm_opts_free(&o);
    }
}

Test(slurm, command_line_options_win_over_the_script_s_key_by_key)
{
    ast_slurm_opts script = opts_of((const char *const[]){"partition", "debug", "time", "10", "mem", "1G", "sbatch",
                                                          "--qos=low --comment=x", NULL});
    ast_slurm_opts given = opts_of((const char *const[]){"time", "2:00:00", "tasks", "3", "sbatch", "--qos=high", NULL});
    ast_slurm_opts o = {0};
    ast_slurm_opts_override(&o, &script);
    ast_slurm_opts_override(&o, &given);
    cr_assert_str_eq(o.partition, "debug");
    cr_assert_str_eq(o.time, "2:00:00");
    cr_assert_str_eq(o.mem, "1G");
    cr_assert_eq(o.tasks, 3);
    cr_assert_eq(o.cpus_per_task, 0);
    cr_assert_eq(o.n_sbatch, 1, "the command line's sbatch options replace the script's");
    cr_assert_str_eq(o.sbatch[0], "--qos=high");
    ast_slurm_opts_free(&o), ast_slurm_opts_free(&script), ast_slurm_opts_free(&given);
}

/* ---- the batch script ------------------------------------------------------- */

static char *script_for(const ast_slurm_opts *o, const char *dir, ast_error *e)
{
    const char *worker[] = {"/opt/alphast/bin/alphast-run", "sweep", "--worker", "--out", dir, "it's here.lua"};
    ast_slurm_array a = {.name = "my sweep/1", .sweep_dir = dir, .workdir = "/home/me", .worker = worker,
                         .n_worker = 6, .tasks = 12, .cpus_per_task = 4};
    return ast_slurm_script(o, &a, e);
}

Test(slurm, the_batch_script_holds_every_option_and_quotes_the_worker)
{
    ast_slurm_opts o = opts_of((const char *const[]){"partition", "gpu,cpu", "time", "4:00:00", "mem", "8G", "sbatch",
                                                     "--qos=high --array=0-11%2", NULL});
    ast_error e = {""};
    char *s = script_for(&o, "/scratch/sw", &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(strncmp(s, "#!/bin/bash\n", 12), 0);
    const char *lines[] = {"#SBATCH --job-name=alphast-my_sweep_1\n", "#SBATCH --array=0-11\n",
                           "#SBATCH --output=/scratch/sw/slurm/%A_%a.out\n", "#SBATCH --open-mode=append\n",
                           "#SBATCH --chdir=/home/me\n", "#SBATCH --cpus-per-task=4\n", "#SBATCH --requeue\n",
                           "#SBATCH --signal=B:USR1@120\n", "#SBATCH --partition=gpu,cpu\n", "#SBATCH --time=4:00:00\n",
                           "#SBATCH --mem=8G\n", "#SBATCH --qos=high\n", "'it'\\''s here.lua'"};
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++) assert_has(s, lines[i]);
    assert_has(s, "exec '/opt/alphast/bin/alphast-run' 'sweep' '--worker'");
    /* The extra options come last, so they win: a throttled array. */
    cr_assert_gt(strstr(s, "#SBATCH --array=0-11%2"), strstr(s, "#SBATCH --array=0-11\n"));
    /* sbatch reads #SBATCH lines only up to the first command. */
    cr_assert_gt(strstr(s, "\nexec "), strstr(s, "#SBATCH --array=0-11%2"));
    free(s);
    ast_slurm_opts_free(&o);
}

Test(slurm, a_short_time_limit_gets_its_warning_a_quarter_before)
{
    ast_slurm_opts o = opts_of((const char *const[]){"time", "4", NULL});
    ast_error e = {""};
    char *s = script_for(&o, "/scratch/sw", &e);
    cr_assert(s, "%s", e.msg);
    assert_has(s, "#SBATCH --signal=B:USR1@60\n");
    cr_assert_null(strstr(s, "--partition"), "no partition unless asked:\n%s", s);
    free(s);
    ast_slurm_opts_free(&o);
}

Test(slurm, a_path_an_sbatch_line_cannot_hold_is_refused)
{
    ast_slurm_opts o = {0};
    const char *bad[] = {"/scratch/my sweep", "/scratch/100%", "/scratch/it's"};
    for (int i = 0; i < 3; i++) {
        ast_error e = {""};
        cr_assert_null(script_for(&o, bad[i], &e), "%s accepted", bad[i]);
        assert_has(e.msg, "the sweep directory");
        assert_has(e.msg, "no blanks, quotes, backslashes or '%'");
    }
}

/* ---- the script's executor table -------------------------------------------- */

static char *write_script(const char *body)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/s.lua", tmp_dir());
    FILE *f = fopen(path, "w");
    fprintf(f, "local a = require 'alphast'\na.sweep{base = a.config('%stiny.yaml'), %s}\n", SCRIPTS, body);
    fclose(f);
    return path;
}

Test(slurm, a_script_names_its_executor_and_slurm_options)
{
    ast_error e = {""};
    ast_sweep *s = ast_sweep_load(SCRIPTS "slurm.lua", &e);
    cr_assert(s, "%s", e.msg);
    cr_assert_eq(s->slurm, 1);
    cr_assert_str_eq(s->slurm_opts.partition, "debug");
    cr_assert_str_eq(s->slurm_opts.time, "0:10:00");
    cr_assert_str_eq(s->slurm_opts.mem, "1G");
    cr_assert_eq(s->slurm_opts.cpus_per_task, 1);
    cr_assert_eq(s->slurm_opts.n_sbatch, 2);
    cr_assert_str_eq(s->slurm_opts.sbatch[1], "--ntasks=1");
    ast_sweep_free(s);
    s = ast_sweep_load(write_script("executor = 'local'"), &e);
    cr_assert(s && !s->slurm, "%s", e.msg);
    ast_sweep_free(s);
}

Test(slurm, a_bad_executor_table_fails_at_the_sweep_line)
{
    static const char *const cases[][2] = {
        {"executor = 'pbs'", "sweep: executor must be \"local\" or \"slurm\""},
        {"executor = 5", "sweep: executor must be \"local\", \"slurm\" or a table"},
        {"executor = {kind = 'slurm', partitoin = 'x'}", "unknown option 'partitoin'; did you mean 'partition'?"},
        {"executor = {kind = 'slurm', time = '4h'}", "sweep: executor.time: '4h' is not a Slurm time limit"},
        {"executor = {kind = 'slurm', tasks = 1.5}", "sweep: executor.tasks: '1.5' is not a whole number"},
        {"executor = {kind = 'slurm', sbatch = {'qos'}}", "sweep: executor.sbatch: 'qos' is not an sbatch option"},
        {"executor = {kind = 'slurm', sbatch = {1}}", "sweep: executor.sbatch[1] is not a string"},
        {"executor = {kind = 'slurm', mem = true}", "sweep: executor.mem must be a string or a whole number, not a boolean"},
        {"executor = {'slurm'}", "sweep: executor options are named"},
        {"executor = {kind = 'cloud'}", "sweep: executor.kind must be \"local\" or \"slurm\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ast_error e = {""};
        ast_sweep *s = ast_sweep_load(write_script(cases[i][0]), &e);
        cr_assert_null(s, "%s loaded", cases[i][0]);
        assert_has(e.msg, cases[i][1]);
        assert_has(e.msg, "s.lua:2:"); /* the script's line */
    }
}

/* ---- the command line ----------------------------------------------------------- */

Test(slurm, dry_run_prints_the_batch_script_and_writes_nothing, .timeout = 30)
{
    char *dir = tmp_dir(), args[1024], sweep_dir[256], *out = NULL;
    snprintf(sweep_dir, sizeof sweep_dir, "%s/sw", dir);
    snprintf(args, sizeof args, "sweep --dry-run --out %s --time 1:00:00 --tasks 3 --jobs 2 --threads 2 --mps off " SCRIPTS
             "slurm.lua", sweep_dir);
    cr_assert_eq(cli(args, &out), 0, "%s", out);
    /* The script's options, the command line's over them. */
    const char *parts[] = {"#SBATCH --array=0-2\n", "#SBATCH --time=1:00:00\n", "#SBATCH --partition=debug\n",
                           "#SBATCH --mem=1G\n", "#SBATCH --cpus-per-task=1\n", "#SBATCH --comment=from-the-script\n",
                           "'--jobs' '2'", "'--threads' '2'", "'--mps' 'off'", "'" SCRIPTS "slurm.lua'",
                           "4 of 4 runs not done", "nothing written or submitted"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) assert_has(out, parts[i]);
    assert_has(out, "'--out' '");
    assert_has(out, sweep_dir);
    cr_assert(access(sweep_dir, F_OK), "a dry run creates nothing");
    free(out);
}

Test(slurm, the_default_array_has_a_task_per_run_one_run_at_a_time, .timeout = 30)
{
    char args[512], *out = NULL;
    snprintf(args, sizeof args, "sweep --executor slurm --dry-run --out %s/sw " SCRIPTS "ablation.lua", tmp_dir());
    cr_assert_eq(cli(args, &out), 0, "%s", out);
    assert_has(out, "#SBATCH --array=0-7\n");
    assert_has(out, "#SBATCH --cpus-per-task=1\n");
    assert_has(out, "'--jobs' '1' '--threads' '1'");
    free(out);
}

Test(slurm, misplaced_slurm_options_are_usage_errors, .timeout = 30)
{
    static const char *const cases[][2] = {
        {"sweep --time 10 " SCRIPTS "ablation.lua", "--time is a Slurm option: it goes with --executor slurm"},
        {"sweep --executor slurm --time 4h --dry-run " SCRIPTS "ablation.lua", "--time: '4h' is not a Slurm time limit"},
        {"sweep --executor slurm --cpus-per-task 0 --dry-run " SCRIPTS "ablation.lua", "--cpus-per-task: '0' is not"},
        {"sweep --executor pbs " SCRIPTS "ablation.lua", "--executor: expected local or slurm, got 'pbs'"},
        {"sweep --worker --executor slurm " SCRIPTS "ablation.lua", "it takes no --executor"},
        {"sweep --status /tmp " SCRIPTS "ablation.lua", "--status DIR shows a sweep directory: it takes no script"},
        {"sweep --executor local --mem 1G " SCRIPTS "slurm.lua", "--mem is a Slurm option"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out = NULL;
        cr_assert_eq(cli(cases[i][0], &out), 2, "%s: %s", cases[i][0], out);
        assert_has(out, cases[i][1]);
        free(out);
    }
}

/* ---- what --status reads ---------------------------------------------------------- */

static void append(const char *dir, const char *run, ast_run_state st, const char *reason, const char *host,
                   const char *job)
{
    ast_error e = {""};
    ast_ledger_entry en = {.run = run, .config_name = "A", .hash = "1", .dir = "runs/x", .seed = 1, .state = st,
                           .pid = 42, .exit_code = -1, .reason = reason, .host = host, .job = job};
    cr_assert_eq(ast_ledger_append(dir, &en, &e), 0, "%s", e.msg);
}

Test(slurm, the_ledger_tells_each_run_s_last_line_and_its_lines_per_state)
{
    char *dir = tmp_dir();
    append(dir, "A-1", AST_RUN_PENDING, NULL, NULL, NULL);
    append(dir, "B-2", AST_RUN_PENDING, NULL, NULL, NULL);
    append(dir, "A-1", AST_RUN_RUNNING, NULL, "node3", "17_2");
    append(dir, "A-1", AST_RUN_PENDING, "preempted", "node3", "17_2");
    append(dir, "A-1", AST_RUN_RUNNING, NULL, "node4", "17_0");
    append(dir, "A-1", AST_RUN_DONE, NULL, "node4", "17_0");
    ast_error e = {""};
    ast_ledger *l = ast_ledger_read(dir, &e);
    cr_assert(l, "%s", e.msg);
    cr_assert_eq(ast_ledger_n_runs(l), 2);
    const ast_ledger_run *a = ast_ledger_run_at(l, 0), *b = ast_ledger_run_at(l, 1);
    cr_assert_str_eq(a->run, "A-1");
    cr_assert_eq(a->state, AST_RUN_DONE);
    cr_assert_null(a->reason, "the reason is the last line's");
    cr_assert_str_eq(a->host, "node4");
    cr_assert_str_eq(a->job, "17_0");
    cr_assert_eq(a->lines[AST_RUN_RUNNING], 2);
    cr_assert_eq(a->lines[AST_RUN_PENDING], 2);
    cr_assert_eq(a->lines[AST_RUN_DONE], 1);
    cr_assert_str_eq(b->run, "B-2");
    cr_assert_eq(b->state, AST_RUN_PENDING);
    cr_assert_null(b->host);
    ast_ledger_free(l);
}

Test(slurm, a_claim_says_who_holds_it_and_whether_it_lives)
{
    char *dir = tmp_dir(), path[256];
    ast_claim_info info;
    ast_error e = {""};
    cr_assert_eq(ast_claim_inspect(dir, "A-1", &info), AST_CLAIM_NONE);
    ast_claim c;
    cr_assert_eq(ast_claim_take(dir, "A-1", &c, &e), 1, "%s", e.msg);
    cr_assert_eq(ast_claim_inspect(dir, "A-1", &info), AST_CLAIM_LIVE);
    cr_assert_eq(info.pid, getpid());
    cr_assert_str_eq(info.host, ast_runner_host());
    cr_assert(info.age >= 0 && info.age < 60, "age %g", info.age);
    ast_claim_release(&c);
    /* A holder that died leaves its file with a free lock. */
    pid_t pid = fork();
    if (pid == 0) {
        setenv("SLURM_ARRAY_JOB_ID", "17", 1), setenv("SLURM_ARRAY_TASK_ID", "3", 1);
        _exit(ast_claim_take(dir, "B-2", &c, &e) == 1 ? 0 : 1);
    }
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_assert_eq(ast_claim_inspect(dir, "B-2", &info), AST_CLAIM_STALE);
    cr_assert_eq(info.pid, pid);
    cr_assert_str_eq(info.job, "17_3");
    cr_assert_eq(ast_claim_inspect(dir, "B-2", &info), AST_CLAIM_STALE, "looking takes nothing over");
    /* Another host's claim cannot be tested here. */
    snprintf(path, sizeof path, "%s/claims/C-3.claim", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"pid\":99,\"host\":\"elsewhere-node\",\"job\":\"5_1\"}\n", f);
    fclose(f);
    cr_assert_eq(ast_claim_inspect(dir, "C-3", &info), AST_CLAIM_REMOTE);
    cr_assert_str_eq(info.host, "elsewhere-node");
    cr_assert_eq(info.pid, 99);
}

Test(slurm, status_shows_every_run_not_done_with_where_and_why, .timeout = 30)
{
    char *dir = tmp_dir(), args[512], path[256], *out = NULL;
    append(dir, "Done-1", AST_RUN_DONE, NULL, "vm", NULL);
    append(dir, "Twice-2", AST_RUN_DONE, NULL, "vm", NULL);
    append(dir, "Twice-2", AST_RUN_DONE, NULL, "vm", NULL);
    append(dir, "Pre-3", AST_RUN_PENDING, "preempted", "node3", "17_2");
    append(dir, "New-4", AST_RUN_PENDING, NULL, NULL, NULL);
    append(dir, "Bad-5", AST_RUN_FAILED, "exit status 1", "vm", NULL);
    append(dir, "Far-6", AST_RUN_RUNNING, NULL, "node9", "17_4");
    append(dir, "Dead-7", AST_RUN_RUNNING, NULL, "vm", NULL);
    snprintf(path, sizeof path, "%s/claims", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/claims/Far-6.claim", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"pid\":77,\"host\":\"node9\",\"job\":\"17_4\"}\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/slurm", dir);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/slurm/jobs", dir);
    f = fopen(path, "w");
    fputs("17 8 1700000000\n21 2 1700000100\n", f);
    fclose(f);
    snprintf(args, sizeof args, "sweep --status %s", dir);
    cr_assert_eq(cli(args, &out), 0, "%s", out);
    const char *parts[] = {": 7 runs: 2 done, 2 running, 2 pending, 1 failed\n",
                           "running  Far-6", "on node9, pid 42, Slurm job 17_4, claimed",
                           "running  Dead-7", "no claim: its runner died; the next runner resumes it",
                           "pending  Pre-3", "preempted: resumes from its checkpoint",
                           "pending  New-4", "not started",
                           "failed   Bad-5", "exit status 1; see ",
                           "warning: Twice-2 was recorded done 2 times",
                           "Slurm job arrays submitted: 17 (8 tasks), 21 (2 tasks)"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) assert_has(out, parts[i]);
    cr_assert_null(strstr(out, "Done-1"), "done runs are counted, not listed:\n%s", out);
    free(out);
    snprintf(args, sizeof args, "sweep --status %s/none", dir);
    cr_assert_eq(cli(args, &out), 1);
    assert_has(out, "none: no ledger.jsonl: not a sweep directory");
    free(out);
}

/* ---- a worker warned by Slurm, here without Slurm ----------------------------------- */

/* The train and epoch lines of a run's metrics.jsonl, without their times. */
static char *losses(const char *sweep_dir, const char *run)
{
    char path[512], line[1024], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof path, "%s/runs/%s/metrics.jsonl", sweep_dir, run);
    FILE *in = fopen(path, "r"), *out = open_memstream(&text, &len);
    cr_assert(in, "%s missing", path);
    while (fgets(line, sizeof line, in)) {
        char *t = strstr(line, "\"time\":"), *comma = t ? strchr(t, ',') : NULL;
        if (comma) memmove(t, comma + 1, strlen(comma + 1) + 1);
        if (strstr(line, "\"kind\":\"train\"") || strstr(line, "\"kind\":\"epoch\"")) fputs(line, out);
    }
    fclose(in), fclose(out);
    return text;
}

static int train_lines(const char *sweep_dir, const char *run)
{
    char path[512], line[1024];
    snprintf(path, sizeof path, "%s/runs/%s/metrics.jsonl", sweep_dir, run);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && fgets(line, sizeof line, f)) n += strstr(line, "\"kind\":\"train\"") != NULL;
    if (f) fclose(f);
    return n;
}

Test(slurm, a_warned_worker_checkpoints_its_runs_and_they_resume_exactly, .timeout = 120)
{
    ast_error e = {""};
    ast_sweep *s = ast_sweep_load(SCRIPTS "slurm_preempt.lua", &e);
    cr_assert(s, "%s", e.msg);
    char *dir = tmp_dir(), ref[256], stopped[256], args[512], *out = NULL;
    snprintf(ref, sizeof ref, "%s/ref", dir);
    snprintf(stopped, sizeof stopped, "%s/stopped", dir);
    snprintf(args, sizeof args, "sweep --jobs 2 --out %s " SCRIPTS "slurm_preempt.lua", ref);
    cr_assert_eq(cli(args, &out), 0, "%s", out);
    free(out);

    pid_t worker = fork();
    if (worker == 0) {
        unsetenv("SLURM_JOB_ID"); /* no scontrol requeue here */
        freopen("/dev/null", "w", stdout), freopen("/dev/null", "w", stderr);
        execl(CLI, "alphast-run", "sweep", "--worker", "--jobs", "2", "--out", stopped, SCRIPTS "slurm_preempt.lua",
              (char *)NULL);
        _exit(127);
    }
    while (train_lines(stopped, s->runs[0].id) < 20 || train_lines(stopped, s->runs[1].id) < 20) {
        cr_assert_eq(waitpid(worker, NULL, WNOHANG), 0, "the worker ended before its runs were under way");
        usleep(10000);
    }
    kill(worker, SIGUSR1);
    int status;
    cr_assert_eq(waitpid(worker, &status, 0), worker);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 130, "status %d", status);
    ast_ledger *l = ast_ledger_read(stopped, &e);
    for (int i = 0; i < 2; i++) {
        const ast_ledger_run *r = ast_ledger_run_at(l, i);
        cr_assert_eq(r->state, AST_RUN_PENDING, "%s", r->run);
        cr_assert_str_eq(r->reason, "preempted");
        cr_assert_lt(train_lines(stopped, r->run), 1500, "stopped mid-run");
    }
    ast_ledger_free(l);

    snprintf(args, sizeof args, "sweep --worker --jobs 2 --out %s " SCRIPTS "slurm_preempt.lua", stopped);
    cr_assert_eq(cli(args, &out), 0, "%s", out);
    free(out);
    l = ast_ledger_read(stopped, &e);
    for (int i = 0; i < 2; i++) {
        const char *run = s->runs[i].id;
        cr_assert_eq(ast_ledger_count(l, run, AST_RUN_DONE), 1, "%s done once", run);
        char *a = losses(ref, run), *b = losses(stopped, run);
        cr_assert_str_eq(b, a, "%s: the stopped and resumed run's losses differ from the uninterrupted run's", run);
        free(a), free(b);
    }
    ast_ledger_free(l);
    ast_sweep_free(s);
}
