/* bench_model: `make bench`. Times training steps and eval forwards of the
 * four ablation configs at two sizes, gated-attention scaling in the set
 * size and MoE scaling in the expert count, against the sgemm peak of the
 * same run; prints tables and writes JSON. Each measurement runs in a
 * child process of its own (peak RSS per configuration). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "engine/backend.h"
#include "engine/blas_coretype.h"

typedef struct bench_args {
    const char *sections; /* "demo,reference,gated,moe" */
    const char *configs;  /* "baseline,gated,moe,gated_moe" */
    const char *json, *compare;
    const char *precision; /* "32-true", "bf16-mixed" */
    const char *device;    /* "cpu", "cuda" */
    bench_run_opts run;
    double budget_s;      /* per gated-attention size */
    int max_cells;
    int compare_only; /* print the comparison of --json and --compare, measure nothing */
} bench_args;

static const char usage[] =
    "usage: bench_model [--sections demo,reference,gated,moe,sample] [--configs baseline,gated,moe,gated_moe]\n"
    "                   [--steps 20] [--warmup 3] [--budget 120] [--max-cells 32768]\n"
    "                   [--json bench/results/alphast.json] [--compare bench/results/pytorch.json]\n"
    "                   [--precision 32-true|bf16-mixed] [--device cpu|cuda] [--sample-align off|on]\n"
    "       bench_model --compare-only --json ALPHAST.json --compare PYTORCH.json   (no measuring)\n"
    "Threads: OPENBLAS_NUM_THREADS (default 2). --precision bf16-mixed runs the GEMMs of linear, matmul\n"
    "and bmm in bf16 (training.precision's mode; torch_bench.py --precision bf16-mixed is autocast).\n"
    "--device cuda runs every case on the CUDA backend, each timed step ending synchronised; arena MB\n"
    "and state MB (parameters, gradients, AdamW moments) are then GPU memory. More sections:\n"
    "reference32 (the reference size at B=32 sets), cells (the gated model, G=200, one set of\n"
    "4k ... --max-cells cells), sample (reverse diffusion, ms per network evaluation and cells per second,\n"
    "reference size, B=4 and B=32; torch_bench.py's twin sampler beside it; --sample-align on turns each\n"
    "x0 prediction onto the state, as position_loss: aligned, the default, samples), gemm (the\n"
    "reference model's GEMM shapes on OpenBLAS and on oneDNN, best of --steps; ALPHAST_GEMM picks the\n"
    "library of the other sections).\n";

/* Is `name` in the comma-separated `list`? */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        p = comma ? comma + 1 : p + len;
    }
    return 0;
}

static int parse_args(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){"demo,reference,gated,moe,sample", "baseline,gated,moe,gated_moe", "bench/results/alphast.json",
                      "bench/results/pytorch.json", "32-true", "cpu", {.warmup = 3, .steps = 20, .seed = 42}, 120.0, 32768, 0};
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--compare-only")) {
            a->compare_only = 1;
            continue;
        }
        if (!v) return -1;
        if (!strcmp(k, "--sections")) a->sections = v;
        else if (!strcmp(k, "--configs")) a->configs = v;
        else if (!strcmp(k, "--json")) a->json = v;
        else if (!strcmp(k, "--compare")) a->compare = v;
        else if (!strcmp(k, "--steps")) a->run.steps = atoi(v);
        else if (!strcmp(k, "--warmup")) a->run.warmup = atoi(v);
        else if (!strcmp(k, "--budget")) a->budget_s = atof(v);
        else if (!strcmp(k, "--max-cells")) a->max_cells = atoi(v);
        else if (!strcmp(k, "--precision") && (!strcmp(v, "32-true") || !strcmp(v, "bf16-mixed"))) a->precision = v;
        else if (!strcmp(k, "--device") && ast_backend_find(v)) a->device = v;
        else if (!strcmp(k, "--sample-align") && (!strcmp(v, "on") || !strcmp(v, "off")))
            a->run.sample_align = !strcmp(v, "on");
        else return -1;
        i++;
    }
    a->run.precision = strcmp(a->precision, "bf16-mixed") ? AST_PRECISION_FP32 : AST_PRECISION_BF16;
    a->run.device = a->device;
    return a->run.steps >= 1 && a->run.warmup >= 0 ? 0 : -1;
}

static double gflops(const bench_timing *t) { return t->step_median_s > 0 ? t->flops_step / t->step_median_s * 1e-9 : 0; }

/* ---- (a), (b): the ablation configs ---------------------------------- */

static void model_header(void)
{
    printf("%-20s %10s %9s %9s %9s %9s %8s %7s %8s %8s %8s\n", "model", "params", "step ms", "cpu ms", "eval ms",
           "GFLOP/st", "GFLOP/s", "%sgemm", "RSS MB", "arena MB", "state MB");
}

static void model_row(const bench_model_case *mc, const bench_timing *t, double peak)
{
    if (!t->ok) {
        printf("%-20s failed: %s\n", mc->name, t->error);
        return;
    }
    printf("%-20s %10lld %9.2f %9.2f %9.2f %9.2f %8.2f %6.1f%% %8.0f %8.0f %8.0f\n", mc->name, (long long)t->params,
           1e3 * t->step_median_s, 1e3 * t->step_cpu_s, 1e3 * t->eval_median_s, t->flops_step * 1e-9, gflops(t),
           100.0 * gflops(t) / peak, t->peak_rss_kb / 1024.0, t->arena_peak / (1024.0 * 1024.0),
           t->state_bytes / (1024.0 * 1024.0));
    if (t->graph_median_s > 0)
        printf("%-20s graph: replayed %.2f ms (%.2fx the step); queueing the step's launches took the host %.2f ms\n", "",
               1e3 * t->graph_median_s, t->step_median_s / t->graph_median_s, 1e3 * t->enqueue_median_s);
    else if (t->graph_note[0])
        printf("%-20s graph: not captured: %s; queueing took the host %.2f ms\n", "", t->graph_note,
               1e3 * t->enqueue_median_s);
}

/* The four configs at `size`; sets > 0 replaces the case's B (and names it). */
static void run_models(const bench_args *a, const char *size, int sets, bench_json *j, double peak)
{
    static const char *const configs[] = {"baseline", "gated", "moe", "gated_moe"};
    const bench_model_case *cases[4];
    bench_model_case mc[4];
    int n = 0;
    for (int i = 0; i < 4; i++)
        if (listed(a->configs, configs[i]) && !bench_model_case_init(&mc[n], configs[i], size)) cases[n] = &mc[n], n++;
    if (!n) return;
    for (int i = 0; sets > 0 && i < n; i++) {
        mc[i].sets = sets;
        snprintf(mc[i].name, sizeof mc[i].name, "%s-b%d/%s", size, sets, mc[i].config);
    }
    printf("\n== %s size: B=%d sets x N=%d cells, G=%d, E=%d, %d layers, %d heads, F=%d ==\n", size, mc[0].sets,
           mc[0].cells, mc[0].cfg.num_genes, mc[0].cfg.d_model, mc[0].cfg.num_layers, mc[0].cfg.num_heads,
           mc[0].cfg.d_ff);
    model_header();
    for (int i = 0; i < n; i++) {
        bench_model_job job = {cases[i], a->run};
        bench_timing t;
        bench_in_child(bench_model_child, &job, &t);
        model_row(cases[i], &t, peak);
        bench_json_model(j, cases[i], &t);
        fflush(stdout);
    }
}

/* ---- (c): gated attention in the set size ---------------------------- */

#define GATED_LONG_STEP_S 10.0

static const ast_optsrc gated_opts[] = {{"gate_type", "headwise", "bench"}, {"use_qk_norm", "true", "bench"}};

static void scaling_header(const char *what)
{
    printf("%-10s %10s %9s %9s %9s %8s %7s %9s %6s\n", what, "params", "step ms", "cpu ms", "GFLOP/st", "GFLOP/s",
           "%sgemm", "RSS MB", "steps");
}

static void scaling_row(const char *label, const bench_timing *t, double peak, const char *note)
{
    if (note || !t->ok) {
        printf("%-10s %s\n", label, note ? note : t->error);
        return;
    }
    printf("%-10s %10lld %9.1f %9.1f %9.2f %8.2f %6.1f%% %9.0f %6d\n", label, (long long)t->active_params,
           1e3 * t->step_median_s, 1e3 * t->step_cpu_s, t->flops_step * 1e-9, gflops(t), 100.0 * gflops(t) / peak,
           t->peak_rss_kb / 1024.0, t->steps);
}

static void run_gated_scaling(const bench_args *a, bench_json *j, double peak)
{
    ast_model_config base;
    ast_model_config_base(&base, 100);
    printf("\n== gated attention alone (headwise + QK norm, tiled core, dropout 0.1), B=1, E=%d, %d heads; "
           "training step = forward + MSE + backward + AdamW; budget %.0f s per step and size ==\n",
           base.d_model, base.num_heads, a->budget_s);
    scaling_header("N");
    double last = 0.0;
    for (int cells = 1024; cells <= a->max_cells; cells *= 2) {
        char label[32], note[160];
        snprintf(label, sizeof label, "%d", cells);
        /* The core is quadratic in N: a step costs about 4x the last size's. */
        double predicted = 4.0 * last;
        if (predicted > a->budget_s) {
            snprintf(note, sizeof note, "skipped: one step predicted at %.0f s > budget %.0f s", predicted,
                     a->budget_s);
            scaling_row(label, NULL, peak, note);
            bench_json_scaling(j, "gated_attention", label, cells, NULL, note);
            last = predicted;
            continue;
        }
        /* Long steps need no warm-up to be representative, and each costs minutes. */
        bench_run_opts run = {.warmup = predicted > GATED_LONG_STEP_S ? 0 : 1, .steps = 3, .seed = a->run.seed,
                              .precision = a->run.precision, .device = a->run.device};
        bench_plugin_job job = {AST_KIND_ATTENTION, "gated", gated_opts, 2,
                                {.d_model = base.d_model, .heads = base.num_heads, .d_ff = base.d_ff,
                                 .d_time = base.d_time, .num_layers = 1, .dropout = base.dropout,
                                 .ln_eps = base.ln_eps},
                                1, cells, run, a->budget_s, 0.0};
        job.flops_step = BENCH_STEP_FLOPS(bench_flops_attention(&base, "gated", 1, cells));
        bench_timing t;
        bench_in_child(bench_plugin_child, &job, &t);
        scaling_row(label, &t, peak, NULL);
        bench_json_scaling(j, "gated_attention", label, cells, &t, NULL);
        last = t.ok ? t.step_median_s : 1e30;
        fflush(stdout);
    }
}

/* ---- (d): MoE in the number of experts ------------------------------- */

#define MOE_WIDTH 256
#define MOE_SETS 4
#define MOE_CELLS 512

static void run_moe_scaling(const bench_args *a, bench_json *j, double peak)
{
    ast_model_config cfg;
    ast_model_config_base(&cfg, 100);
    cfg.d_model = 256;
    cfg.d_ff = MOE_WIDTH;
    printf("\n== MoE FFN alone, top-2, every expert %d wide (expert_hidden: full), E=%d, B=%d x N=%d tokens; "
           "training step = forward + MSE + LB loss + backward + AdamW ==\n",
           MOE_WIDTH, cfg.d_model, MOE_SETS, MOE_CELLS);
    scaling_header("experts");
    for (int n = 4; n <= 64; n *= 2) {
        char label[32], experts[16];
        snprintf(label, sizeof label, "%d", n);
        snprintf(experts, sizeof experts, "%d", n);
        ast_optsrc opts[] = {{"num_experts", experts, "bench"}, {"top_k", "2", "bench"},
                             {"expert_hidden", "full", "bench"}};
        bench_plugin_job job = {AST_KIND_FFN, "moe", opts, 3,
                                {.d_model = cfg.d_model, .heads = cfg.num_heads, .d_ff = cfg.d_ff,
                                 .d_time = cfg.d_time, .num_layers = 1, .dropout = cfg.dropout, .ln_eps = cfg.ln_eps},
                                MOE_SETS, MOE_CELLS, a->run, 0.0, 0.0};
        job.flops_step = BENCH_STEP_FLOPS(bench_flops_ffn(&cfg, "moe", n, 2, MOE_WIDTH, MOE_SETS * MOE_CELLS));
        bench_timing t;
        bench_in_child(bench_plugin_child, &job, &t);
        scaling_row(label, &t, peak, NULL);
        bench_json_scaling(j, "moe_experts", label, n, &t, NULL);
        fflush(stdout);
    }
}

/* ---- (e): the gated model with one set of many cells ------------------- */

#define CELLS_GENES 200

static void run_gated_cells(const bench_args *a, bench_json *j, double peak)
{
    bench_model_case mc;
    bench_model_case_init(&mc, "gated", "reference");
    mc.cfg.num_genes = CELLS_GENES;
    mc.sets = 1;
    /* The distance loss's N x N pairs would outgrow the attention (64 GB
     * at 64k cells); the aligned loss, the default, is O(N). The replay of a
     * step that long gains nothing (1.00x at 32k), so it is not timed. */
    mc.position_loss = AST_POS_LOSS_ALIGNED;
    mc.time_graph = 0;
    printf("\n== the gated model (reference size, G=%d), one set of N cells: training step; budget %.0f s ==\n",
           CELLS_GENES, a->budget_s);
    model_header();
    for (int cells = 4096; cells <= a->max_cells; cells *= 2) {
        char label[32];
        snprintf(label, sizeof label, "%d", cells);
        mc.cells = cells;
        snprintf(mc.name, sizeof mc.name, "cells-%d/gated", cells);
        bench_model_job job = {&mc, {.warmup = 1, .steps = 3, .seed = a->run.seed, .precision = a->run.precision,
                                     .device = a->run.device}};
        bench_timing t;
        bench_in_child(bench_model_child, &job, &t);
        model_row(&mc, &t, peak);
        bench_json_scaling(j, "gated_model_cells", label, cells, &t, NULL);
        fflush(stdout);
        if (t.ok && t.step_median_s * 4 > a->budget_s) break; /* the next size is ~4x (attention is O(N^2)) */
    }
}

/* ---- (f): sampling throughput ----------------------------------------- */

#define SAMPLE_EVALS 50

static void run_sampling(const bench_args *a, bench_json *j)
{
    static const char *const configs[] = {"baseline", "gated", "moe", "gated_moe"};
    static const int sets[] = {4, 32};
    printf("\n== sampling: positions from expression, reference size, B x N=512, %d network evaluations%s ==\n",
           SAMPLE_EVALS, a->run.sample_align ? ", each x0 prediction aligned" : "");
    printf("%-20s %5s %12s %14s\n", "model", "B", "ms per eval", "cells per s");
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 4; i++) {
            bench_model_case mc;
            if (!listed(a->configs, configs[i]) || bench_model_case_init(&mc, configs[i], "reference")) continue;
            mc.sets = sets[k];
            bench_model_job job = {&mc, a->run};
            job.run.steps = SAMPLE_EVALS;
            bench_timing t;
            bench_in_child(bench_sample_child, &job, &t);
            if (t.ok) printf("%-20s %5d %12.2f %14.0f\n", mc.name, mc.sets, 1e3 * t.step_median_s, t.cells_per_s);
            else printf("%-20s %5d failed: %s\n", mc.name, mc.sets, t.error);
            char label[64];
            snprintf(label, sizeof label, k ? "%s-b%d" : "%s", configs[i], sets[k]); /* B=4 keeps its old label */
            bench_json_scaling(j, "sampling", label, SAMPLE_EVALS, &t, NULL);
            fflush(stdout);
        }
}

/* mkdir -p of the directory part of `path`. */
static void make_parent(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0777);
            *p = '/';
        }
    mkdir(dir, 0777);
}

int main(int argc, char **argv)
{
    bench_args a;
    ast_blas_coretype_fix(argv); /* the kernels alphast-run would use */
    if (parse_args(argc, argv, &a)) {
        fputs(usage, stderr);
        return 2;
    }
    if (a.compare_only) {
        if (!bench_print_ratios(a.json, a.compare)) return 0;
        fprintf(stderr, "bench: cannot read %s or %s as bench JSON; pass both with --json and --compare\n", a.json,
                a.compare);
        return 1;
    }
    char bf16[256], precision[300] = "32-true";
    if (a.run.precision == AST_PRECISION_BF16) {
        if (!ast_bf16_supported(bf16, sizeof bf16)) {
            fprintf(stderr, "bench: --precision bf16-mixed cannot run here: %s\n", bf16);
            return 2;
        }
        snprintf(precision, sizeof precision, "bf16-mixed (%s)", bf16);
    }
    bench_timing peak;
    bench_in_child(bench_sgemm_child, NULL, &peak);
    if (!peak.ok) {
        fprintf(stderr, "bench: sgemm peak: %s\n", peak.error);
        return 1;
    }
    printf("alphast bench: OpenBLAS threads %d, sgemm peak (2048^3, best of 5) %.1f GFLOP/s; "
           "timings are medians over %d steps after %d warm-up; precision %s; device %s\n",
           peak.threads, peak.value, a.run.steps, a.run.warmup, precision, a.device);
    make_parent(a.json);
    bench_json *j = bench_json_open(a.json, "alphast", a.precision, a.device, peak.threads, peak.value);
    if (listed(a.sections, "demo")) run_models(&a, "demo", 0, j, peak.value);
    if (listed(a.sections, "reference")) run_models(&a, "reference", 0, j, peak.value);
    if (listed(a.sections, "reference32")) run_models(&a, "reference", 32, j, peak.value);
    if (listed(a.sections, "gated")) run_gated_scaling(&a, j, peak.value);
    if (listed(a.sections, "moe")) run_moe_scaling(&a, j, peak.value);
    if (listed(a.sections, "cells")) run_gated_cells(&a, j, peak.value);
    if (listed(a.sections, "sample")) run_sampling(&a, j);
    if (listed(a.sections, "gemm")) bench_gemm_table(j, a.run.steps);
    int rc = bench_json_close(j);
    bench_print_ratios(a.json, a.compare);
    return rc ? 1 : 0;
}
