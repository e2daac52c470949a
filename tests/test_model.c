/* The model: parameter counts of docs/model.md §2.11, finite-difference gradients of
 * the whole network, masking of padded cells, and seeded determinism. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "model/loss.h"
#include "gradcheck.h" /* gc_input */
#include "model_fixture.h"

/* ---- parameter counts (docs/model.md §2.11, BASE_CONFIG with G = 100) ---------- */

typedef struct count_case {
    const char *what;
    const char *gate;                 /* NULL = linear attention */
    const char *expert_hidden;        /* NULL = dense FFN */
    int64_t total, active;
} count_case;

static const count_case counts[] = {
    {"baseline", NULL, NULL, 707508, 707508},
    {"gated headwise", "headwise", NULL, 444988, 444988},
    {"moe full", NULL, "full", 1105076, 841396},
    {"gated + moe full", "headwise", "full", 842556, 578876},
    {"moe split", NULL, "split", 710324, 644020},
    {"gated + moe split", "headwise", "split", 447804, 381500},
    {"gated elementwise", "elementwise", NULL, 476980, 476980},
};

Test(model, parameter_counts_match_the_spec)
{
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        const count_case *k = &counts[i];
        ast_model_config cfg;
        ast_model_config_base(&cfg, 100);
        if (k->gate) mf_gated(&cfg, k->gate);
        if (k->expert_hidden) mf_moe(&cfg, "4", "2", k->expert_hidden);
        ast_model *m = mf_model(&cfg, 1);
        cr_expect_eq(ast_model_param_count(m), k->total, "%s: total %lld, spec %lld", k->what,
                     (long long)ast_model_param_count(m), (long long)k->total);
        cr_expect_eq(ast_model_active_param_count(m), k->active, "%s: active %lld, spec %lld", k->what,
                     (long long)ast_model_active_param_count(m), (long long)k->active);
        /* the groups partition the parameters; only the ffn plugin has idle ones */
        ast_param_group g[AST_N_PARAM_GROUPS];
        ast_model_param_groups(m, g);
        int64_t sum = 0;
        for (int j = 0; j < AST_N_PARAM_GROUPS; j++) {
            sum += g[j].total;
            if (j != 3) cr_expect_eq(g[j].active, g[j].total, "%s: group %s", k->what, g[j].name);
        }
        cr_expect_eq(sum, k->total, "%s: groups sum to %lld", k->what, (long long)sum);
        /* docs/model.md §2.11 worked numbers for G = 100: P_glob split into encoders and heads */
        cr_expect_eq(g[0].total + g[5].total, 58150, "%s: global parameters", k->what);
        cr_expect_eq(g[1].total, 2 * 56038, "%s: wrappers", k->what);
        cr_expect_eq(g[4].total, 2 * 4833, "%s: norms and time branch", k->what);
        ast_model_free(m);
    }
}

Test(model, bad_config_is_an_error_not_a_crash)
{
    ast_model_config cfg;
    ast_model_config_base(&cfg, 100);
    cfg.num_heads = 3;
    ast_error e = {""};
    cr_assert_null(ast_model_new(&cfg, 1, &e));
    cr_assert_neq(strstr(e.msg, "num_heads"), NULL, "message: %s", e.msg);
    ast_model_config_base(&cfg, 100);
    cfg.attention = "no_such_attention";
    cr_assert_null(ast_model_new(&cfg, 1, &e));
    cr_assert_neq(strstr(e.msg, "no_such_attention"), NULL, "message: %s", e.msg);
}

/* ---- a tiny model for gradient, masking and determinism checks ---------- */

enum { TB = 2, TN = 4, TG = 4 };

/* attention x ffn: linear/gated x dense/moe */
static void tiny_config(ast_model_config *cfg, int variant, const char *top_k)
{
    ast_model_config_base(cfg, TG);
    cfg->expr_hidden = 6;
    cfg->d_model = 8;
    cfg->time_hidden = 4;
    cfg->d_time = 4;
    cfg->pos_hidden = 4;
    cfg->num_layers = 1;
    cfg->num_heads = 2;
    cfg->d_ff = 8;
    cfg->d_ff_time = 4;
    cfg->out_expr_hidden = 6;
    cfg->out_pos_hidden = 4;
    if (variant & 1) mf_gated(cfg, "headwise");
    if (variant & 2) mf_moe(cfg, "4", top_k, "full");
}

static const char *variant_name(int v)
{
    static const char *names[] = {"linear+dense", "gated+dense", "linear+moe", "gated+moe"};
    return names[v];
}

typedef struct tiny_inputs {
    ast_tensor *expression, *t, *positions, *mask;
} tiny_inputs;

/* Inputs owned by p: expression >= 0 like log1p counts, t in (0, 1]. */
static tiny_inputs tiny_inputs_new(ast_params *p, int b, int n)
{
    tiny_inputs in;
    in.expression = gc_input(p, "expression", 3, (int64_t[]){b, n, TG}, 1.0f);
    for (int64_t i = 0; i < in.expression->size; i++) in.expression->data[i] = fabsf(in.expression->data[i]);
    in.t = gc_input(p, "t", 2, (int64_t[]){b, 1}, 1.0f);
    for (int i = 0; i < b; i++) in.t->data[i] = 0.25f + 0.5f * (float)i / (float)b;
    in.positions = gc_input(p, "positions", 3, (int64_t[]){b, n, 3}, 2.0f);
    in.mask = gc_input(p, "mask", 2, (int64_t[]){b, n}, 0.0f);
    in.mask->flags &= ~(uint32_t)AST_REQUIRES_GRAD;
    for (int64_t i = 0; i < in.mask->size; i++) in.mask->data[i] = 1.0f;
    return in;
}

typedef struct grad_ud {
    ast_model *m;
    tiny_inputs in;
} grad_ud;

/* Both outputs side by side, so one projection covers every path. */
static ast_tensor *fwd_model(ast_ctx *c, void *ud)
{
    grad_ud *g = ud;
    ast_model_out o = ast_model_forward(g->m, c, g->in.expression, g->in.t, g->in.positions, g->in.mask, NULL, NULL);
    return ast_concat(c, (ast_tensor *[]){o.expression, o.positions}, 2);
}

/* The parameters after `name` in registration order: the first one each
 * plugin instance registered, whatever the plugin calls it. */
static ast_tensor *param_after(ast_params *p, const char *name)
{
    for (int i = 0; i + 1 < ast_params_count(p); i++)
        if (!strcmp(ast_params_at(p, i)->name, name)) return ast_params_at(p, i + 1);
    cr_assert_fail("no parameter %s", name);
    return NULL;
}

/* Directional finite differences. The element-wise check of gradcheck.h
 * perturbs hundreds of elements one at a time; in this tiny ReLU network
 * (ReLU encoders, wrapper MLPs, MoE experts) some unit then crosses its
 * kink for some element at any h that float32 noise allows. Here every
 * checked tensor moves at once along a random direction v (entries +-1):
 * the derivative along v sums all gradient entries, so the signal is of
 * order 1 and few kinks lie within the short segment. */
typedef struct dir_result {
    double worst, analytic, numeric;
} dir_result;

static double projected_output(ast_ctx *c, grad_ud *g, const float *r)
{
    ast_ctx_reset(c);
    ast_tensor *y = fwd_model(c, g);
    double l = 0.0;
    for (int64_t i = 0; i < y->size; i++) l += (double)r[i] * y->data[i];
    return l;
}

/* Moves every checked element by step * v. */
static void shift(ast_tensor *const *in, int n, float *const *start, signed char *const *v, float step)
{
    for (int k = 0; k < n; k++)
        for (int64_t i = 0; i < in[k]->size; i++) in[k]->data[i] = start[k][i] + step * v[k][i];
}

static dir_result directional_check(grad_ud *g, ast_tensor *const *in, int n, float h, int dirs)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_rng rng;
    ast_rng_seed(&rng, 99);
    for (int k = 0; k < n; k++) memset(in[k]->grad, 0, (size_t)in[k]->size * sizeof(float));
    ast_tensor *y = fwd_model(c, g);
    float *r = ast_xmalloc((size_t)y->size * sizeof *r);
    for (int64_t i = 0; i < y->size; i++) r[i] = 2.0f * ast_rng_uniform01(&rng) - 1.0f;
    ast_backward_seed(c, y, r);
    ast_ctx_set_grad(c, 0);

    float *start[16];
    signed char *v[16];
    cr_assert_leq(n, 16);
    for (int k = 0; k < n; k++) {
        start[k] = ast_xmalloc((size_t)in[k]->size * sizeof(float));
        memcpy(start[k], in[k]->data, (size_t)in[k]->size * sizeof(float));
        v[k] = ast_xmalloc((size_t)in[k]->size);
    }
    dir_result res = {0};
    for (int d = 0; d < dirs; d++) {
        double ana = 0.0;
        for (int k = 0; k < n; k++)
            for (int64_t i = 0; i < in[k]->size; i++) {
                v[k][i] = (ast_rng_next(&rng) & 1) ? 1 : -1;
                ana += (double)in[k]->grad[i] * v[k][i];
            }
        shift(in, n, start, v, h);
        double lp = projected_output(c, g, r);
        shift(in, n, start, v, -h);
        double lm = projected_output(c, g, r);
        shift(in, n, start, v, 0.0f);
        double num = (lp - lm) / (2.0 * h), err = fabs(num - ana) / fmax(fmax(fabs(num), fabs(ana)), 1e-2);
        if (err >= res.worst) res = (dir_result){err, ana, num};
    }
    for (int k = 0; k < n; k++) {
        free(start[k]);
        free(v[k]);
    }
    free(r);
    ast_ctx_free(c);
    return res;
}

/* MoE routes with top_k = num_experts here: top-k selection jumps where
 * two logits tie, and finite differences cannot cross a jump. h = 3e-4
 * moves the ~600 checked elements by a step of length ~7e-3: curvature
 * error ~1e-4 relative, float32 noise of L (~1e-6) over 2h ~3e-3 of a
 * derivative of order 0.1..1 (observed worst 5e-3). At h = 1e-3 the
 * segment crosses MoE-expert ReLU kinks along some directions. */
#define GC_H 3e-4f
#define GC_DIRS 6
#define GC_TOL 2e-2

Test(model, gradients_match_finite_differences)
{
    for (int v = 0; v < 4; v++) {
        ast_model_config cfg;
        tiny_config(&cfg, v, "4");
        ast_model *m = mf_model(&cfg, 11 + v);
        ast_params *p = ast_model_params(m);
        ast_params *own = ast_params_new(3 + v);
        grad_ud ud = {m, tiny_inputs_new(own, TB, TN)};
        ast_tensor *checked[] = {
            ud.in.expression, ud.in.t, ud.in.positions,
            ast_params_find(p, "mlp_in_expression.0.weight"),
            ast_params_find(p, "mlp_in_diffusion_time.2.weight"),
            ast_params_find(p, "position_mlp.mlp.0.weight"),
            ast_params_find(p, "transformer_layers.0.attn_model.concatenated_features.weight"),
            param_after(p, "transformer_layers.0.attn_model.transform_expression_for_attn_mlp.2.bias"),
            param_after(p, "transformer_layers.0.attn_model.y_y.bias"),
            ast_params_find(p, "transformer_layers.0.norm_positions_1.weight"),
            ast_params_find(p, "mlp_out_position_norm.0.weight"),
        };
        int n = (int)(sizeof checked / sizeof checked[0]);
        for (int i = 0; i < n; i++) cr_assert_not_null(checked[i], "%s: checked tensor %d missing", variant_name(v), i);
        dir_result r = directional_check(&ud, checked, n, GC_H, GC_DIRS);
        cr_expect_lt(r.worst, GC_TOL, "%s: along a direction analytic %g numeric %g", variant_name(v), r.analytic,
                     r.numeric);
        ast_params_free(own);
        ast_model_free(m);
    }
}

/* ---- masking: padded cells do not reach valid ones ---------------------- */

enum { MB = 2, MN = 6, M_VALID = 4 }; /* set 1 has MN - M_VALID padded cells */

typedef struct run_out {
    float expr[MB * MN * TG], pos[MB * MN * 3], aux;
} run_out;

static void run_eval(ast_model *m, const tiny_inputs *in, run_out *out)
{
    ast_ctx *c = ast_ctx_new(1);
    ast_ctx_set_grad(c, 0);
    ast_model_out o = ast_model_forward(m, c, in->expression, in->t, in->positions, in->mask, NULL, NULL);
    memcpy(out->expr, o.expression->data, sizeof out->expr);
    memcpy(out->pos, o.positions->data, sizeof out->pos);
    ast_tensor *aux = ast_model_extra_loss(c);
    out->aux = aux ? aux->data[0] : 0.0f;
    ast_ctx_free(c);
}

/* Largest change of a valid cell's outputs; padded outputs must be 0. */
static double valid_change(const run_out *a, const run_out *b, const float *mask)
{
    double d = fabs((double)a->aux - b->aux);
    for (int cell = 0; cell < MB * MN; cell++) {
        for (int g = 0; g < TG; g++) {
            int k = cell * TG + g;
            if (mask[cell] == 0.0f) cr_assert_eq(b->expr[k], 0.0f, "padded expression output %d", cell);
            else d = fmax(d, fabs((double)a->expr[k] - b->expr[k]));
        }
        for (int j = 0; j < 3; j++) {
            int k = cell * 3 + j;
            if (mask[cell] == 0.0f) cr_assert_eq(b->pos[k], 0.0f, "padded position output %d", cell);
            else d = fmax(d, fabs((double)a->pos[k] - b->pos[k]));
        }
    }
    return d;
}

static double padding_influence(int variant, int honour)
{
    ast_model_config cfg;
    tiny_config(&cfg, variant, "2");
    cfg.honour_mask = honour;
    ast_model *m = mf_model(&cfg, 21);
    ast_params *own = ast_params_new(5);
    tiny_inputs in = tiny_inputs_new(own, MB, MN);
    for (int n = M_VALID; n < MN; n++) in.mask->data[MN + n] = 0.0f;
    run_out before, after;
    run_eval(m, &in, &before);
    for (int n = M_VALID; n < MN; n++) { /* new contents for the padded cells */
        for (int g = 0; g < TG; g++) in.expression->data[(MN + n) * TG + g] += 3.0f;
        for (int j = 0; j < 3; j++) in.positions->data[(MN + n) * 3 + j] -= 5.0f;
    }
    run_eval(m, &in, &after);
    double d = valid_change(&before, &after, in.mask->data);
    ast_params_free(own);
    ast_model_free(m);
    return d;
}

/* Honoured, padded cells contribute exact zeros (masked weights), so valid
 * outputs may differ only by summation order: 1e-6 on O(1) outputs. The
 * reference behaviour (honour_mask = 0) must show the leak, or the check
 * proves nothing: 1e-4 is far above rounding. */
Test(model, padded_cells_do_not_change_valid_outputs)
{
    for (int v = 0; v < 4; v++) {
        double honoured = padding_influence(v, 1), leaked = padding_influence(v, 0);
        cr_expect_lt(honoured, 1e-6, "%s: padding moved valid outputs by %g", variant_name(v), honoured);
        cr_expect_gt(leaked, 1e-4, "%s: the reference path should leak padding (%g)", variant_name(v), leaked);
    }
}

/* ---- determinism ---------------------------------------------------------- */

static float training_loss(uint64_t model_seed, uint64_t step_seed)
{
    ast_model_config cfg;
    tiny_config(&cfg, 3, "2");
    ast_model *m = mf_model(&cfg, model_seed);
    ast_params *own = ast_params_new(7);
    tiny_inputs in = tiny_inputs_new(own, TB, TN);
    ast_ctx *c = ast_ctx_new(step_seed);
    ast_ctx_set_training(c, 1);
    ast_model_out o = ast_model_forward(m, c, in.expression, in.t, in.positions, in.mask, NULL, NULL);
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    ast_loss_parts l = ast_diffusion_loss(c, &lc, &o, in.expression, in.positions, in.mask);
    ast_backward(c, l.total);
    float v = l.total->data[0];
    ast_ctx_free(c);
    ast_params_free(own);
    ast_model_free(m);
    return v;
}

Test(model, same_seed_gives_the_same_loss)
{
    float a = training_loss(31, 4), b = training_loss(31, 4), other_step = training_loss(31, 5);
    cr_assert(memcmp(&a, &b, sizeof a) == 0, "same seeds: %.9g vs %.9g", a, b);
    /* dropout and router noise draw from the step seed, so it must matter */
    cr_assert_neq(a, other_step, "step seed ignored in training mode");
}

/* ---- the inference path: grad off ------------------------------------------ */

typedef struct eval_pass {
    float *out; /* expression then positions, copied out of the arena */
    size_t peak;
} eval_pass;

/* One eval-mode forward of m on a fresh context, grad on or off. */
static eval_pass eval_forward(ast_model *m, const tiny_inputs *in, int grad)
{
    ast_ctx *c = ast_ctx_new(3);
    ast_ctx_set_training(c, 0);
    ast_ctx_set_grad(c, grad);
    ast_model_out o = ast_model_forward(m, c, in->expression, in->t, in->positions, in->mask, NULL, NULL);
    int64_t ne = o.expression->size, np = o.positions->size;
    eval_pass r = {ast_xmalloc((size_t)(ne + np) * sizeof(float)), ast_ctx_arena_peak(c)};
    memcpy(r.out, o.expression->data, (size_t)ne * sizeof(float));
    memcpy(r.out + ne, o.positions->data, (size_t)np * sizeof(float));
    ast_ctx_free(c);
    return r;
}

/* What sample, eval and predict run (grad off) computes what the training
 * forward in eval mode computes, bit for bit, and keeps less: nothing for
 * a backward (no saved statistics, no gradients' operands). Large enough
 * sets (64 cells, d_model 32) that the activations, not the fixed-size
 * allocations, make the arena's peak. */
Test(model, grad_off_forward_is_the_eval_forward_and_keeps_less)
{
    for (int v = 0; v < 4; v++) {
        ast_model_config cfg;
        tiny_config(&cfg, v, "2");
        cfg.d_model = 32, cfg.d_ff = 64, cfg.num_layers = 2;
        ast_model *m = mf_model(&cfg, 17);
        ast_params *own = ast_params_new(9);
        tiny_inputs in = tiny_inputs_new(own, 2, 64);
        eval_pass on = eval_forward(m, &in, 1), off = eval_forward(m, &in, 0);
        size_t n = (size_t)2 * 64 * (TG + 3);
        cr_expect(memcmp(on.out, off.out, n * sizeof(float)) == 0, "%s: grad-off forward differs from grad-on",
                  variant_name(v));
        cr_expect_lt(off.peak, on.peak, "%s: arena peak %zu bytes with grad off, %zu with grad on", variant_name(v),
                     off.peak, on.peak);
        cr_log_info("%s: arena peak %zu bytes grad off, %zu grad on", variant_name(v), off.peak, on.peak);
        free(on.out), free(off.out);
        ast_params_free(own);
        ast_model_free(m);
    }
}

/* ---- the structural prior (docs/model.md §2.12) --------------------------- */

static void prior_config(ast_model_config *cfg, int inputs, int residual)
{
    tiny_config(cfg, 0, "2");
    cfg->prior = (ast_prior_config){AST_PRIOR_ISOMAP, 2, 2, 0};
    cfg->prior_inputs = inputs;
    cfg->prior_residual = residual;
}

/* The prior enters the network on the tape like any input: its input
 * projection, the gain and the head behind it all get finite-difference
 * checked gradients. The gain is set away from its initial 0, or nothing
 * reaches the head. The expression is left out: the prior is computed
 * from it on the host as a constant (no gradient through Isomap's graph),
 * so moving it moves the output in a way no gradient claims. Same h and
 * tolerance as the whole-model check above, for the same reasons. */
Test(model, prior_gradients_match_finite_differences)
{
    ast_model_config cfg;
    prior_config(&cfg, 1, 1);
    ast_model *m = mf_model(&cfg, 12);
    ast_params *p = ast_model_params(m), *own = ast_params_new(4);
    ast_params_find(p, "prior_gain")->data[0] = 0.7f;
    grad_ud ud = {m, tiny_inputs_new(own, TB, TN)};
    ast_tensor *checked[] = {
        ud.in.t, ud.in.positions, ast_params_find(p, "prior_in.weight"), ast_params_find(p, "prior_in.bias"),
        ast_params_find(p, "prior_gain"), ast_params_find(p, "mlp_out_position_norm.0.weight"),
        ast_params_find(p, "transformer_layers.0.attn_model.concatenated_features.weight"),
    };
    int n = (int)(sizeof checked / sizeof checked[0]);
    for (int i = 0; i < n; i++) cr_assert_not_null(checked[i], "checked tensor %d missing", i);
    dir_result r = directional_check(&ud, checked, n, GC_H, GC_DIRS);
    cr_expect_lt(r.worst, GC_TOL, "along a direction analytic %g numeric %g", r.analytic, r.numeric);
    ast_params_free(own);
    ast_model_free(m);
}

static void keep_prior(void *ud, const char *name, ast_tensor *t)
{
    if (!strcmp(name, "prior")) memcpy(ud, t->data, (size_t)t->size * sizeof(float));
}

/* The untrained residual model (gain 0) returns the prior bit for bit, the
 * prior is what model/prior.h computes from the expression alone, and
 * neither changes when the positions are replaced by others. */
Test(model, untrained_residual_returns_the_prior_whatever_the_positions)
{
    ast_model_config cfg;
    prior_config(&cfg, 1, 1);
    ast_model *m = mf_model(&cfg, 13);
    ast_params *own = ast_params_new(6);
    tiny_inputs in = tiny_inputs_new(own, MB, MN);
    for (int n = M_VALID; n < MN; n++) in.mask->data[MN + n] = 0.0f;
    float want[MB * MN * 3], seen[2][MB * MN * 3], out[2][MB * MN * 3];
    ast_prior_config pc = cfg.prior;
    ast_prior_batch(NULL, &pc, MB, MN, TG, in.expression->data, in.mask->data, want, NULL);
    for (int run = 0; run < 2; run++) {
        ast_ctx *c = ast_ctx_new(1);
        ast_ctx_set_grad(c, 0);
        ast_model_out o = ast_model_forward(m, c, in.expression, in.t, in.positions, in.mask, keep_prior, seen[run]);
        memcpy(out[run], o.positions->data, sizeof out[run]);
        ast_ctx_free(c);
        for (int64_t i = 0; i < in.positions->size; i++) /* scrambled: reversed and moved */
            in.positions->data[i] = 3.0f * in.positions->data[in.positions->size - 1 - i] + 1.0f;
    }
    cr_assert(memcmp(seen[0], want, sizeof want) == 0, "the model's prior is not model/prior.h's");
    cr_assert(memcmp(seen[1], want, sizeof want) == 0, "the prior changed with the positions");
    cr_assert(memcmp(out[0], want, sizeof want) == 0 && memcmp(out[1], want, sizeof want) == 0,
              "gain 0 must return the prior exactly");
    ast_params_free(own);
    ast_model_free(m);
}

/* The trainer and the sampler compute the prior and the geodesics on the
 * host before the step (ast_model_prior_host) and hand them in: the
 * forward then gives the numbers it computes itself from the same
 * expression, bit for bit, with the prior as input channels, as the
 * residual's base (gain away from 0) and the geodesic attention's bias. */
Test(model, given_prior_and_geodesics_forward_as_computed)
{
    ast_model_config cfg;
    prior_config(&cfg, 1, 1);
    cfg.attention = "geodesic";
    ast_model *m = mf_model(&cfg, 14);
    ast_params_find(ast_model_params(m), "prior_gain")->data[0] = 0.7f;
    ast_params *own = ast_params_new(7);
    tiny_inputs in = tiny_inputs_new(own, MB, MN);
    for (int n = M_VALID; n < MN; n++) in.mask->data[MN + n] = 0.0f;
    int wants_prior, wants_geo;
    ast_model_prior_wants(m, &wants_prior, &wants_geo);
    cr_assert(wants_prior && wants_geo, "the model should want both (prior %d, geodesics %d)", wants_prior, wants_geo);
    float prior[MB * MN * 3], geo[MB * MN * MN], pos[2][MB * MN * 3], expr[2][MB * MN * TG];
    ast_model_prior_host(m, MB, MN, in.expression->data, in.mask->data, prior, geo);
    for (int given = 0; given < 2; given++) {
        ast_ctx *c = ast_ctx_new(1);
        ast_ctx_set_grad(c, 0);
        ast_model_prior_in pi = {ast_tensor_from(c, 3, (int64_t[]){MB, MN, 3}, prior),
                                 ast_tensor_from(c, 3, (int64_t[]){MB, MN, MN}, geo)};
        ast_model_out o = ast_model_forward_given(m, c, in.expression, in.t, in.positions, in.mask, given ? &pi : NULL,
                                                  NULL, NULL);
        memcpy(pos[given], o.positions->data, sizeof pos[given]);
        memcpy(expr[given], o.expression->data, sizeof expr[given]);
        ast_ctx_free(c);
    }
    cr_assert(memcmp(pos[0], pos[1], sizeof pos[0]) == 0, "positions differ with the prior given");
    cr_assert(memcmp(expr[0], expr[1], sizeof expr[0]) == 0, "expression differs with the geodesics given");
    ast_params_free(own);
    ast_model_free(m);
}
