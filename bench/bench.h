/* bench/bench.h: the pieces of `make bench` (never part of `make check`):
 * model and plugin training steps timed in a child process each, their
 * GEMM FLOP counts, the sgemm peak they are compared with, and the
 * results as a table and JSON. */
#ifndef ALPHAST_BENCH_H
#define ALPHAST_BENCH_H

#include <stdint.h>
#include <stdio.h>

#include "model/loss.h"
#include "model/model.h"

/* ---- what is measured ----------------------------------------------- */

/* One model to time: the four ablation configs at two sizes (docs/model.md §10). */
typedef struct bench_model_case {
    char name[64];       /* "demo/baseline" */
    char config[32];     /* "baseline", "gated", "moe", "gated_moe" */
    char size[16];       /* "demo", "reference" */
    ast_model_config cfg;
    int sets, cells;     /* B, N */
    /* The step's position loss: the twin's distance loss (N x N per set),
     * or the aligned one where sets are whole sections (O(N) memory). */
    ast_pos_loss position_loss;
    int time_graph;      /* on a device, also time the step replayed as a CUDA graph */
} bench_model_case;

/* The ablation config `which` ("baseline" ...) at `size` ("demo" or
 * "reference") into c; 0, or -1 for an unknown name. */
int bench_model_case_init(bench_model_case *c, const char *which, const char *size);

typedef struct bench_timing {
    int ok;                 /* 0: the child failed (see error) */
    char error[256];
    int steps;              /* timed steps */
    double step_median_s;   /* training step: forward + loss + backward + clip + AdamW */
    double step_min_s;
    double step_cpu_s;      /* median process CPU time of a step (all threads): less
                             * sensitive to a shared machine than wall time */
    double eval_median_s;   /* eval-mode forward, no tape */
    double flops_step;      /* GEMM + attention-core FLOPs of one training step */
    double flops_eval;
    int64_t params, active_params;
    size_t arena_peak;      /* bytes of the step arena (device memory with --device cuda) */
    size_t state_bytes;     /* parameters, gradients and AdamW's moments, on the backend */
    long peak_rss_kb;       /* of the child, from wait4 */
    int threads;            /* OpenBLAS threads in the child */
    double value;           /* a single measured number (the sgemm peak, GFLOP/s) */
    double cells_per_s;     /* sampling: cells generated per second of reverse diffusion */
    /* On a device: the median host time to queue a step (its launches; a
     * step is launch-bound when this is near step_median_s), the step
     * replayed as a captured CUDA graph, or why it could not be captured. */
    double enqueue_median_s, graph_median_s;
    char graph_note[200];
} bench_timing;

/* ---- where time goes ------------------------------------------------ */

double bench_now(void);
double bench_cpu_now(void); /* process CPU seconds */
double bench_median(double *v, int n); /* sorts v */
/* OpenBLAS threads from OPENBLAS_NUM_THREADS (default 2), applied in the caller. */
int bench_threads(void);

/* Runs fn(arg, out) in a forked child so peak RSS is the child's own; the
 * parent gets *out back and peak_rss_kb filled. */
typedef void (*bench_child_fn)(const void *arg, bench_timing *out);
void bench_in_child(bench_child_fn fn, const void *arg, bench_timing *out);

/* Best of `reps` C = A B products of n x n x n, in GFLOP/s. */
double bench_sgemm_peak(int n, int reps);
/* The same in a child (bench_child_fn; arg unused): out->value. */
void bench_sgemm_child(const void *arg, bench_timing *out);

typedef struct bench_json bench_json;
/* The model's GEMM shapes through ast_sgemm on OpenBLAS and on oneDNN, best
 * of reps each: a table on stdout and "gemm" rows in j. In this process. */
void bench_gemm_table(bench_json *j, int reps);

/* ---- the measurements (run inside a child) -------------------------- */

typedef struct bench_run_opts {
    int warmup, steps;
    uint64_t seed;
    ast_precision precision; /* of linear, matmul and bmm (--precision) */
    const char *device;      /* the backend (--device): "cpu" or "cuda"; each step ends synchronised */
    int sample_align;        /* the sampler turns each x0 prediction onto the state (--sample-align on) */
} bench_run_opts;

typedef struct bench_model_job {
    const bench_model_case *mc;
    bench_run_opts run;
} bench_model_job;
/* Times the whole model: training steps and eval forwards. */
void bench_model_child(const void *job, bench_timing *out);
/* Times ast_sample (reverse diffusion, expression -> positions, `steps`
 * network evaluations in run.steps) of the model: out->cells_per_s. */
void bench_sample_child(const void *job, bench_timing *out);

/* One plugin alone: its forward, an MSE loss against a random target,
 * backward and AdamW over its parameters. */
typedef struct bench_plugin_job {
    ast_plugin_kind kind;
    const char *plugin;       /* "gated", "moe" */
    const ast_optsrc *opts;
    int n_opts;
    ast_layer_dims dims;
    int sets, cells;          /* input [B, N, E] */
    bench_run_opts run;
    double budget_s;          /* stop timing once this much time is spent */
    double flops_step;        /* filled by the caller (bench_flops_*) */
} bench_plugin_job;
void bench_plugin_child(const void *job, bench_timing *out);

/* ---- FLOPs (GEMMs 2 M N K; backward twice the forward) -------------- */

/* Forward FLOPs of the model on B sets of N cells. */
double bench_flops_model_forward(const bench_model_case *mc);
/* FLOPs of the model's training step on them: what the backward must do. */
double bench_flops_model_step(const bench_model_case *mc);
/* Forward FLOPs of one layer's attention plugin / FFN plugin on M = B N tokens. */
double bench_flops_attention(const ast_model_config *cfg, const char *attention, int64_t sets, int64_t cells);
double bench_flops_ffn(const ast_model_config *cfg, const char *ffn, int num_experts, int top_k, int expert_width,
                       int64_t tokens);
/* A training step is forward + backward = 3x the forward FLOPs. */
#define BENCH_STEP_FLOPS(fwd) (3.0 * (fwd))

/* ---- JSON ------------------------------------------------------------ */

/* precision: "32-true" or "bf16-mixed", training.precision's names;
 * device: the backend, "cpu" or "cuda". */
bench_json *bench_json_open(const char *path, const char *impl, const char *precision, const char *device,
                            int threads, double sgemm_gflops);
void bench_json_model(bench_json *j, const bench_model_case *mc, const bench_timing *t);
void bench_json_scaling(bench_json *j, const char *section, const char *label, double x, const bench_timing *t,
                        const char *note);
/* One row of bench_gemm_table: shape {ta, tb, m, n, k}, GFLOP/s of each
 * library (0: it cannot run here) and what auto picks. */
void bench_json_gemm(bench_json *j, const char *what, const int shape[5], double openblas, double onednn,
                     const char *chosen);
int bench_json_close(bench_json *j);

/* Prints "alphast / PyTorch" step-time ratios when both result files exist. */
int bench_print_ratios(const char *ours, const char *theirs);

#endif
