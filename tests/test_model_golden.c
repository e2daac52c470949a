/* Parity with the PyTorch reference: for each golden case, load its weights,
 * run the eval forward on its inputs and compare outputs, every per-layer
 * activation, the loss parts, every parameter gradient and the input
 * gradients (tests/data/golden, README.md there).
 *
 * Error measure: max|a - b| / max(max|b|, floor) per tensor. float32
 * rounding grows with the magnitude of the values a tensor is computed
 * from, not with each element's own size, so the error is scaled by the
 * tensor's largest reference value. Activations use a negligible floor.
 * A gradient can be a sum whose addends nearly cancel (the output position
 * bias: 0.0057 from per-cell terms of order 1 after centring; the key bias,
 * nearly softmax-invariant): it keeps the absolute rounding error of its
 * addends, whose scale is that of the case's gradients. So gradients use
 * floor = GRAD_FLOOR x the case's largest reference gradient: any error
 * above 1e-6 of that largest gradient still fails. */
#include <cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/loss.h"
#include "io/safetensors.h"
#include "model_fixture.h"

typedef struct golden_tols {
    double act, grad, loss;
    double grad_l2; /* |g - g_ref| / |g_ref| over every parameter gradient of the case at once */
} golden_tols;

/* Tolerances of the golden README: activations ~1e-5 after 2 layers of
 * float32 with different summation orders; gradients and losses pass
 * through the backward pass and the N^2 distance sums, ~1e-4. */
static const golden_tols f32_tols = {1e-5, 1e-4, 1e-4, 1e-4};
/* bf16 GEMMs (training.precision: bf16-mixed): every GEMM operand is
 * rounded to 8 significant bits, 2^-8 = 0.4% relative, and such errors
 * pass through the ~10 GEMMs, norms and softmaxes of 2 layers: outputs and
 * activations are good to ~1-3% of their largest value, except where a
 * cell's MoE router scores sit near a tie and it takes another expert:
 * measured at most 0.071 here, 0.107 for PyTorch's CPU autocast on the same
 * dumps (another cell); 0.2 above. Losses average many cells: measured at
 * most 0.0037 (the MoE balance loss, which counts routing choices); 0.02.
 * Single gradient elements have no such bound: sums of cancelling terms (a
 * one-element LayerNorm weight, a rerouted expert) lose all their digits,
 * under autocast too. The parameters' gradient as a whole, the step AdamW
 * takes, is bounded instead: its relative L2 error measured at most 0.12
 * (gated; 0.03 to 0.09 for the others), PyTorch's autocast 0.03 to 0.10 on
 * the same dumps; 0.2 above. */
static const golden_tols bf16_tols = {0.2, INFINITY, 0.02, 0.2};
/* Reference activations are O(1e-3..1e2); below 1e-12 a tensor counts as zero. */
#define ACT_FLOOR 1e-12
#define GRAD_FLOOR 1e-2

/* ---- the case's JSON description ------------------------------------------ */

static char *golden_path(char *buf, size_t n, const char *file)
{
    const char *root = getenv("ALPHAST_TEST_DATA");
    cr_assert_not_null(root, "ALPHAST_TEST_DATA is not set (run through make check)");
    snprintf(buf, n, "%s/golden/%s", root, file);
    return buf;
}

static cJSON *read_json(const char *name)
{
    char file[128], path[1024];
    snprintf(file, sizeof file, "%s.json", name);
    FILE *f = fopen(golden_path(path, sizeof path, file), "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    cr_assert_eq(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    cJSON *j = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(j, "%s is not JSON", path);
    return j;
}

static const cJSON *jget(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    cr_assert_not_null(v, "golden JSON lacks cfg.%s.%s", a, b);
    return v;
}

static int jint(const cJSON *cfg, const char *a, const char *b) { return (int)cJSON_GetNumberValue(jget(cfg, a, b)); }

/* Option values live here until ast_model_new has copied them. */
typedef struct golden_opts {
    char experts[16], top_k[16], lb[32];
} golden_opts;

static void golden_config(const cJSON *j, ast_model_config *cfg, golden_opts *o)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "cfg");
    const char *tl = "TransformerLayer_setting";
    ast_model_config_base(cfg, (int)cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(j, "G")));
    cfg->expr_hidden = jint(c, "mlp_in_expression_setting", "mlp_in_expression_dims");
    cfg->d_model = jint(c, "mlp_in_expression_setting", "mlp_out_expression_dims");
    cfg->time_hidden = jint(c, "mlp_in_diffusion_time_setting", "mlp_in_diffusion_time_dims");
    cfg->d_time = jint(c, "mlp_in_diffusion_time_setting", "mlp_out_diffusion_time_dims");
    cfg->pos_hidden = jint(c, "PositionMLP_setting", "hidden_dims");
    cfg->num_layers = jint(c, tl, "num_layers");
    cfg->num_heads = jint(c, tl, "num_heads");
    cfg->d_ff = jint(c, tl, "dim_ff_expression");
    cfg->d_ff_time = jint(c, tl, "dim_ff_diffusion_time");
    cfg->dropout = (float)cJSON_GetNumberValue(jget(c, tl, "dropout"));
    cfg->ln_eps = (float)cJSON_GetNumberValue(jget(c, tl, "layer_norm_eps"));
    cfg->out_expr_hidden = jint(c, "mlp_out_expression_setting", "hidden_dims");
    cfg->out_pos_hidden = jint(c, "mlp_out_position_norm_setting", "hidden_dims");
    if (cJSON_IsTrue(jget(c, tl, "use_gated_attention"))) {
        cfg->attention = "gated";
        mf_attn_opt(cfg, "gate_type", cJSON_GetStringValue(jget(c, tl, "gate_type")));
        mf_attn_opt(cfg, "use_qk_norm", cJSON_IsTrue(jget(c, tl, "use_qk_norm")) ? "true" : "false");
    }
    if (cJSON_IsTrue(jget(c, tl, "use_moe"))) {
        snprintf(o->experts, sizeof o->experts, "%d", jint(c, tl, "num_experts"));
        snprintf(o->top_k, sizeof o->top_k, "%d", jint(c, tl, "moe_top_k"));
        snprintf(o->lb, sizeof o->lb, "%.9g", cJSON_GetNumberValue(jget(c, tl, "moe_load_balance_loss_weight")));
        mf_moe(cfg, o->experts, o->top_k,
               cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "expert_hidden")));
        mf_ffn_opt(cfg, "load_balance_weight", o->lb);
    }
}

static int in_list(const cJSON *list, const char *name)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, list) if (!strcmp(cJSON_GetStringValue(it), name)) return 1;
    return 0;
}

/* ---- comparing tensors -------------------------------------------------- */

typedef struct golden_run {
    const char *name;
    const golden_tols *tol;
    ast_st_file *io;
    double grad_floor; /* GRAD_FLOOR x largest reference gradient */
    double worst_act, worst_out, worst_loss, worst_grad;
    double worst_grad_unfloored; /* max|a - b| / max|b|, reported only */
    double grad_d2, grad_r2; /* sum (a - b)^2 and sum b^2 over every parameter's gradient */
    int parameters;          /* comparing parameter gradients (not the inputs') */
    char worst_act_name[128], worst_grad_name[160];
    int n_taps;
} golden_run;

typedef struct tensor_error {
    double diff, scale; /* max|a - b|, max|b| */
    double d2, r2;      /* sum (a - b)^2, sum b^2 */
} tensor_error;

/* Error of t against the stored tensor `name` (shape checked). */
static tensor_error compare(const golden_run *g, const char *name, const ast_tensor *t)
{
    ast_error e = {""};
    float *ref = malloc((size_t)t->size * sizeof *ref);
    cr_assert_eq(ast_st_read_f32(g->io, name, t->ndim, t->shape, ref, &e), 0, "%s: %s", g->name, e.msg);
    tensor_error te = {0};
    for (int64_t i = 0; i < t->size; i++) {
        double d = (double)t->data[i] - ref[i];
        te.diff = fmax(te.diff, fabs(d));
        te.scale = fmax(te.scale, fabs((double)ref[i]));
        te.d2 += d * d, te.r2 += (double)ref[i] * ref[i];
    }
    free(ref);
    return te;
}

static void tap(void *ud, const char *name, ast_tensor *t)
{
    golden_run *g = ud;
    char key[160];
    snprintf(key, sizeof key, "act.%s", name);
    cr_assert_geq(ast_st_find(g->io, key), 0, "%s: the dump has no activation %s", g->name, key);
    tensor_error te = compare(g, key, t);
    double err = te.diff / fmax(te.scale, ACT_FLOOR);
    cr_expect_lt(err, g->tol->act, "%s: %s relative error %g", g->name, key, err);
    if (err > g->worst_act) {
        g->worst_act = err;
        snprintf(g->worst_act_name, sizeof g->worst_act_name, "%s", name);
    }
    g->n_taps++;
}

/* Largest |value| over the stored tensors whose names start with "grad". */
static double largest_gradient(const ast_st_file *f)
{
    double m = 0.0;
    for (int i = 0; i < ast_st_count(f); i++) {
        if (strncmp(ast_st_name(f, i), "grad", 4)) continue;
        ast_error e = {""};
        int64_t n = ast_st_numel(f, i);
        float *v = malloc((size_t)n * sizeof *v);
        cr_assert_eq(ast_st_read_f32(f, ast_st_name(f, i), 0, NULL, v, &e), 0, "%s", e.msg);
        for (int64_t k = 0; k < n; k++) m = fmax(m, fabs((double)v[k]));
        free(v);
    }
    return m;
}

static int count_prefix(const ast_st_file *f, const char *prefix)
{
    int n = 0;
    for (int i = 0; i < ast_st_count(f); i++) n += !strncmp(ast_st_name(f, i), prefix, strlen(prefix));
    return n;
}

static void expect_close(golden_run *g, const char *name, const ast_tensor *t, double tol, double floor,
                         double *worst)
{
    tensor_error te = compare(g, name, t);
    double err = te.diff / fmax(te.scale, floor);
    cr_expect_lt(err, tol, "%s: %s relative error %g", g->name, name, err);
    *worst = fmax(*worst, err);
    if (worst == &g->worst_grad && te.scale > 0.0)
        g->worst_grad_unfloored = fmax(g->worst_grad_unfloored, te.diff / te.scale);
    if (worst == &g->worst_grad && g->parameters) g->grad_d2 += te.d2, g->grad_r2 += te.r2;
}

/* ---- one case ------------------------------------------------------------- */

static ast_tensor *input(ast_ctx *c, const golden_run *g, const char *name, int grad)
{
    ast_error e = {""};
    int i = ast_st_find(g->io, name);
    cr_assert_geq(i, 0, "%s: no %s", g->name, name);
    ast_tensor *t = ast_zeros(c, ast_st_ndim(g->io, i), ast_st_shape(g->io, i));
    cr_assert_eq(ast_st_read_f32(g->io, name, t->ndim, t->shape, t->data, &e), 0, "%s", e.msg);
    if (grad) t->flags |= AST_REQUIRES_GRAD;
    return t;
}

/* A tensor's gradient, shaped as the tensor. */
static ast_tensor grad_view(const ast_tensor *t)
{
    cr_assert_not_null(t->grad, "no gradient reached %s", t->name ? t->name : "the input");
    ast_tensor v = *t;
    v.data = t->grad;
    return v;
}

static void check_names(const ast_model *m, const cJSON *j, const char *name)
{
    ast_params *p = ast_model_params((ast_model *)m);
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(j, "param_names");
    cr_assert_eq(ast_params_count(p), cJSON_GetArraySize(names), "%s: parameter count", name);
    for (int i = 0; i < ast_params_count(p); i++)
        cr_assert_str_eq(ast_params_at(p, i)->name, cJSON_GetStringValue(cJSON_GetArrayItem(names, i)),
                         "%s: parameter %d out of state_dict order", name, i);
}

static void check_grads(golden_run *g, ast_params *p, const cJSON *grad_none)
{
    for (int i = 0; i < ast_params_count(p); i++) {
        ast_tensor *t = ast_params_at(p, i);
        char key[200];
        snprintf(key, sizeof key, "grad.%s", t->name);
        if (ast_st_find(g->io, key) < 0) {
            cr_expect(in_list(grad_none, t->name), "%s: no reference gradient for %s", g->name, t->name);
            for (int64_t k = 0; k < t->size; k++)
                cr_expect_eq(t->grad[k], 0.0f, "%s: %s should get no gradient", g->name, t->name);
            continue;
        }
        double before = g->worst_grad;
        ast_tensor gt = grad_view(t);
        expect_close(g, key, &gt, g->tol->grad, g->grad_floor, &g->worst_grad);
        if (g->worst_grad > before) snprintf(g->worst_grad_name, sizeof g->worst_grad_name, "%s", t->name);
    }
}

/* The case in precision p: float32, or bf16 GEMMs (skipped where this
 * build or CPU has none). */
static void run_case(const char *name, ast_precision p)
{
    char why[256];
    if (p == AST_PRECISION_BF16 && !ast_bf16_supported(why, sizeof why)) cr_skip_test("no bf16 mode here: %s", why);
    cJSON *j = read_json(name);
    ast_model_config cfg;
    golden_opts opts;
    golden_config(j, &cfg, &opts);
    ast_model *m = mf_model(&cfg, 1);
    check_names(m, j, name);

    char file[128], path[1024];
    ast_error e = {""};
    snprintf(file, sizeof file, "%s.weights.safetensors", name);
    cr_assert_eq(ast_params_load(ast_model_params(m), golden_path(path, sizeof path, file), 1, &e), 0, "%s", e.msg);
    snprintf(file, sizeof file, "%s.io.safetensors", name);
    golden_run g = {.name = name, .tol = p == AST_PRECISION_BF16 ? &bf16_tols : &f32_tols,
                    .io = ast_st_open(golden_path(path, sizeof path, file), &e)};
    cr_assert_not_null(g.io, "%s", e.msg);
    g.grad_floor = GRAD_FLOOR * largest_gradient(g.io);

    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_precision(c, p);
    ast_tensor *x = input(c, &g, "in.noisy_expression", 1), *pos = input(c, &g, "in.noisy_positions", 1);
    ast_tensor *mask = input(c, &g, "in.node_mask", 0);
    ast_model_out o = ast_model_forward(m, c, x, input(c, &g, "in.diffusion_time", 0), pos, mask, tap, &g);
    cr_expect_eq(g.n_taps, count_prefix(g.io, "act."), "%s: %d activations tapped, %d dumped", name, g.n_taps,
                 count_prefix(g.io, "act."));
    expect_close(&g, "out.pred_expression", o.expression, g.tol->act, ACT_FLOOR, &g.worst_out);
    expect_close(&g, "out.pred_positions", o.positions, g.tol->act, ACT_FLOOR, &g.worst_out);

    ast_loss_config lc;
    ast_loss_config_default(&lc);
    lc.position_loss = AST_POS_LOSS_DISTANCE; /* the reference's loss, which the dump holds */
    ast_loss_parts l = ast_diffusion_loss(c, &lc, &o, input(c, &g, "target.expression", 0),
                                          input(c, &g, "target.positions", 0), mask);
    cr_assert_eq(l.moe_aux != NULL, ast_st_find(g.io, "out.moe_aux") >= 0, "%s: moe_aux presence", name);
    if (l.moe_aux) expect_close(&g, "out.moe_aux", l.moe_aux, g.tol->loss, ACT_FLOOR, &g.worst_loss);
    expect_close(&g, "loss.expression_mse", l.expression, g.tol->loss, ACT_FLOOR, &g.worst_loss);
    expect_close(&g, "loss.position_dist_matrix", l.position, g.tol->loss, ACT_FLOOR, &g.worst_loss);
    expect_close(&g, "loss.total", l.total, g.tol->loss, ACT_FLOOR, &g.worst_loss);

    ast_backward(c, l.total);
    g.parameters = 1;
    check_grads(&g, ast_model_params(m), cJSON_GetObjectItemCaseSensitive(j, "grad_none"));
    g.parameters = 0;
    double before = g.worst_grad;
    ast_tensor gx = grad_view(x), gpos = grad_view(pos);
    expect_close(&g, "grad_in.noisy_expression", &gx, g.tol->grad, g.grad_floor, &g.worst_grad);
    expect_close(&g, "grad_in.noisy_positions", &gpos, g.tol->grad, g.grad_floor, &g.worst_grad);
    if (g.worst_grad > before) snprintf(g.worst_grad_name, sizeof g.worst_grad_name, "an input gradient");
    double grad_l2 = sqrt(g.grad_d2 / g.grad_r2);
    cr_expect_lt(grad_l2, g.tol->grad_l2, "%s: relative L2 error of the parameters' gradient %g", name, grad_l2);

    fprintf(stderr, "%s%s: max rel error outputs %.3g, activations %.3g (%s), losses %.3g, gradients %.3g (%s; "
                    "unfloored %.3g; parameters' gradient, relative L2 %.3g)\n",
            name, p == AST_PRECISION_BF16 ? " (bf16)" : "", g.worst_out, g.worst_act, g.worst_act_name, g.worst_loss,
            g.worst_grad, g.worst_grad_name, g.worst_grad_unfloored, grad_l2);
    ast_ctx_free(c);
    ast_st_close(g.io);
    ast_model_free(m);
    cJSON_Delete(j);
}

Test(golden, baseline) { run_case("baseline", AST_PRECISION_FP32); }
Test(golden, gated) { run_case("gated", AST_PRECISION_FP32); }
Test(golden, moe) { run_case("moe", AST_PRECISION_FP32); }
Test(golden, gated_moe) { run_case("gated_moe", AST_PRECISION_FP32); }
Test(golden, gated_moe_full) { run_case("gated_moe_full", AST_PRECISION_FP32); }
Test(golden, baseline_bf16) { run_case("baseline", AST_PRECISION_BF16); }
Test(golden, gated_bf16) { run_case("gated", AST_PRECISION_BF16); }
Test(golden, moe_bf16) { run_case("moe", AST_PRECISION_BF16); }
Test(golden, gated_moe_bf16) { run_case("gated_moe", AST_PRECISION_BF16); }
Test(golden, gated_moe_full_bf16) { run_case("gated_moe_full", AST_PRECISION_BF16); }
