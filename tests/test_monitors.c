/* The monitor plugins and their wiring into training.
 *
 * Each monitor is loaded through the plugin loader, fed fixed statistics
 * built by hand (as the model, the plugins and the trainer publish them)
 * and its metrics are read back from the JSON lines its sink wrote; the
 * expected values are computed by hand in the comments. The statistics
 * the gated attention, the MoE and the model publish are checked against
 * independent computations from a forward pass, and a short training run
 * with all four monitors checks the whole path into metrics.jsonl.
 *
 * Monitors only read statistics: they have no forward pass and no
 * backward, so finite-difference gradient checks do not apply to them. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "model/model.h"
#include "plugin/loader.h"
#include "engine/sink.h"
#include "train/metrics_jsonl.h"
#include "train/train.h"
#include "model_fixture.h"
#include "test_files.h"

/* Values are printed with %.9g from floats or doubles computed in double:
 * 1e-6 covers float rounding of the inputs and nothing more. */
#define TOL 1e-6

/* ---- a monitor with a sink writing to memory ------------------------- */

typedef struct rig {
    const ast_plugin_desc *d;
    void *self;
    ast_sink *sink;
    FILE *out;
    char *text;
    size_t len;
} rig;

/* Loads monitor `name` with "key=value" options and a fresh sink (the
 * memory stream writes through r->text, so r must stay where it is). */
static void rig_open(rig *r, const char *name, const char *const *opts, int n_opts)
{
    ast_error e = {""};
    cr_assert(ast_plugins_init(&e), "%s", e.msg);
    const ast_plugin *p = ast_plugin_load(AST_KIND_MONITOR, name, &e);
    cr_assert_not_null(p, "%s", e.msg);
    static char keys[8][64], values[8][64];
    ast_optsrc src[8];
    cr_assert_leq(n_opts, 8);
    for (int i = 0; i < n_opts; i++) {
        cr_assert_eq(sscanf(opts[i], "%63[^=]=%63s", keys[i], values[i]), 2, "option %s", opts[i]);
        src[i] = (ast_optsrc){keys[i], values[i], "test"};
    }
    *r = (rig){.d = ast_plugin_desc_of(p)};
    ast_optval v[AST_MAX_PLUGIN_OPTS];
    cr_assert(ast_plugin_options(p, src, n_opts, v, &e), "%s", e.msg);
    char err[256] = "";
    r->self = r->d->create(&(ast_create_args){.host = ast_host_table(), .opts = v}, err, sizeof err);
    cr_assert_not_null(r->self, "%s", err);
    r->out = open_memstream(&r->text, &r->len);
    r->sink = ast_sink_new(r->out, ast_metrics_write_monitor, name);
}

static void rig_close(rig *r)
{
    ast_plugin_destroy(r->d, r->self);
    ast_sink_free(r->sink);
    fclose(r->out);
    free(r->text);
    ast_plugins_shutdown();
}

static void observe(rig *r, ast_phase phase, int64_t step, int epoch, const ast_stat *stats, int n)
{
    ast_sink_set_step(r->sink, step, epoch);
    ast_observation o = {phase, step, epoch, stats, n, r->sink};
    r->d->observe(r->self, &o);
    fflush(r->out);
}

/* ---- reading JSON lines back ------------------------------------------ */

/* Calls fn on every record of `text` (one JSON object a line). */
static int each_record(const char *text, int (*fn)(const cJSON *, void *), void *ud)
{
    int count = 0;
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        cJSON *j = cJSON_ParseWithLength(line, end ? (size_t)(end - line) : strlen(line));
        cr_assert_not_null(j, "not JSON: %.*s", (int)(end ? end - line : (long)strlen(line)), line);
        count += fn(j, ud);
        cJSON_Delete(j);
        line = end ? end + 1 : NULL;
    }
    return count;
}

typedef struct query {
    const char *monitor, *metric;
    int64_t step; /* -1: any */
    int layer;
    double value; /* of the last match */
} query;

static int match(const cJSON *j, void *ud)
{
    query *q = ud;
    const cJSON *mon = cJSON_GetObjectItem(j, "monitor"), *met = cJSON_GetObjectItem(j, "metric");
    if (!cJSON_IsString(mon) || !cJSON_IsString(met) || strcmp(mon->valuestring, q->monitor) ||
        strcmp(met->valuestring, q->metric))
        return 0;
    if (q->step >= 0 && cJSON_GetObjectItem(j, "step")->valuedouble != (double)q->step) return 0;
    if (cJSON_GetObjectItem(j, "layer")->valuedouble != q->layer) return 0;
    const cJSON *v = cJSON_GetObjectItem(j, "value");
    q->value = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    return 1;
}

/* How many records of the metric (at step, for layer) the text holds. */
static int count_of(const char *text, const char *monitor, const char *metric, int64_t step, int layer)
{
    query q = {monitor, metric, step, layer, NAN};
    return each_record(text, match, &q);
}

/* The one record of the metric at step for layer. */
static double value_of(const char *text, const char *monitor, const char *metric, int64_t step, int layer)
{
    query q = {monitor, metric, step, layer, NAN};
    int n = each_record(text, match, &q);
    cr_assert_eq(n, 1, "%s/%s at step %lld layer %d: %d records in\n%s", monitor, metric, (long long)step, layer, n,
                 text);
    return q.value;
}

#define EXPECT_METRIC(r, metric, step, layer, want)                                                     \
    do {                                                                                                \
        double got_ = value_of((r)->text, (r)->d->name, metric, step, layer);                           \
        cr_expect(fabs(got_ - (want)) <= TOL, "%s at step %d layer %d: %.9g, want %.9g", metric, step, \
                  layer, got_, (double)(want));                                                         \
    } while (0)

/* ---- metrics.jsonl lines ------------------------------------------------ */

static int is_train_line(const cJSON *j, void *ud)
{
    const cJSON *v = cJSON_GetObjectItem(j, ud);
    return cJSON_IsNumber(v) && v->valuedouble == 0.25;
}

/* A name with a quote (a plugin's metric, a schedule's value) was printed
 * as it was, and the line, then the file, was no JSON: cJSON escapes it. */
Test(metrics_jsonl, names_with_quotes_and_backslashes_stay_json)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    ast_sink *sink = ast_sink_new(out, ast_metrics_write_monitor, "mon\"itor");
    ast_sink_set_step(sink, 3, 1);
    ast_sink_emit(sink, "a\"b\\c", 2, 0.5);
    cJSON *line = ast_metrics_line("train", 4, 1);
    ast_metrics_add(line, "sched\"uled", "%.6g", 0.25);
    ast_metrics_add(line, "loss", "%.9g", NAN);
    ast_metrics_write(out, line);
    ast_sink_free(sink);
    fclose(out);
    cr_assert_float_eq(value_of(text, "mon\"itor", "a\"b\\c", 3, 2), 0.5, TOL);
    cr_assert_eq(each_record(text, is_train_line, "sched\"uled"), 1, "%s", text);
    cr_assert(strstr(text, "\"loss\":null}"), "a loss that is not finite is null: %s", text);
    free(text);
}

/* ---- expert_load -------------------------------------------------------- */

Test(expert_load, entropy_std_aux_and_dropped_tokens_by_hand)
{
    rig r;
    rig_open(&r, "expert_load", (const char *[]){"every=1"}, 1);
    const float even[] = {10, 10, 10, 10}, one[] = {40, 0, 0, 0}, aux0 = 0.02f, aux1 = 0.04f, drop0 = 1, drop1 = 3;
    const ast_stat s[] = {{"moe.tokens_per_expert", 0, 4, even}, {"moe.tokens_per_expert", 1, 4, one},
                          {"moe.aux_loss", 0, 1, &aux0},          {"moe.aux_loss", 1, 1, &aux1},
                          {"moe.dropped_tokens", 0, 1, &drop0},   {"moe.dropped_tokens", 1, 1, &drop1}};
    observe(&r, AST_PHASE_TRAIN_STEP, 1, 0, s, 6);
    /* even: p = 1/4 each, H = ln 4 / ln 4 = 1, std 0; one expert: H = 0,
     * p = (1, 0, 0, 0) around 1/4: var = (0.75^2 + 3 * 0.25^2) / 4 = 0.1875 */
    EXPECT_METRIC(&r, "expert_entropy_normalized", 1, 0, 1.0);
    EXPECT_METRIC(&r, "expert_entropy_normalized", 1, 1, 0.0);
    EXPECT_METRIC(&r, "expert_usage_std", 1, 0, 0.0);
    EXPECT_METRIC(&r, "expert_usage_std", 1, 1, sqrt(0.1875));
    EXPECT_METRIC(&r, "expert_entropy_normalized", 1, -1, 0.5);
    EXPECT_METRIC(&r, "expert_usage_std", 1, -1, sqrt(0.1875) / 2);
    EXPECT_METRIC(&r, "avg_aux_loss", 1, -1, 0.03);
    EXPECT_METRIC(&r, "dropped_tokens", 1, -1, 4.0);
    /* 0.5 is not below the default threshold 0.5 */
    EXPECT_METRIC(&r, "expert_collapse_warning", 1, -1, 0.0);
    cr_expect_eq(ast_sink_n_warnings(r.sink), 0);
    rig_close(&r);
}

Test(expert_load, uneven_routing_entropy)
{
    rig r;
    rig_open(&r, "expert_load", (const char *[]){"every=1"}, 1);
    const float counts[] = {30, 10, 0, 0};
    const ast_stat s = {"moe.tokens_per_expert", 0, 4, counts};
    observe(&r, AST_PHASE_TRAIN_STEP, 1, 0, &s, 1);
    /* p = (3/4, 1/4): H = -(0.75 ln 0.75 + 0.25 ln 0.25) / ln 4 = 0.562335 / 1.386294;
     * std: mean of p^2 = (0.5625 + 0.0625) / 4 = 0.15625, minus 1/16 */
    EXPECT_METRIC(&r, "expert_entropy_normalized", 1, 0, (0.75 * log(4.0 / 3.0) + 0.25 * log(4.0)) / log(4.0));
    EXPECT_METRIC(&r, "expert_usage_std", 1, 0, sqrt(0.15625 - 0.0625));
    EXPECT_METRIC(&r, "expert_collapse_warning", 1, -1, 1.0);
    rig_close(&r);
}

Test(expert_load, collapse_warning_fires_once_over_several_steps)
{
    rig r;
    rig_open(&r, "expert_load", (const char *[]){"every=1"}, 1);
    const float one[] = {40, 0, 0, 0};
    const ast_stat s = {"moe.tokens_per_expert", 0, 4, one};
    for (int step = 1; step <= 5; step++) {
        observe(&r, AST_PHASE_TRAIN_STEP, step, 0, &s, 1);
        EXPECT_METRIC(&r, "expert_collapse_warning", step, -1, 1.0);
    }
    cr_expect_eq(ast_sink_n_warnings(r.sink), 1, "the collapse is reported once, not every step");
    rig_close(&r);
}

Test(expert_load, reports_every_n_steps_and_options_change_the_threshold)
{
    rig r;
    rig_open(&r, "expert_load", (const char *[]){"every=3", "collapse_threshold=0.9"}, 2);
    const float counts[] = {30, 10, 0, 0}; /* entropy 0.4056, see above */
    const ast_stat s = {"moe.tokens_per_expert", 0, 4, counts};
    for (int step = 1; step <= 6; step++) observe(&r, AST_PHASE_TRAIN_STEP, step, 0, &s, 1);
    observe(&r, AST_PHASE_EPOCH_END, 6, 0, NULL, 0);
    cr_expect_eq(count_of(r.text, "expert_load", "expert_entropy_normalized", -1, -1), 2, "steps 3 and 6 only");
    cr_expect_eq(count_of(r.text, "expert_load", "expert_entropy_normalized", 3, -1), 1);
    cr_expect_eq(count_of(r.text, "expert_load", "expert_entropy_normalized", 6, -1), 1);
    EXPECT_METRIC(&r, "expert_collapse_warning", 6, -1, 1.0);
    rig_close(&r);
}

Test(expert_load, without_moe_statistics_it_says_so_once_and_writes_nothing)
{
    rig r;
    rig_open(&r, "expert_load", (const char *[]){"every=1"}, 1);
    const float g = 0.5f;
    const ast_stat s = {"attn.gate_mean", 0, 1, &g};
    for (int step = 1; step <= 3; step++) observe(&r, AST_PHASE_TRAIN_STEP, step, 0, &s, 1);
    cr_expect_eq(r.len, 0, "no metrics: %s", r.text);
    cr_expect_eq(ast_sink_n_warnings(r.sink), 1);
    rig_close(&r);
}

/* ---- gate_activation ------------------------------------------------------ */

Test(gate_activation, mean_and_std_over_layers_and_the_no_filtering_warning)
{
    rig r;
    rig_open(&r, "gate_activation", (const char *[]){"every=1"}, 1);
    const float m0 = 0.6f, s0 = 0.1f, m1 = 0.8f, s1 = 0.3f;
    const ast_stat ok[] = {{"attn.gate_mean", 0, 1, &m0}, {"attn.gate_std", 0, 1, &s0},
                           {"attn.gate_mean", 1, 1, &m1}, {"attn.gate_std", 1, 1, &s1}};
    observe(&r, AST_PHASE_TRAIN_STEP, 1, 0, ok, 4);
    EXPECT_METRIC(&r, "activation_mean", 1, 0, 0.6);
    EXPECT_METRIC(&r, "activation_std", 1, 1, 0.3);
    EXPECT_METRIC(&r, "activation_mean", 1, -1, 0.7); /* (0.6 + 0.8) / 2 */
    EXPECT_METRIC(&r, "activation_std", 1, -1, 0.2);  /* (0.1 + 0.3) / 2 */
    EXPECT_METRIC(&r, "no_filtering_warning", 1, -1, 0.0);
    cr_expect_eq(ast_sink_n_warnings(r.sink), 0);

    const float w0 = 0.96f, w1 = 0.98f;
    const ast_stat open[] = {{"attn.gate_mean", 0, 1, &w0}, {"attn.gate_std", 0, 1, &s0},
                             {"attn.gate_mean", 1, 1, &w1}, {"attn.gate_std", 1, 1, &s1}};
    for (int step = 2; step <= 4; step++) {
        observe(&r, AST_PHASE_TRAIN_STEP, step, 0, open, 4);
        EXPECT_METRIC(&r, "activation_mean", step, -1, 0.97); /* above 0.95 */
        EXPECT_METRIC(&r, "no_filtering_warning", step, -1, 1.0);
    }
    cr_expect_eq(ast_sink_n_warnings(r.sink), 1);
    rig_close(&r);
}

/* ---- grad_norm -------------------------------------------------------------- */

Test(grad_norm, reports_each_norm_and_warns_once_per_norm_above_the_limit)
{
    rig r;
    rig_open(&r, "grad_norm", (const char *[]){"every=1"}, 1);
    float total = 3.0f, router = 12.5f, time_norm = 0.5f;
    const ast_stat s[] = {{"grad.total", -1, 1, &total}, {"grad.router", -1, 1, &router}, {"grad.time", -1, 1, &time_norm}};
    observe(&r, AST_PHASE_TRAIN_STEP, 1, 0, s, 3);
    EXPECT_METRIC(&r, "total_grad_norm", 1, -1, 3.0);
    EXPECT_METRIC(&r, "router_grad_norm", 1, -1, 12.5);
    EXPECT_METRIC(&r, "time_modulation_grad_norm", 1, -1, 0.5);
    EXPECT_METRIC(&r, "grad_overflow_warning", 1, -1, 1.0);
    cr_expect_eq(ast_sink_n_warnings(r.sink), 1, "only the router norm is above 10");
    observe(&r, AST_PHASE_TRAIN_STEP, 2, 0, s, 3);
    cr_expect_eq(ast_sink_n_warnings(r.sink), 1, "the router warning is not repeated");
    total = 11.0f, router = 2.0f;
    observe(&r, AST_PHASE_TRAIN_STEP, 3, 0, s, 3);
    cr_expect_eq(ast_sink_n_warnings(r.sink), 2, "the total norm warns on its own");
    router = 1.0f, total = 2.0f;
    observe(&r, AST_PHASE_TRAIN_STEP, 4, 0, s, 3);
    EXPECT_METRIC(&r, "grad_overflow_warning", 4, -1, 0.0);
    time_norm = NAN;
    observe(&r, AST_PHASE_TRAIN_STEP, 5, 0, s, 3);
    EXPECT_METRIC(&r, "grad_overflow_warning", 5, -1, 1.0);
    cr_expect_eq(ast_sink_n_warnings(r.sink), 3, "a NaN norm is an overflow");
    rig_close(&r);
}

Test(grad_norm, dense_model_without_router_reports_the_groups_it_has)
{
    rig r;
    rig_open(&r, "grad_norm", (const char *[]){"every=2", "max_norm=1"}, 2);
    float total = 0.5f;
    const ast_stat s = {"grad.total", -1, 1, &total};
    observe(&r, AST_PHASE_TRAIN_STEP, 1, 0, &s, 1);
    cr_expect_eq(r.len, 0, "step 1 is not a multiple of every 2");
    observe(&r, AST_PHASE_TRAIN_STEP, 2, 0, &s, 1);
    EXPECT_METRIC(&r, "total_grad_norm", 2, -1, 0.5);
    cr_expect_eq(count_of(r.text, "grad_norm", "router_grad_norm", -1, -1), 0);
    rig_close(&r);
}

/* ---- time_conditioning --------------------------------------------------------- */

Test(time_conditioning, modulation_norms_per_step_and_epoch_and_experts_by_time_bucket)
{
    rig r;
    rig_open(&r, "time_conditioning", (const char *[]){"every=2", "buckets=3"}, 2);
    /* step 1: sets at t = 0.1, 0.5, 0.95 fall in buckets 0, 1, 2 (of [0,1/3), [1/3,2/3), [2/3,1]) */
    const float t1[] = {0.1f, 0.5f, 0.95f}, n1a[] = {1, 2, 3}, n1b[] = {3, 4, 5}, e1[] = {4, 0, 1, 3, 2, 2};
    const ast_stat s1[] = {{"time.t", -1, 3, t1}, {"time.modulation_norm", 0, 3, n1a},
                           {"time.modulation_norm", 1, 3, n1b}, {"moe.set_tokens_per_expert", 0, 6, e1}};
    /* step 2: t = 0.2, 0.7, 1.0 -> buckets 0, 2, 2 (t = 1 is in the last) */
    const float t2[] = {0.2f, 0.7f, 1.0f}, n2[] = {1, 1, 1}, e2[] = {1, 1, 0, 2, 3, 1};
    const ast_stat s2[] = {{"time.t", -1, 3, t2}, {"time.modulation_norm", 0, 3, n2},
                           {"time.modulation_norm", 1, 3, n2}, {"moe.set_tokens_per_expert", 0, 6, e2}};
    observe(&r, AST_PHASE_TRAIN_STEP, 1, 0, s1, 4);
    cr_expect_eq(r.len, 0, "step 1 is not reported with every 2");
    observe(&r, AST_PHASE_TRAIN_STEP, 2, 0, s2, 4);
    EXPECT_METRIC(&r, "modulation_l2_norm", 2, 0, 1.0);
    EXPECT_METRIC(&r, "modulation_l2_norm", 2, -1, 1.0);
    observe(&r, AST_PHASE_EPOCH_END, 2, 0, NULL, 0);
    /* step means: (mean(1,2,3) + mean(3,4,5)) / 2 = 3, then 1: epoch mean 2 */
    EXPECT_METRIC(&r, "epoch_modulation_l2_norm", 2, -1, 2.0);
    /* bucket 0: (4,0) + (1,1); bucket 1: (1,3); bucket 2: (2,2) + (0,2) + (3,1) */
    const double tokens[3][2] = {{5, 1}, {1, 3}, {5, 5}};
    char name[64];
    for (int q = 0; q < 3; q++)
        for (int e = 0; e < 2; e++) {
            snprintf(name, sizeof name, "t%d.expert%d.tokens", q, e);
            EXPECT_METRIC(&r, name, 2, 0, tokens[q][e]);
            snprintf(name, sizeof name, "t%d.expert%d.share", q, e);
            EXPECT_METRIC(&r, name, 2, 0, tokens[q][e] / (tokens[q][0] + tokens[q][1]));
        }
    cr_expect_eq(count_of(r.text, "time_conditioning", "t0.expert0.tokens", -1, 1), 0, "layer 1 has no MoE counts");

    /* the next epoch starts from zero: only step 3's set in bucket 1 */
    const float t3[] = {0.4f}, n3[] = {7}, e3[] = {2, 6};
    const ast_stat s3[] = {{"time.t", -1, 1, t3}, {"time.modulation_norm", 0, 1, n3}, {"moe.set_tokens_per_expert", 0, 2, e3}};
    observe(&r, AST_PHASE_TRAIN_STEP, 3, 1, s3, 3);
    observe(&r, AST_PHASE_EPOCH_END, 3, 1, NULL, 0);
    EXPECT_METRIC(&r, "epoch_modulation_l2_norm", 3, -1, 7.0);
    EXPECT_METRIC(&r, "t1.expert1.tokens", 3, 0, 6.0);
    EXPECT_METRIC(&r, "t0.expert0.tokens", 3, 0, 0.0);
    EXPECT_METRIC(&r, "t1.expert1.share", 3, 0, 0.75);
    rig_close(&r);
}

/* ---- the statistics the model and its plugins publish --------------------------- */

typedef struct taps {
    ast_tensor *attn_in, *time;
} taps;

static void tap(void *ud, const char *name, ast_tensor *t)
{
    taps *k = ud;
    if (!strcmp(name, "layer0.attn_core_in")) k->attn_in = t;
    if (!strcmp(name, "layer0.attn.time")) k->time = t;
}

static const ast_stat *find_stat(ast_ctx *c, const char *name, int layer)
{
    for (int i = 0; i < ast_ctx_n_stats(c); i++) {
        const ast_stat *s = &ast_ctx_stats(c)[i];
        if (s->layer == layer && !strcmp(s->name, name)) return s;
    }
    cr_assert_fail("no statistic %s for layer %d", name, layer);
    return NULL;
}

/* Mean and population std of sigmoid(h . w_g + b_g) over the valid cells
 * and heads, with q_proj's gate rows g = E .. E+H-1 (headwise). */
static void gate_by_hand(const ast_tensor *h, const ast_tensor *w, const ast_tensor *bias, const float *mask, int heads,
                         double *mean, double *std)
{
    int64_t cells = h->shape[0] * h->shape[1], E = h->shape[2];
    double sum = 0, sq = 0, n = 0;
    for (int64_t i = 0; i < cells; i++) {
        if (mask[i] == 0.0f) continue;
        for (int g = 0; g < heads; g++) {
            double z = bias->data[E + g];
            for (int64_t k = 0; k < E; k++) z += (double)h->data[i * E + k] * w->data[(E + g) * E + k];
            double s = 1.0 / (1.0 + exp(-z));
            sum += s, sq += s * s, n++;
        }
    }
    *mean = sum / n;
    *std = sqrt(sq / n - *mean * *mean);
}

Test(published, statistics_of_a_gated_moe_forward_match_independent_computations)
{
    enum { B = 2, N = 5, G = 6 };
    ast_model_config cfg;
    ast_model_config_base(&cfg, G);
    cfg.num_layers = 2;
    mf_gated(&cfg, "headwise");
    mf_moe(&cfg, "4", "2", "split");
    ast_model *m = mf_model(&cfg, 3);
    ast_ctx *c = ast_ctx_new(9);
    ast_rng rng;
    ast_rng_seed(&rng, 5);
    float x[B * N * G], p[B * N * 3], t[B] = {0.25f, 0.8f}, mask[B * N];
    for (int i = 0; i < B * N * G; i++) x[i] = ast_rng_gauss(&rng);
    for (int i = 0; i < B * N * 3; i++) p[i] = ast_rng_gauss(&rng);
    for (int i = 0; i < B * N; i++) mask[i] = i != N - 1 && i != 2 * N - 2; /* one padded cell per set */
    taps k = {0};
    ast_model_forward(m, c, ast_tensor_from(c, 3, (int64_t[]){B, N, G}, x), ast_tensor_from(c, 2, (int64_t[]){B, 1}, t),
                      ast_tensor_from(c, 3, (int64_t[]){B, N, 3}, p), ast_tensor_from(c, 2, (int64_t[]){B, N}, mask),
                      tap, &k);
    cr_assert(k.attn_in && k.time);

    const ast_stat *ts = find_stat(c, "time.t", -1);
    cr_assert_eq(ts->n, B);
    for (int b = 0; b < B; b++) cr_expect_eq(ts->values[b], t[b]);

    const ast_stat *mod = find_stat(c, "time.modulation_norm", 0);
    cr_assert_eq(mod->n, B);
    int64_t T = k.time->shape[1];
    for (int b = 0; b < B; b++) {
        double sq = 0;
        for (int64_t j = 0; j < T; j++) sq += (double)k.time->data[b * T + j] * k.time->data[b * T + j];
        /* float data, norms accumulated in double: float rounding */
        cr_expect(fabs(mod->values[b] - sqrt(sq)) <= 1e-6 * sqrt(sq), "set %d: %g vs %g", b, mod->values[b], sqrt(sq));
    }

    double mean, std;
    ast_params *ps = ast_model_params(m);
    gate_by_hand(k.attn_in, ast_params_find(ps, "transformer_layers.0.attn_model.attention.q_proj.weight"),
                 ast_params_find(ps, "transformer_layers.0.attn_model.attention.q_proj.bias"), mask, cfg.num_heads,
                 &mean, &std);
    /* the plugin's gate scores come from a float sgemm, ours in double */
    cr_expect(fabs(find_stat(c, "attn.gate_mean", 0)->values[0] - mean) < 1e-5, "gate mean %g vs %g",
              find_stat(c, "attn.gate_mean", 0)->values[0], mean);
    cr_expect(fabs(find_stat(c, "attn.gate_std", 0)->values[0] - std) < 1e-5, "gate std %g vs %g",
              find_stat(c, "attn.gate_std", 0)->values[0], std);

    for (int l = 0; l < 2; l++) {
        const ast_stat *per_set = find_stat(c, "moe.set_tokens_per_expert", l);
        const ast_stat *total = find_stat(c, "moe.tokens_per_expert", l);
        cr_assert_eq(per_set->n, B * 4);
        for (int e = 0; e < 4; e++)
            cr_expect_eq(per_set->values[e] + per_set->values[4 + e], total->values[e], "layer %d expert %d", l, e);
        for (int b = 0; b < B; b++) {
            float routed = 0;
            for (int e = 0; e < 4; e++) routed += per_set->values[b * 4 + e];
            cr_expect_eq(routed, (N - 1) * 2, "layer %d set %d: its 4 valid cells, 2 experts each", l, b);
        }
    }
    ast_ctx_free(c);
    ast_model_free(m);
}

/* ---- end to end: training with all four monitors ------------------------- */

static const char *tiny_yaml =
    "training_mode: joint\n"
    "data: {set_size: 12, preprocessing: {position_key: spatial, cell_type_key: null}}\n"
    "diffusion: {diffusion_steps: 100}\n"
    "training: {learning_rate: 1e-3, batch_size: 2, epochs: 2, steps_per_epoch: 3, val_sets: 2,\n"
    "           val_t_points: 1, early_stopping: false, gradient_clip_val: 0}\n"
    "mlp_in_expression_setting: {mlp_in_expression_dims: 8, mlp_out_expression_dims: 8}\n"
    "mlp_in_diffusion_time_setting: {mlp_in_diffusion_time_dims: 4, mlp_out_diffusion_time_dims: 4}\n"
    "PositionMLP_setting: {hidden_dims: 4}\n"
    "TransformerLayer_setting: {num_layers: 2, num_heads: 2, dim_ff_expression: 8, dim_ff_diffusion_time: 4}\n"
    "mlp_out_expression_setting: {hidden_dims: 8}\n"
    "mlp_out_position_norm_setting: {hidden_dims: 4}\n"
    "attention: gated\n"
    "ffn: {name: moe, num_experts: 2, top_k: 1, time_conditioned: true}\n"
    "monitors: [{name: expert_load, every: 2}, {name: gate_activation, every: 1},\n"
    "           {name: grad_norm, every: 1}, time_conditioning]\n";


/* The trainer's own record of a step: its gradient norm (before clipping). */
typedef struct train_line {
    int64_t step;
    double grad_norm;
} train_line;

static int train_grad(const cJSON *j, void *ud)
{
    train_line *l = ud;
    const cJSON *kind = cJSON_GetObjectItem(j, "kind");
    if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "train") ||
        cJSON_GetObjectItem(j, "step")->valuedouble != (double)l->step)
        return 0;
    l->grad_norm = cJSON_GetObjectItem(j, "grad_norm")->valuedouble;
    return 1;
}

/* The L2 norm of the gradients of the parameters whose names contain any of `parts`. */
static double group_norm(ast_params *p, const char *const *parts, int n_parts)
{
    double sq = 0;
    for (int i = 0; i < ast_params_count(p); i++) {
        const ast_tensor *w = ast_params_at(p, i);
        int in = 0;
        for (int k = 0; k < n_parts; k++) in |= strstr(w->name, parts[k]) != NULL;
        for (int64_t j = 0; in && w->grad && j < w->size; j++) sq += (double)w->grad[j] * w->grad[j];
    }
    return sqrt(sq);
}

/* A trainer over the bundled data for tiny_yaml with one override. */
typedef struct run {
    ast_cfg *cfg;
    ast_dataset d;
    ast_split sp[3];
    ast_model *m;
    ast_trainer *t;
    char dir[64];
} run;

static void run_open(run *r, const char *override)
{
    ast_error e = {""};
    memset(r, 0, sizeof *r);
    r->cfg = ast_cfg_load_string(tiny_yaml, "tiny.yaml", &e);
    cr_assert(r->cfg, "%s", e.msg);
    cr_assert(!override || ast_cfg_override(r->cfg, override, &e) == 0, "%s", e.msg);
    ast_data_opts o;
    ast_data_opts_from_cfg(r->cfg, &o);
    cr_assert(ast_data_read(ALPHAST_SOURCE_DIR "/data/starmap3d/starmap3d.h5ad", &o, &r->d, &e) == 0, "%s", e.msg);
    cr_assert(ast_data_preprocess(&r->d, &o, &e) == 0 && ast_data_split(&r->d, 0.1, 0.1, r->sp, &e) == 0, "%s", e.msg);
    ast_model_config mc;
    ast_train_config tc;
    cr_assert(ast_cfg_model(r->cfg, r->d.n_genes, &mc, &e) == 0 && ast_train_config_from_cfg(r->cfg, &tc, &e) == 0,
              "%s", e.msg);
    tc.progress = 0;
    r->m = mf_model(&mc, tc.seed);
    strcpy(r->dir, "/tmp/alphast-monitors-XXXXXX");
    cr_assert(mkdtemp(r->dir));
    r->t = ast_trainer_new(r->m, &r->d, r->sp, &tc, r->dir, NULL, &e);
    cr_assert(r->t, "%s", e.msg);
}

static void run_close(run *r)
{
    ast_trainer_free(r->t);
    ast_model_free(r->m);
    ast_split_free(r->sp);
    ast_dataset_free(&r->d);
    ast_cfg_free(r->cfg);
}

Test(end_to_end, training_with_all_four_monitors_writes_their_metrics, .timeout = 60)
{
    run rn;
    run_open(&rn, NULL);
    ast_error e = {""};
    cr_assert(ast_trainer_add_monitors(rn.t, rn.cfg, &e) == 0, "%s", e.msg);
    ast_train_result r;
    cr_assert(ast_trainer_run(rn.t, &r, &e) == 0, "%s", e.msg);
    char path[256];
    snprintf(path, sizeof path, "%s/metrics.jsonl", rn.dir);
    char *text = test_slurp(path);

    /* expert_load every 2 steps of 6; the others every step */
    cr_expect_eq(count_of(text, "expert_load", "expert_entropy_normalized", -1, -1), 3);
    cr_expect_eq(count_of(text, "expert_load", "expert_entropy_normalized", -1, 1), 3, "per layer too");
    double h = value_of(text, "expert_load", "expert_entropy_normalized", 4, -1);
    cr_expect(h >= 0.0 && h <= 1.0, "entropy %g", h);
    cr_expect_eq(count_of(text, "gate_activation", "activation_mean", -1, -1), 6);
    double g = value_of(text, "gate_activation", "activation_mean", 6, -1);
    cr_expect(g > 0.0 && g < 1.0, "gate mean %g", g);
    cr_expect_eq(count_of(text, "time_conditioning", "modulation_l2_norm", -1, -1), 0, "every 10 > 6 steps");
    cr_expect_eq(count_of(text, "time_conditioning", "epoch_modulation_l2_norm", -1, -1), 2, "one per epoch");

    /* grad.total is the norm the trainer logs (%.6g there) for every step */
    for (int64_t step = 1; step <= 6; step++) {
        train_line l = {step, NAN};
        cr_assert_eq(each_record(text, train_grad, &l), 1);
        double got = value_of(text, "grad_norm", "total_grad_norm", step, -1);
        cr_expect(fabs(got - l.grad_norm) <= 1e-5 * l.grad_norm, "step %lld: %g vs %g", (long long)step, got,
                  l.grad_norm);
    }
    /* Clipping is off, so the parameters still hold step 6's raw gradients. */
    ast_params *ps = ast_model_params(rn.m);
    const char *router[] = {"router."};
    const char *time_parts[] = {"mlp_in_diffusion_time.", ".attn_model.y_y.", "lin_diffusion_time", "norm_diffusion_time",
                          "router.time_proj."};
    double want_router = group_norm(ps, router, 1), want_time = group_norm(ps, time_parts, 5);
    double got_router = value_of(text, "grad_norm", "router_grad_norm", 6, -1);
    double got_time = value_of(text, "grad_norm", "time_modulation_grad_norm", 6, -1);
    /* norms stored as float, printed with 9 digits */
    cr_expect(want_router > 0 && fabs(got_router - want_router) <= 1e-6 * want_router, "%g vs %g", got_router,
              want_router);
    cr_expect(want_time > 0 && fabs(got_time - want_time) <= 1e-6 * want_time, "%g vs %g", got_time, want_time);

    /* every routed token of an epoch lands in one bucket: 3 steps x 2 sets x
     * 12 cells x top_k 1 per layer (the sampled sets are full) */
    for (int layer = 0; layer < 2; layer++) {
        double sum = 0;
        char name[64];
        for (int q = 0; q < 3; q++)
            for (int x = 0; x < 2; x++) {
                snprintf(name, sizeof name, "t%d.expert%d.tokens", q, x);
                sum += value_of(text, "time_conditioning", name, 3, layer);
            }
        cr_expect_eq(sum, 72.0, "layer %d: %g tokens in epoch 1", layer, sum);
    }
    free(text);
    run_close(&rn);
}

Test(end_to_end, an_unknown_monitor_or_option_is_an_error_naming_where_the_config_wrote_it)
{
    run rn;
    run_open(&rn, "monitors=[grad_norm, expert_lod]");
    ast_error e = {""};
    cr_expect_eq(ast_trainer_add_monitors(rn.t, rn.cfg, &e), -1);
    cr_expect(strstr(e.msg, "override:1:") && strstr(e.msg, "expert_lod") && strstr(e.msg, "expert_load"), "%s", e.msg);
    ast_error e2 = {""};
    cr_assert(ast_cfg_override(rn.cfg, "monitors=[{name: grad_norm, max_nrm: 5}]", &e2) == 0, "%s", e2.msg);
    cr_expect_eq(ast_trainer_add_monitors(rn.t, rn.cfg, &e2), -1);
    cr_expect(strstr(e2.msg, "override:1:") && strstr(e2.msg, "max_nrm") && strstr(e2.msg, "max_norm"), "%s", e2.msg);
    run_close(&rn);
}
