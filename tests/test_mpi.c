/* One run over MPI (docs/cluster.md "One run over MPI"), with the real
 * mpirun and alphast-run on the bundled STARmap data: two ranks train as
 * one process on the same global batches, ZeRO-1 and replicated AdamW
 * state train alike, a killed two-rank run resumes exactly, the held-out
 * evaluation is the same split over the ranks, and what cannot work is
 * refused without a hang. Built only with configure --with-mpi. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "test_files.h"

#define RUN ALPHAST_BUILD_DIR "/alphast-run"
/* As root (containers, CI) Open MPI's mpirun needs to be told it may run;
 * on a machine of 2 cores 2 ranks of 1 thread each are all there is room
 * for; shared memory (vader) without its single-copy mechanism, which a
 * container's ptrace rules refuse. */
#define MPI_ENV                                                         \
    "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 " \
    "OMPI_MCA_btl_vader_single_copy_mechanism=none; "
#define MPIRUN_CMD ALPHAST_MPIRUN " -np 2 --oversubscribe --mca btl self,vader -x OPENBLAS_NUM_THREADS=1 "
#define MPIRUN MPI_ENV MPIRUN_CMD

/* A demo-size run: 6 epochs of 5 steps, 4 sets of 32 cells per batch, no
 * dropout (each rank has its own dropout stream, see train_dist_loop.h).
 * The evaluation's 64 sets of 32 cells are sampled in 2 passes of 32 sets
 * (core/eval/sample.c): one per rank. */
static const char *config_yaml =
    "seed: {value: 7}\n"
    "training_mode: expr_to_pos\n"
    "data:\n"
    "  path: " ALPHAST_SOURCE_DIR "/data/starmap3d/starmap3d.h5ad\n"
    "  set_size: 32\n"
    "  cache_dir: null\n"
    "  preprocessing: {position_key: spatial, cell_type_key: null}\n"
    "  loading: {rotation: true, expression_dropout: 0.0}\n"
    "diffusion: {diffusion_steps: 100}\n"
    "training: {batch_size: 4, epochs: 6, steps_per_epoch: 5, val_sets: 4, val_t_points: 2, early_stopping: false,\n"
    "           learning_rate: 1e-3}\n"
    "mlp_in_expression_setting: {mlp_in_expression_dims: 16, mlp_out_expression_dims: 16}\n"
    "mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 8, mlp_out_diffusion_time_dims: 8}\n"
    "PositionMLP_setting: {hidden_dims: 8}\n"
    "TransformerLayer_setting: {num_layers: 1, num_heads: 2, dim_ff_expression: 16, dim_ff_diffusion_time: 8,\n"
    "                           dropout: 0.0}\n"
    "mlp_out_expression_setting: {hidden_dims: 16}\n"
    "mlp_out_position_norm_setting: {hidden_dims: 8}\n"
    "sampling: {num_steps: 3}\n"
    "evaluation: {protocol: oracle_neighbourhoods, sets: 64, noise_seeds: 2}\n";

static char tmp[64];

static void make_tmp(void)
{
    cr_assert(ALPHAST_MPIRUN[0], "configure found no mpirun: apt-get install openmpi-bin, then run configure again");
    /* Sanitizer builds: Open MPI's own leaks are suppressed by frames of its
     * libraries (tests/lsan.supp), which have no frame pointers, so only the
     * slow unwinder sees them. The ranks inherit mpirun's environment. */
    const char *lsan = getenv("LSAN_OPTIONS");
    char opts[1024];
    snprintf(opts, sizeof opts, "%s%sfast_unwind_on_malloc=0", lsan ? lsan : "", lsan && *lsan ? ":" : "");
    setenv("LSAN_OPTIONS", opts, 1);
    snprintf(tmp, sizeof tmp, "/tmp/alphast-mpi-XXXXXX");
    cr_assert(mkdtemp(tmp));
    char path[128];
    snprintf(path, sizeof path, "%s/run.yaml", tmp);
    FILE *f = fopen(path, "w");
    cr_assert(f && fputs(config_yaml, f) >= 0 && fclose(f) == 0);
}

static void remove_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(mpi, .init = make_tmp, .fini = remove_tmp, .timeout = 600);


/* Runs `alphast-run train --config run.yaml --out DIR ...` (prefixed by
 * `launch`: MPIRUN, or "" for one process) in tmp; its output goes to
 * DIR.log. Returns the exit status. */
static int train(const char *launch, const char *dir, const char *fmt, ...)
{
    char args[1024], cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd %s && %s%s train -q --config run.yaml --out %s %s >>%s.log 2>&1", tmp, launch, RUN,
             dir, args, dir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st), "%s did not exit", cmd);
    return WEXITSTATUS(st);
}

/* What a run printed (all its invocations). */
static const char *log_of(const char *dir)
{
    static char path[128];
    snprintf(path, sizeof path, "%s/%s.log", tmp, dir);
    return path;
}

static void train_ok(const char *launch, const char *dir, const char *args)
{
    int st = train(launch, dir, "%s", args);
    if (st != 0) {
        char *text = test_slurp(log_of(dir));
        cr_assert_fail("%s%s exited %d:\n%s", launch, dir, st, text);
    }
}

static char *in_tmp(const char *dir, const char *file)
{
    static char buf[4][256];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s/%s", tmp, dir, file);
    return p;
}

/* The numbers of metrics.jsonl in order: each step's loss and gradient
 * norm, each epoch's validation loss. */
typedef struct metrics {
    double v[512];
    int n;
} metrics;

static void read_metrics(const char *dir, metrics *m)
{
    char *text = test_slurp(in_tmp(dir, "metrics.jsonl"));
    m->n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(line);
        cr_assert(j, "%s: not JSON: %s", dir, line);
        const char *kind = cJSON_GetObjectItem(j, "kind")->valuestring;
        int step = !strcmp(kind, "train");
        const char *keys[2] = {step ? "loss" : "val_loss", step ? "grad_norm" : NULL};
        for (int k = 0; k < 2 && keys[k]; k++) {
            cr_assert_lt(m->n, 512);
            m->v[m->n++] = cJSON_GetObjectItem(j, keys[k])->valuedouble;
        }
        cJSON_Delete(j);
    }
    free(text);
}

/* The largest difference between a and b relative to the magnitude of
 * the values compared (1e-30 for zero). */
static double metrics_diff(const metrics *a, const metrics *b)
{
    cr_assert_eq(a->n, b->n, "%d numbers against %d", a->n, b->n);
    double worst = 0.0;
    for (int i = 0; i < a->n; i++) {
        double d = fabs(a->v[i] - b->v[i]) / fmax(fabs(a->v[i]), 1e-30);
        worst = fmax(worst, d);
    }
    return worst;
}

/* The largest difference of the weights of two files (every tensor but
 * the AdamW state), relative to the largest magnitude of its tensor. */
static double weights_diff(const char *pa, const char *pb)
{
    ast_error e = {""};
    ast_st_file *a = ast_st_open(pa, &e), *b = a ? ast_st_open(pb, &e) : NULL;
    cr_assert(a && b, "%s", e.msg);
    double worst = 0.0;
    int compared = 0;
    for (int i = 0; i < ast_st_count(a); i++) {
        const char *name = ast_st_name(a, i);
        if (!strncmp(name, "optimizer.", 10)) continue;
        int64_t n = ast_st_numel(a, i);
        float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
        cr_assert(ast_st_read_f32(a, name, ast_st_ndim(a, i), ast_st_shape(a, i), x, &e) == 0, "%s", e.msg);
        cr_assert(ast_st_read_f32(b, name, ast_st_ndim(a, i), ast_st_shape(a, i), y, &e) == 0, "%s", e.msg);
        double big = 1e-30, d = 0.0;
        for (int64_t j = 0; j < n; j++) big = fmax(big, fabs(x[j])), d = fmax(d, fabs((double)x[j] - y[j]));
        worst = fmax(worst, d / big);
        compared++;
        free(x), free(y);
    }
    cr_assert_gt(compared, 5);
    ast_st_close(a), ast_st_close(b);
    return worst;
}

/* eval.json without its timing, as text. */
static char *eval_without_seconds(const char *dir)
{
    char *text = test_slurp(in_tmp(dir, "eval.json"));
    cJSON *j = cJSON_Parse(text);
    cr_assert(j, "%s/eval.json is not JSON", dir);
    cJSON_DeleteItemFromObject(j, "seconds");
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    free(text);
    return out;
}

/* The gradient of a batch is a sum over its sets. One process adds all the
 * sets' terms inside its float32 kernels; two ranks each add half, then
 * the two halves are added (in double, rounded once): the same sum in
 * another order, equal up to float32 rounding (2^-24 ~ 6e-8 relative per
 * addition). AdamW divides by the root of the second moment, so the
 * steps and the weights carry these relative differences on, and 30 steps
 * compound them; measured here: 6e-6 on losses, validation losses and
 * gradient norms, 1e-5 on the weights. 1e-4 leaves a factor 10 for other
 * BLAS kernels and CPUs, and is far below what a wrong share (one rank's
 * sets counted twice, a gradient not divided by the ranks: differences of
 * order 1) would give. */
#define ROUNDING_TOLERANCE 1e-4

Test(mpi, two_ranks_train_as_one_process_on_the_same_batches)
{
    train_ok("", "one", "");
    train_ok(MPIRUN, "two", "");
    metrics a, b;
    read_metrics("one", &a);
    read_metrics("two", &b);
    cr_assert_eq(a.n, 6 * (5 * 2 + 1));
    double dm = metrics_diff(&a, &b), dw = weights_diff(in_tmp("one", "checkpoint.safetensors"),
                                                        in_tmp("two", "checkpoint.safetensors"));
    cr_log_info("1 process against 2 ranks: metrics differ by %.3g, weights by %.3g (relative)", dm, dw);
    cr_assert_lt(dm, ROUNDING_TOLERANCE);
    cr_assert_lt(dw, ROUNDING_TOLERANCE);
    /* ZeRO-1 (the default): each rank wrote its part of the AdamW state, a
     * marker says the set is whole, and checkpoint.safetensors holds none. */
    cr_assert_eq(access(in_tmp("two", "checkpoint.shards/step-30.rank-0-of-2.safetensors"), F_OK), 0);
    cr_assert_eq(access(in_tmp("two", "checkpoint.shards/step-30.rank-1-of-2.safetensors"), F_OK), 0);
    char *marker = test_slurp(in_tmp("two", "checkpoint.shards/step-30.complete"));
    cr_assert(strstr(marker, "\"step\": 30, \"ranks\": 2"), "%s", marker);
    free(marker);
    cr_assert_eq(access(in_tmp("two", "checkpoint.shards/step-25.complete"), F_OK), -1, "an older set was kept");
}

/* The AdamW update is elementwise: a rank updating its part of the
 * flattened parameters computes the very numbers of a rank updating all,
 * so ZeRO-1 and replicated state give the same bits. */
Test(mpi, zero1_and_replicated_state_train_alike)
{
    train_ok(MPIRUN, "zero1", "");
    train_ok(MPIRUN, "replicated", "training.optimizer_sharding=replicated");
    metrics a, b;
    read_metrics("zero1", &a);
    read_metrics("replicated", &b);
    cr_assert_eq(metrics_diff(&a, &b), 0.0);
    cr_assert_eq(weights_diff(in_tmp("zero1", "best.safetensors"), in_tmp("replicated", "best.safetensors")), 0.0);
    cr_assert_eq(access(in_tmp("replicated", "checkpoint.shards"), F_OK), -1, "replicated state was split");
}

/* Every pid whose parent is `parent`. */
static int children(pid_t parent, pid_t *out, int most)
{
    int n = 0;
    DIR *d = opendir("/proc");
    cr_assert(d);
    for (struct dirent *x; (x = readdir(d)) && n < most;) {
        char path[300], comm[256], state;
        int pid, ppid;
        snprintf(path, sizeof path, "/proc/%s/stat", x->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fscanf(f, "%d (%255[^)]) %c %d", &pid, comm, &state, &ppid) == 4 && ppid == parent) out[n++] = pid;
        fclose(f);
    }
    closedir(d);
    return n;
}

static int count_lines(const char *path, const char *part)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    int n = 0;
    while (f && fgets(line, sizeof line, f)) n += strstr(line, part) != NULL;
    if (f) fclose(f);
    return n;
}

/* A two-rank run killed (SIGKILL to both ranks, as a crash or a lost node
 * would end it) after its second checkpoint, wherever it then was, and run
 * again: its losses, validation losses and weights are those of a run
 * never interrupted, to the bit. */
Test(mpi, a_killed_run_resumes_exactly)
{
    const char *longer = "training.epochs=24";
    train_ok(MPIRUN, "whole", longer);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && " MPI_ENV "exec " MPIRUN_CMD RUN " train -q --config run.yaml --out killed %s "
             ">killed.log 2>&1", tmp, longer);
    pid_t mpirun = fork();
    cr_assert_geq(mpirun, 0);
    if (mpirun == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct timespec tick = {0, 5 * 1000 * 1000};
    for (int i = 0; i < 24000 && count_lines(in_tmp("killed", "metrics.jsonl"), "\"epoch\"") < 2; i++)
        nanosleep(&tick, NULL);
    pid_t ranks[8];
    int n = children(mpirun, ranks, 8);
    if (n != 2) {
        char *log = test_slurp(log_of("killed"));
        cr_assert_fail("mpirun has %d children:\n%s", n, log);
    }
    for (int i = 0; i < n; i++) kill(ranks[i], SIGKILL);
    int st;
    cr_assert_eq(waitpid(mpirun, &st, 0), mpirun);
    int epochs = count_lines(in_tmp("killed", "metrics.jsonl"), "\"epoch\"");
    cr_assert_lt(epochs, 24, "the run ended before it was killed");
    cr_log_info("killed after %d epochs", epochs);
    train_ok(MPIRUN, "killed", longer);
    metrics a, b;
    read_metrics("whole", &a);
    read_metrics("killed", &b);
    cr_assert_eq(metrics_diff(&a, &b), 0.0);
    cr_assert_eq(weights_diff(in_tmp("whole", "best.safetensors"), in_tmp("killed", "best.safetensors")), 0.0);
    cr_assert_eq(weights_diff(in_tmp("whole", "checkpoint.safetensors"), in_tmp("killed", "checkpoint.safetensors")),
                 0.0);
}

/* Whether two JSON values have the same keys, strings and counts, and
 * numbers within tol of each other (absolute below 1, relative above);
 * the first key that differs, with both values, into where. */
static int json_close(const cJSON *a, const cJSON *b, double tol, char *where, size_t n)
{
    int same = 0;
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b))
        same = fabs(a->valuedouble - b->valuedouble) <= tol * fmax(1.0, fmax(fabs(a->valuedouble), fabs(b->valuedouble)));
    else if (cJSON_IsObject(a) || cJSON_IsArray(a)) {
        same = a->type == b->type && cJSON_GetArraySize(a) == cJSON_GetArraySize(b);
        for (const cJSON *x = a->child, *y = b ? b->child : NULL; same && x; x = x->next, y = y->next)
            same = (!x->string || (y->string && !strcmp(x->string, y->string))) && json_close(x, y, tol, where, n);
        if (!same && a->string) { /* the path from the top: parent/key */
            char inner[256];
            snprintf(inner, sizeof inner, "%s", where);
            snprintf(where, n, "%s/%s", a->string, inner);
        }
        return same;
    } else
        same = cJSON_Compare(a, b, 1);
    if (!same && cJSON_IsNumber(a) && cJSON_IsNumber(b))
        snprintf(where, n, "%s (%.17g against %.17g)", a->string ? a->string : "(an array's value)", a->valuedouble,
                 b->valuedouble);
    else if (!same)
        snprintf(where, n, "%s", a->string ? a->string : "(an array's value)");
    return same;
}

/* A finished one-process run, run again over two ranks, only evaluates its
 * best weights: each rank samples half the sets, and eval.json is the one
 * process's: the same sets, cells and counts, and the same scores to float
 * rounding. Not bit for bit: with OpenBLAS's Haswell/Zen sgemm kernels (an
 * AMD Zen 3) the ranks' placements differ from one process's in the last
 * bits of float32, where the Prescott kernels give identical bits. The
 * scores then differ by up to 2.1e-7 (a rank correlation, whose near ties
 * can swap); 1e-6 is 5 times that and far below any difference a score is
 * read for. Its checkpoint holds the whole AdamW
 * state, which a ZeRO-1 rank takes its part of. */
Test(mpi, the_evaluation_split_over_ranks_is_the_same)
{
    /* One thread, as each rank has: the mlp_regression baseline is fitted by
     * AdamW over 60 epochs, where the thread count's order of summation
     * grows to 2.5e-5 in its scores (the model's placements do not train). */
    train_ok("OPENBLAS_NUM_THREADS=1 ", "eval", "");
    char *alone = eval_without_seconds("eval");
    cr_assert(strstr(alone, "\"sets\":64"), "%s", alone);
    train_ok(MPIRUN, "eval", "");
    char *split = eval_without_seconds("eval");
    cJSON *a = cJSON_Parse(alone), *b = cJSON_Parse(split);
    char where[256] = "";
    cr_assert(json_close(a, b, 1e-6, where, sizeof where), "eval.json differs at %s", where);
    cJSON_Delete(a), cJSON_Delete(b);
    free(alone), free(split);
}

Test(mpi, a_split_state_resumes_only_on_as_many_ranks)
{
    train_ok(MPIRUN, "split", "training.epochs=1");
    cr_assert_eq(train("", "split", "training.epochs=2"), 1);
    char *log = test_slurp(log_of("split"));
    cr_assert(strstr(log, "checkpoint.safetensors: its AdamW state is split over 2 ranks (optimizer_sharding: "
                          "zero1), but this run has 1 rank: resume it as it was run (mpirun -np 2"), "%s", log);
    free(log);
    /* One rank's part lost: the ranks stop together, that rank saying which file. */
    cr_assert_eq(remove(in_tmp("split", "checkpoint.shards/step-5.rank-1-of-2.safetensors")), 0);
    cr_assert_eq(train(MPIRUN, "split", "training.epochs=2"), 1);
    log = test_slurp(log_of("split"));
    cr_assert(strstr(log, "alphast-run: rank 1 of 2: ") && strstr(log, "step-5.rank-1-of-2.safetensors: cannot open"),
              "%s", log);
    free(log);
}

/* Both ranks refuse alike, say so and end as one process would. */
Test(mpi, what_the_ranks_cannot_split_is_refused)
{
    cr_assert_eq(train(MPIRUN, "small", "training.batch_size=1"), 1);
    char *log = test_slurp(log_of("small"));
    cr_assert(strstr(log, "alphast-run: rank 1 of 2: training.batch_size is 1 set, fewer than the 2 ranks"), "%s", log);
    free(log);
    cr_assert_eq(train(MPIRUN, "masked", "masking.enable=true"), 1);
    log = test_slurp(log_of("masked"));
    cr_assert(strstr(log, "masking.enable: masked training runs in one process only for now"), "%s", log);
    free(log);
}

/* Rank 0 alone fails (metrics.jsonl is a directory it cannot open) while
 * rank 1 goes on into the first step's exchange: the run must end with
 * rank 0's error, not wait forever. */
Test(mpi, a_failure_on_one_rank_ends_the_run)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s/alone/metrics.jsonl", tmp);
    cr_assert_eq(system(cmd), 0);
    time_t start = time(NULL);
    cr_assert_neq(train(MPIRUN, "alone", ""), 0);
    char *log = test_slurp(log_of("alone"));
    cr_assert(strstr(log, "rank 0 of 2: ") && strstr(log, "metrics.jsonl: cannot open for writing"), "%s", log);
    free(log);
    cr_assert_lt(time(NULL) - start, 120);
}

/* Issue 25: a signal reaching one rank after the training loop ended (the
 * summary, the held-out evaluation) killed that rank by the signal, and
 * with it the run. Now it is handled as in the loop: the ranks stop
 * together before the evaluation (exit 75; run again, the run is
 * evaluated), or, with the evaluation under way, let it finish. */
Test(mpi, a_signal_after_the_loop_does_not_kill_a_rank)
{
    const char *args = "training.epochs=2 sampling.num_steps=20";
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cd %s && " MPI_ENV "exec " MPIRUN_CMD RUN " train -q --config run.yaml --out late %s "
             ">late.log 2>&1", tmp, args);
    pid_t mpirun = fork();
    cr_assert_geq(mpirun, 0);
    if (mpirun == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct timespec tick = {0, 5 * 1000 * 1000};
    for (int i = 0; i < 24000 && access(in_tmp("late", "summary.json"), F_OK); i++) nanosleep(&tick, NULL);
    pid_t ranks[8];
    int n = children(mpirun, ranks, 8);
    cr_assert_eq(n, 2, "mpirun has %d children:\n%s", n, test_slurp(log_of("late")));
    cr_assert_eq(kill(ranks[1], SIGUSR1), 0);
    int st;
    cr_assert_eq(waitpid(mpirun, &st, 0), mpirun);
    char *log = test_slurp(log_of("late"));
    cr_assert(WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 75) && !strstr(log, "exited on signal"),
              "status %d:\n%s", st, log);
    if (WEXITSTATUS(st) == 75) {
        cr_log_info("stopped before the evaluation");
        cr_assert(strstr(log, "stopped by signal 10 (User defined signal 1)"), "%s", log);
        cr_assert_eq(access(in_tmp("late", "eval.json"), F_OK), -1, "evaluated although stopped");
        train_ok(MPIRUN, "late", args);
    }
    free(log);
    cr_assert_eq(access(in_tmp("late", "eval.json"), F_OK), 0, "the run was never evaluated");
}
