/* Results as JSON (bench/results/<impl>.json, the format bench/torch_bench.py
 * writes too), and the alphast/PyTorch comparison of two such files. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

struct bench_json {
    char *path;
    cJSON *root, *models, *scaling;
    double sgemm;
};

bench_json *bench_json_open(const char *path, const char *impl, const char *precision, const char *device,
                            int threads, double sgemm_gflops)
{
    bench_json *j = ast_xcalloc(1, sizeof *j);
    j->path = ast_xstrdup(path);
    j->sgemm = sgemm_gflops;
    j->root = cJSON_CreateObject();
    char when[32];
    time_t now = time(NULL);
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON_AddStringToObject(j->root, "impl", impl);
    cJSON_AddStringToObject(j->root, "precision", precision);
    cJSON_AddStringToObject(j->root, "device", device);
    cJSON_AddStringToObject(j->root, "date", when);
    cJSON_AddNumberToObject(j->root, "threads", threads);
    cJSON_AddNumberToObject(j->root, "sgemm_gflops", sgemm_gflops);
    j->models = cJSON_AddArrayToObject(j->root, "models");
    j->scaling = cJSON_AddObjectToObject(j->root, "scaling");
    return j;
}

/* Fields every timing has, model or plugin. */
static void add_timing(cJSON *o, const bench_timing *t, double sgemm)
{
    cJSON_AddBoolToObject(o, "ok", t->ok);
    if (!t->ok) {
        cJSON_AddStringToObject(o, "error", t->error);
        return;
    }
    double gflops = t->step_median_s > 0 ? t->flops_step / t->step_median_s * 1e-9 : 0.0;
    cJSON_AddNumberToObject(o, "steps", t->steps);
    cJSON_AddNumberToObject(o, "step_median_s", t->step_median_s);
    cJSON_AddNumberToObject(o, "step_min_s", t->step_min_s);
    cJSON_AddNumberToObject(o, "step_cpu_s", t->step_cpu_s);
    cJSON_AddNumberToObject(o, "flops_step", t->flops_step);
    cJSON_AddNumberToObject(o, "step_gflops", gflops);
    cJSON_AddNumberToObject(o, "sgemm_fraction", sgemm > 0 ? gflops / sgemm : 0.0);
    cJSON_AddNumberToObject(o, "params", (double)t->params);
    cJSON_AddNumberToObject(o, "active_params", (double)t->active_params);
    cJSON_AddNumberToObject(o, "peak_rss_mb", (double)t->peak_rss_kb / 1024.0);
    cJSON_AddNumberToObject(o, "arena_peak_mb", (double)t->arena_peak / (1024.0 * 1024.0));
    cJSON_AddNumberToObject(o, "state_mb", (double)t->state_bytes / (1024.0 * 1024.0));
    /* the memory a step needs on its device: PyTorch's max_memory_allocated counterpart */
    cJSON_AddNumberToObject(o, "device_mb", (double)(t->arena_peak + t->state_bytes) / (1024.0 * 1024.0));
    if (t->cells_per_s > 0) cJSON_AddNumberToObject(o, "cells_per_s", t->cells_per_s);
    if (t->enqueue_median_s > 0) cJSON_AddNumberToObject(o, "enqueue_median_s", t->enqueue_median_s);
    if (t->graph_median_s > 0) cJSON_AddNumberToObject(o, "graph_median_s", t->graph_median_s);
    if (t->graph_note[0]) cJSON_AddStringToObject(o, "graph_not_captured", t->graph_note);
    cJSON_AddNumberToObject(o, "threads", t->threads);
}

void bench_json_model(bench_json *j, const bench_model_case *mc, const bench_timing *t)
{
    cJSON *o = cJSON_CreateObject();
    const ast_model_config *c = &mc->cfg;
    cJSON_AddStringToObject(o, "name", mc->name);
    cJSON_AddStringToObject(o, "config", mc->config);
    cJSON_AddStringToObject(o, "size", mc->size);
    cJSON_AddNumberToObject(o, "sets", mc->sets);
    cJSON_AddNumberToObject(o, "cells", mc->cells);
    cJSON_AddNumberToObject(o, "genes", c->num_genes);
    cJSON_AddNumberToObject(o, "d_model", c->d_model);
    cJSON_AddNumberToObject(o, "layers", c->num_layers);
    add_timing(o, t, j->sgemm);
    if (t->ok) {
        cJSON_AddNumberToObject(o, "eval_median_s", t->eval_median_s);
        cJSON_AddNumberToObject(o, "flops_eval", t->flops_eval);
    }
    cJSON_AddItemToArray(j->models, o);
}

void bench_json_scaling(bench_json *j, const char *section, const char *label, double x, const bench_timing *t,
                        const char *note)
{
    cJSON *arr = cJSON_GetObjectItem(j->scaling, section);
    if (!arr) arr = cJSON_AddArrayToObject(j->scaling, section);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", label);
    cJSON_AddNumberToObject(o, "x", x);
    if (note) {
        cJSON_AddBoolToObject(o, "ok", 0);
        cJSON_AddStringToObject(o, "skipped", note);
    } else {
        add_timing(o, t, j->sgemm);
    }
    cJSON_AddItemToArray(arr, o);
}

void bench_json_gemm(bench_json *j, const char *what, const int shape[5], double openblas, double onednn,
                     const char *chosen)
{
    cJSON *arr = cJSON_GetObjectItem(j->root, "gemm");
    if (!arr) arr = cJSON_AddArrayToObject(j->root, "gemm");
    cJSON *o = cJSON_CreateObject();
    static const char *const keys[5] = {"ta", "tb", "m", "n", "k"};
    cJSON_AddStringToObject(o, "gemm", what);
    for (int i = 0; i < 5; i++) cJSON_AddNumberToObject(o, keys[i], shape[i]);
    cJSON_AddNumberToObject(o, "openblas_gflops", openblas);
    cJSON_AddNumberToObject(o, "onednn_gflops", onednn);
    cJSON_AddStringToObject(o, "auto", chosen);
    cJSON_AddItemToArray(arr, o);
}

int bench_json_close(bench_json *j)
{
    char *text = cJSON_Print(j->root);
    FILE *f = fopen(j->path, "w");
    int rc = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF ? 0 : -1;
    if (f && fclose(f)) rc = -1;
    if (rc) fprintf(stderr, "bench: cannot write %s\n", j->path);
    else printf("results: %s\n", j->path);
    free(text);
    cJSON_Delete(j->root);
    free(j->path);
    free(j);
    return rc;
}

static cJSON *load(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = ast_xmalloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    cJSON *root = cJSON_Parse(buf);
    free(buf);
    return root;
}

/* A file's precision; files written before the bf16 mode were float32. */
static const char *precision(const cJSON *root)
{
    const cJSON *v = cJSON_GetObjectItem(root, "precision");
    return cJSON_IsString(v) ? v->valuestring : "32-true";
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0.0;
}

static const cJSON *find_model(const cJSON *root, const char *name)
{
    const cJSON *m;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(root, "models"))
    {
        const cJSON *n = cJSON_GetObjectItem(m, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return m;
    }
    return NULL;
}

static const cJSON *find_label(const cJSON *arr, const char *label)
{
    const cJSON *r;
    cJSON_ArrayForEach(r, arr)
    {
        const cJSON *l = cJSON_GetObjectItem(r, "label");
        if (cJSON_IsString(l) && !strcmp(l->valuestring, label)) return r;
    }
    return NULL;
}

/* The sampling section's throughput, beside the twin's sampler's. */
static void print_sampling_ratios(const cJSON *ours, const cJSON *theirs)
{
    printf("%-22s %10s %10s %8s | %10s %10s\n", "sampling", "ms/eval", "torch ms", "speedup", "cells/s", "torch c/s");
    const cJSON *r;
    cJSON_ArrayForEach(r, ours)
    {
        const char *label = cJSON_GetObjectItem(r, "label")->valuestring;
        const cJSON *t = find_label(theirs, label);
        double s1 = num(r, "step_median_s"), s2 = t ? num(t, "step_median_s") : 0.0;
        if (s1 > 0 && s2 > 0)
            printf("  %-20s %10.1f %10.1f %7.2fx | %10.0f %10.0f\n", label, 1e3 * s1, 1e3 * s2, s2 / s1,
                   num(r, "cells_per_s"), num(t, "cells_per_s"));
    }
}

/* Step times of each scaling section both files have. */
static void print_scaling_ratios(const cJSON *a, const cJSON *b)
{
    const cJSON *sec;
    cJSON_ArrayForEach(sec, cJSON_GetObjectItem(a, "scaling"))
    {
        const cJSON *other = cJSON_GetObjectItem(cJSON_GetObjectItem(b, "scaling"), sec->string);
        if (!other) continue;
        if (!strcmp(sec->string, "sampling")) {
            print_sampling_ratios(sec, other);
            continue;
        }
        printf("%-22s %10s %10s %8s | %8s %8s\n", sec->string, "step ms", "torch ms", "speedup", "RSS MB", "torch MB");
        const cJSON *r;
        cJSON_ArrayForEach(r, sec)
        {
            const char *label = cJSON_GetObjectItem(r, "label")->valuestring;
            const cJSON *t = find_label(other, label);
            double s1 = num(r, "step_median_s"), s2 = t ? num(t, "step_median_s") : 0.0;
            if (s1 <= 0 && s2 <= 0) continue;
            if (s1 > 0 && s2 > 0)
                printf("  %-20s %10.1f %10.1f %7.2fx | %8.0f %8.0f\n", label, 1e3 * s1, 1e3 * s2, s2 / s1,
                       num(r, "peak_rss_mb"), num(t, "peak_rss_mb"));
            else /* one side skipped this size (time budget or memory) */
                printf("  %-20s %10.1f %10s %8s | %8.0f %8s\n", label, 1e3 * s1, "-", "-", num(r, "peak_rss_mb"), "-");
        }
    }
}

/* The most any float32 implementation could beat the twin by: the twin's
 * time over the GEMM floor, the model's counted GEMM FLOPs at the faster of
 * the two sides' sgemm peaks (2048^3, the best shape a GEMM library has).
 * The floor leaves out every elementwise pass, so a speed-up above the
 * ceiling would need GEMMs faster than the best library's best shape. */
static double ceiling(double flops, double peak_gflops, double twin_s)
{
    return flops > 0 && peak_gflops > 0 && twin_s > 0 ? twin_s / (flops / (peak_gflops * 1e9)) : 0.0;
}

int bench_print_ratios(const char *ours, const char *theirs)
{
    cJSON *a = load(ours), *b = load(theirs);
    if (!a || !b) {
        cJSON_Delete(a), cJSON_Delete(b);
        return -1;
    }
    double pa = num(a, "sgemm_gflops"), pb = num(b, "sgemm_gflops"), peak = pa > pb ? pa : pb;
    printf("\nalphast vs PyTorch twin (%s vs %s; threads %g vs %g; precision %s vs %s; speedup = torch time / "
           "alphast time)\n", ours, theirs, num(a, "threads"), num(b, "threads"), precision(a), precision(b));
    const cJSON *m;
    int header = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(a, "models"))
    {
        const cJSON *t = find_model(b, cJSON_GetObjectItem(m, "name")->valuestring);
        double s1 = num(m, "step_median_s"), s2 = t ? num(t, "step_median_s") : 0.0;
        double e1 = num(m, "eval_median_s"), e2 = t ? num(t, "eval_median_s") : 0.0;
        if (!t || s1 <= 0 || s2 <= 0) continue;
        if (!header++)
            printf("%-22s %10s %10s %8s %8s | %10s %10s %8s %8s | %8s %8s\n", "model", "step ms", "torch ms", "speedup",
                   "ceiling", "eval ms", "torch ms", "speedup", "ceiling", "RSS MB", "torch MB");
        printf("%-22s %10.2f %10.2f %7.2fx %7.2fx | %10.2f %10.2f %7.2fx %7.2fx | %8.0f %8.0f\n",
               cJSON_GetObjectItem(m, "name")->valuestring, 1e3 * s1, 1e3 * s2, s2 / s1,
               ceiling(num(m, "flops_step"), peak, s2), 1e3 * e1, 1e3 * e2, e1 > 0 ? e2 / e1 : 0.0,
               ceiling(num(m, "flops_eval"), peak, e2), num(m, "peak_rss_mb"), num(t, "peak_rss_mb"));
    }
    if (header)
        printf("ceiling: the most a float32 implementation could beat the twin by = torch time / (the model's GEMM\n"
               "FLOPs at %.1f GFLOP/s, the faster side's sgemm peak; elementwise work counted as free)\n", peak);
    print_scaling_ratios(a, b);
    cJSON_Delete(a), cJSON_Delete(b);
    return 0;
}
