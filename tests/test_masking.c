/* Masked diffusion (docs/model.md §5 with the fixes of issue 4): mask statistics
 * per strategy, padded cells, the progressive ratio, the token
 * replacement and its gradient, the reconstruction loss for both targets,
 * the config, and training runs with masking on the bundled data.
 *
 * Frequency checks allow 5 binomial standard deviations: a correct
 * implementation fails one with probability < 6e-7 per count, and the
 * draws are seeded, so the tests are deterministic anyway. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/train.h"
#include "gradcheck.h"
#include "train_fixture.h"

#define EXPR_TOKEN "masking_module.mask_token.expression_mask_token"
#define POS_TOKEN "masking_module.mask_token.position_mask_token"

static void assert_binomial(long count, long n, double p, const char *what)
{
    double mean = n * p, sd = sqrt(n * p * (1.0 - p));
    cr_assert(fabs(count - mean) <= 5.0 * sd, "%s: %ld of %ld, expected %.1f +- %.1f", what, count, n, mean, 5.0 * sd);
}

/* node_mask [B, N]: the last `padded` cells of every odd set are padding. */
static float *node_mask_with_padding(int B, int N, int padded)
{
    float *m = malloc((size_t)B * N * sizeof *m);
    for (int b = 0; b < B; b++)
        for (int n = 0; n < N; n++) m[b * N + n] = (b % 2 && n >= N - padded) ? 0.0f : 1.0f;
    return m;
}

static int row_count(const float *row, int width)
{
    int k = 0;
    for (int i = 0; i < width; i++) k += row[i] == 1.0f;
    return k;
}

Test(masking, gene_count_masks_exactly_and_keeps_genes_visible)
{
    cr_assert_eq(ast_mask_gene_count(100, 0.4f), 40);
    cr_assert_eq(ast_mask_gene_count(100, 0.33f), 33);
    cr_assert_eq(ast_mask_gene_count(20, 0.9f), 10, "10 genes stay visible");
    cr_assert_eq(ast_mask_gene_count(50, 0.001f), 1, "a positive ratio masks at least one gene");
    cr_assert_eq(ast_mask_gene_count(100, 0.0f), 0, "ratio 0 skips the mask");
    /* G <= 10 (the reference fails): all but one gene stay visible. */
    cr_assert_eq(ast_mask_gene_count(8, 0.4f), 1);
    cr_assert_eq(ast_mask_gene_count(10, 0.9f), 1);
    cr_assert_eq(ast_mask_gene_count(1, 0.5f), 1);
}

Test(masking, random_masks_exactly_m_cnt_uniform_genes_per_valid_cell)
{
    enum { B = 4, N = 50, G = 30, DRAWS = 20 };
    float *nm = node_mask_with_padding(B, N, 5), *out = malloc(sizeof(float) * B * N * G);
    int m = ast_mask_gene_count(G, 0.4f);
    long per_gene[G] = {0}, cells = 0;
    ast_rng rng;
    ast_rng_seed(&rng, 1);
    for (int k = 0; k < DRAWS; k++) {
        ast_mask_expression(AST_MASK_RANDOM, &rng, B, N, G, m, NULL, nm, out);
        for (int c = 0; c < B * N; c++) {
            cr_assert_eq(row_count(out + c * G, G), nm[c] ? m : 0, "cell %d", c);
            for (int g = 0; g < G && nm[c]; g++) per_gene[g] += out[c * G + g] == 1.0f;
            cells += nm[c] > 0;
        }
    }
    for (int g = 0; g < G; g++) assert_binomial(per_gene[g], cells, (double)m / G, "gene frequency");
    free(nm), free(out);
}

Test(masking, block_masks_one_contiguous_run_per_set)
{
    enum { B = 400, N = 6, G = 30 };
    float *nm = node_mask_with_padding(B, N, 2), *out = malloc(sizeof(float) * B * N * G);
    int m = ast_mask_gene_count(G, 0.4f), seen_first = 0, seen_last = 0;
    ast_rng rng;
    ast_rng_seed(&rng, 2);
    ast_mask_expression(AST_MASK_BLOCK, &rng, B, N, G, m, NULL, nm, out);
    for (int b = 0; b < B; b++) {
        const float *first = out + (size_t)b * N * G;
        int start = 0;
        while (start < G && first[start] == 0.0f) start++;
        cr_assert(start <= G - m, "set %d: the block starts at %d", b, start);
        for (int g = 0; g < G; g++) cr_assert_eq(first[g], (float)(g >= start && g < start + m), "set %d gene %d", b, g);
        for (int n = 1; n < N; n++) {
            const float *row = first + n * G;
            if (nm[b * N + n]) cr_assert_eq(memcmp(row, first, G * sizeof *row), 0, "set %d cell %d", b, n);
            else cr_assert_eq(row_count(row, G), 0, "padded cell %d of set %d", n, b);
        }
        seen_first |= start == 0, seen_last |= start == G - m;
    }
    /* 19 possible starts: missing one in 400 sets has probability 4e-10. */
    cr_assert(seen_first && seen_last, "starts must cover 0 .. G - m_cnt");
    free(nm), free(out);
}

Test(masking, structured_masks_the_largest_magnitudes)
{
    enum { B = 2, N = 5, G = 16 };
    float input[B * N * G], out[B * N * G], *nm = node_mask_with_padding(B, N, 2);
    ast_rng rng;
    ast_rng_seed(&rng, 3);
    for (int i = 0; i < B * N * G; i++) input[i] = ast_rng_gauss(&rng);
    int m = 5;
    ast_mask_expression(AST_MASK_STRUCTURED, &rng, B, N, G, m, input, nm, out);
    for (int c = 0; c < B * N; c++) {
        cr_assert_eq(row_count(out + c * G, G), nm[c] ? m : 0, "cell %d", c);
        if (!nm[c]) continue;
        float min_masked = INFINITY, max_kept = 0.0f;
        for (int g = 0; g < G; g++) {
            float a = fabsf(input[c * G + g]);
            if (out[c * G + g] == 1.0f) min_masked = fminf(min_masked, a);
            else max_kept = fmaxf(max_kept, a);
        }
        cr_assert(min_masked > max_kept, "cell %d: masked %g but kept %g", c, min_masked, max_kept);
    }
    /* Ties go to the lower gene; the sign does not matter. */
    float tie[6] = {1.0f, -3.0f, 0.5f, 3.0f, 3.0f, 2.0f}, tie_out[6];
    ast_mask_expression(AST_MASK_STRUCTURED, &rng, 1, 1, 6, 2, tie, NULL, tie_out);
    float want[6] = {0, 1, 0, 1, 0, 0};
    cr_assert_eq(memcmp(tie_out, want, sizeof want), 0);
    free(nm);
}

Test(masking, positions_mask_one_or_two_distinct_axes_at_the_spec_rates)
{
    enum { B = 20, N = 1000 };
    const float rho = 0.5f;
    float *nm = node_mask_with_padding(B, N, 100), *out = malloc(sizeof(float) * B * N * 3);
    ast_rng rng;
    ast_rng_seed(&rng, 4);
    ast_mask_positions(&rng, B, N, rho, nm, out);
    long by_count[4] = {0}, per_axis[3] = {0}, cells = 0;
    for (int c = 0; c < B * N; c++) {
        int k = row_count(out + c * 3, 3);
        if (!nm[c]) {
            cr_assert_eq(k, 0, "padded cell %d masked", c);
            continue;
        }
        cells++, by_count[k]++;
        for (int d = 0; d < 3; d++) per_axis[d] += out[c * 3 + d] == 1.0f;
    }
    cr_assert_eq(by_count[3], 0, "at most two axes");
    assert_binomial(by_count[2], cells, 0.3 * rho, "two axes");
    assert_binomial(by_count[1], cells, 0.7 * rho, "one axis");
    /* each axis: 2/3 of the two-axis cells and 1/3 of the one-axis cells */
    for (int d = 0; d < 3; d++) assert_binomial(per_axis[d], cells, (0.3 * 2 + 0.7) * rho / 3, "axis frequency");
    free(nm), free(out);
}

Test(masking, progressive_ratio_grows_with_optimiser_steps)
{
    ast_masking_config mc;
    ast_masking_config_default(&mc);
    cr_assert_eq(ast_masking_ratio(&mc, 0.4f, 0), 0.4f, "not progressive: the target ratio");
    mc.progressive = 1, mc.progressive_steps = 1000;
    cr_assert_eq(ast_masking_ratio(&mc, 0.4f, 0), 0.0f);
    cr_assert_float_eq(ast_masking_ratio(&mc, 0.4f, 250), 0.1f, 1e-7);
    cr_assert_float_eq(ast_masking_ratio(&mc, 0.4f, 500), 0.2f, 1e-7);
    cr_assert_eq(ast_masking_ratio(&mc, 0.4f, 1000), 0.4f);
    cr_assert_eq(ast_masking_ratio(&mc, 0.4f, 5000), 0.4f, "capped at the target");
}

/* ---- the module ---------------------------------------------------------- */

enum { MB = 2, MN = 4, MG = 12 };

typedef struct module_fixture {
    ast_params *p;
    ast_masking *mk;
    float node_mask[MB * MN];
    ast_rng rng;
} module_fixture;

static module_fixture module_open(ast_masking_config mc, ast_train_mode mode, uint64_t seed)
{
    module_fixture f = {.p = ast_params_new(seed)};
    for (int i = 0; i < MB * MN; i++) f.node_mask[i] = i == MB * MN - 1 ? 0.0f : 1.0f; /* one padded cell */
    f.mk = ast_masking_new(&mc, mode, f.p, MB, MN, MG);
    ast_rng_seed(&f.rng, seed);
    return f;
}

static void module_close(module_fixture *f)
{
    ast_masking_free(f->mk);
    ast_params_free(f->p);
}

static ast_masking_config always_on(void)
{
    ast_masking_config mc;
    ast_masking_config_default(&mc);
    mc.enable = 1, mc.masking_probability = 1.0f, mc.expression_mask_ratio = 0.3f, mc.position_mask_ratio = 0.9f;
    return mc;
}

/* Inputs far from any token value, so a replaced entry shows. */
static ast_tensor *sentinel(ast_ctx *c, int64_t width)
{
    ast_tensor *x = ast_zeros(c, 3, (int64_t[]){MB, MN, width});
    for (int64_t i = 0; i < x->size; i++) x->data[i] = 100.0f + (float)i;
    return x;
}

/* The masks the module drew, read back through the replacement. */
static void drawn_masks(ast_masking *mk, float *m_expr, float *m_pos)
{
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *x = sentinel(c, MG), *p = sentinel(c, 3), *xi = x, *pi = p;
    ast_masking_inputs(mk, c, &xi, &pi);
    for (int64_t i = 0; i < x->size; i++) m_expr[i] = xi->data[i] != x->data[i];
    for (int64_t i = 0; i < p->size; i++) m_pos[i] = pi->data[i] != p->data[i];
    ast_ctx_free(c);
}

Test(masking, tokens_are_parameters_with_the_reference_names_and_init)
{
    ast_params *p = ast_params_new(7);
    ast_masking_config mc = always_on();
    ast_masking *mk = ast_masking_new(&mc, AST_MODE_JOINT, p, MB, MN, 500);
    ast_tensor *te = ast_params_find(p, EXPR_TOKEN), *tp = ast_params_find(p, POS_TOKEN);
    cr_assert(te && tp);
    cr_assert(te->ndim == 3 && te->shape[0] == 1 && te->shape[1] == 1 && te->shape[2] == 500);
    cr_assert(tp->ndim == 3 && tp->shape[2] == 3);
    cr_assert_eq(ast_params_numel(p), 503, "+G+3 parameters");
    double ss = 0;
    for (int i = 0; i < 500; i++) ss += te->data[i] * te->data[i];
    /* sample std of 500 N(0, 0.02^2) draws: 0.02 within 5 standard errors (0.02/sqrt(1000)) */
    cr_assert_float_eq(sqrt(ss / 500), 0.02, 5 * 0.02 / sqrt(1000.0));
    ast_masking *again = ast_masking_new(&mc, AST_MODE_JOINT, p, MB, MN, 500);
    cr_assert_eq(ast_params_numel(p), 503, "a second module reuses the tokens");
    ast_masking_free(again);
    ast_masking_free(mk);
    ast_params_free(p);
}

Test(masking, batch_decision_follows_the_probability)
{
    ast_masking_config mc = always_on();
    mc.masking_probability = 0.3f;
    module_fixture f = module_open(mc, AST_MODE_JOINT, 8);
    long masked = 0, draws = 3000;
    for (long i = 0; i < draws; i++) masked += ast_masking_draw(f.mk, &f.rng, 0, NULL, f.node_mask) != NULL;
    assert_binomial(masked, draws, 0.3, "masked batches");
    cr_assert_null(ast_masking_draw(NULL, &f.rng, 0, NULL, f.node_mask), "disabled: never masked");
    module_close(&f);

    mc.masking_probability = 0.0f;
    f = module_open(mc, AST_MODE_JOINT, 8);
    for (int i = 0; i < 100; i++) cr_assert_null(ast_masking_draw(f.mk, &f.rng, 0, NULL, f.node_mask));
    module_close(&f);

    mc = always_on();
    mc.progressive = 1;
    f = module_open(mc, AST_MODE_JOINT, 8);
    cr_assert_null(ast_masking_draw(f.mk, &f.rng, 0, NULL, f.node_mask), "progressive ratios are 0 at step 0");
    cr_assert_not_null(ast_masking_draw(f.mk, &f.rng, 5000, NULL, f.node_mask));
    /* a sweep's mask_ratio schedule replaces the progressive ramp */
    ast_masking_schedule(f.mk, 1.0f);
    cr_assert_not_null(ast_masking_draw(f.mk, &f.rng, 0, NULL, f.node_mask), "scheduled share 1 at step 0");
    ast_masking_schedule(f.mk, 0.0f);
    cr_assert_null(ast_masking_draw(f.mk, &f.rng, 5000, NULL, f.node_mask), "scheduled share 0");
    ast_masking_schedule(f.mk, NAN);
    cr_assert_not_null(ast_masking_draw(f.mk, &f.rng, 5000, NULL, f.node_mask), "back to the config's ramp");
    module_close(&f);
}

/* Which modalities a module masks in `mode`: bit 0 expression, bit 1 positions. */
static int masked_modalities(ast_masking_config mc, ast_train_mode mode)
{
    module_fixture f = module_open(mc, mode, 9);
    float me[MB * MN * MG], mp[MB * MN * 3];
    cr_assert_not_null(ast_masking_draw(f.mk, &f.rng, 0, NULL, f.node_mask));
    drawn_masks(f.mk, me, mp);
    module_close(&f);
    return (row_count(me, MB * MN * MG) > 0) | (row_count(mp, MB * MN * 3) > 0) << 1;
}

Test(masking, conditioning_modality_is_masked_only_on_request)
{
    ast_masking_config mc = always_on();
    cr_assert_eq(masked_modalities(mc, AST_MODE_JOINT), 3);
    cr_assert_eq(masked_modalities(mc, AST_MODE_EXPR_TO_POS), 2, "clean expression stays visible");
    cr_assert_eq(masked_modalities(mc, AST_MODE_POS_TO_EXPR), 1, "clean positions stay visible");
    mc.mask_conditioning = 1;
    cr_assert_eq(masked_modalities(mc, AST_MODE_EXPR_TO_POS), 3);
    cr_assert_eq(masked_modalities(mc, AST_MODE_POS_TO_EXPR), 3);
    mc.mask_expression = 0;
    cr_assert_eq(masked_modalities(mc, AST_MODE_JOINT), 2);
    mc.mask_expression = 1, mc.mask_position = 0;
    cr_assert_eq(masked_modalities(mc, AST_MODE_JOINT), 1);
}

Test(masking, masked_entries_take_the_token_values)
{
    module_fixture f = module_open(always_on(), AST_MODE_JOINT, 10);
    cr_assert_not_null(ast_masking_draw(f.mk, &f.rng, 0, NULL, f.node_mask));
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *x = sentinel(c, MG), *p = sentinel(c, 3), *xi = x, *pi = p;
    ast_masking_inputs(f.mk, c, &xi, &pi);
    const float *te = ast_params_find(f.p, EXPR_TOKEN)->data, *tp = ast_params_find(f.p, POS_TOKEN)->data;
    int m = ast_mask_gene_count(MG, 0.3f);
    for (int cell = 0; cell < MB * MN; cell++) {
        int genes = 0, axes = 0;
        for (int g = 0; g < MG; g++) {
            float v = xi->data[cell * MG + g];
            cr_assert(v == x->data[cell * MG + g] || v == te[g], "cell %d gene %d: %g", cell, g, v);
            genes += v == te[g];
        }
        for (int d = 0; d < 3; d++) axes += pi->data[cell * 3 + d] == tp[d];
        cr_assert_eq(genes, f.node_mask[cell] ? m : 0, "cell %d", cell);
        cr_assert(f.node_mask[cell] ? axes <= 2 : axes == 0, "cell %d: %d axes", cell, axes);
    }
    ast_ctx_free(c);
    module_close(&f);
}

static ast_tensor *fwd_inputs(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    ast_tensor *x = in[0], *p = in[1];
    ast_masking_inputs(ud, c, &x, &p);
    return ast_concat(c, (ast_tensor *[]){x, p}, 2);
}

Test(masking, token_gradient_comes_exactly_from_the_masked_entries)
{
    module_fixture f = module_open(always_on(), AST_MODE_JOINT, 11);
    cr_assert_not_null(ast_masking_draw(f.mk, &f.rng, 0, NULL, f.node_mask));
    float me[MB * MN * MG], mp[MB * MN * 3];
    drawn_masks(f.mk, me, mp);
    ast_tensor *in[4] = {gc_input(f.p, "x", 3, (int64_t[]){MB, MN, MG}, 1.0f),
                         gc_input(f.p, "p", 3, (int64_t[]){MB, MN, 3}, 1.0f), ast_params_find(f.p, EXPR_TOKEN),
                         ast_params_find(f.p, POS_TOKEN)};
    /* The map is linear, so central differences are exact up to float32
     * rounding of the projected sum (~1e-7 * 60 / 2h = 3e-5 with h = 0.1). */
    gc_result r = gc_check(fwd_inputs, in, 4, f.mk, 0.1f, 1e-2);
    cr_assert_lt(r.max_err, 1e-3, "input %d [%lld]: analytic %g numeric %g", r.worst_input, (long long)r.worst_index,
                 r.analytic, r.numeric);

    /* By hand: dL/dtoken[g] = sum over masked (b, n) of dL/dx_in; dL/dx = dL/dx_in where kept, else 0. */
    for (int k = 0; k < 4; k++) memset(in[k]->grad, 0, in[k]->size * sizeof(float));
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = fwd_inputs(c, in, f.mk);
    float seed[MB * MN * (MG + 3)];
    for (int i = 0; i < MB * MN * (MG + 3); i++) seed[i] = (float)(i % 7) - 3.0f;
    ast_backward_seed(c, y, seed);
    double want_te[MG] = {0}, want_tp[3] = {0};
    for (int cell = 0; cell < MB * MN; cell++) {
        for (int g = 0; g < MG; g++) {
            float s = seed[cell * (MG + 3) + g];
            want_te[g] += me[cell * MG + g] * s;
            cr_assert_eq(in[0]->grad[cell * MG + g], me[cell * MG + g] ? 0.0f : s);
        }
        for (int d = 0; d < 3; d++) {
            float s = seed[cell * (MG + 3) + MG + d];
            want_tp[d] += mp[cell * 3 + d] * s;
            cr_assert_eq(in[1]->grad[cell * 3 + d], mp[cell * 3 + d] ? 0.0f : s);
        }
    }
    /* small integers summed in float32: exact */
    for (int g = 0; g < MG; g++) cr_assert_eq(in[2]->grad[g], (float)want_te[g], "token gene %d", g);
    for (int d = 0; d < 3; d++) cr_assert_eq(in[3]->grad[d], (float)want_tp[d], "token axis %d", d);
    ast_ctx_free(c);
    module_close(&f);
}

/* weight * (mean over masked expr of (pred - target)^2 + the same for positions), in double. */
static double hand_loss(const float *me, const float *mp, const ast_tensor *px, const ast_tensor *pp,
                        const ast_tensor *tx, const ast_tensor *tp, double weight, double *re, double *rp)
{
    double se = 0, ne = 0, sp = 0, np = 0;
    for (int64_t i = 0; i < px->size; i++) se += me[i] * pow(px->data[i] - tx->data[i], 2), ne += me[i];
    for (int64_t i = 0; i < pp->size; i++) sp += mp[i] * pow(pp->data[i] - tp->data[i], 2), np += mp[i];
    *re = ne ? se / ne : 0.0, *rp = np ? sp / np : 0.0;
    return weight * (*re + *rp);
}

static ast_tensor *random_tensor(ast_ctx *c, int64_t width, ast_rng *rng)
{
    ast_tensor *t = ast_zeros(c, 3, (int64_t[]){MB, MN, width});
    for (int64_t i = 0; i < t->size; i++) t->data[i] = ast_rng_gauss(rng);
    return t;
}

static void check_reconstruction(ast_recon_target target)
{
    ast_masking_config mc = always_on();
    mc.target = target, mc.reconstruction_weight = 0.7f;
    module_fixture f = module_open(mc, AST_MODE_JOINT, 12);
    cr_assert_not_null(ast_masking_draw(f.mk, &f.rng, 0, NULL, f.node_mask));
    float me[MB * MN * MG], mp[MB * MN * 3];
    drawn_masks(f.mk, me, mp);
    ast_ctx *c = ast_ctx_new(0);
    ast_rng rng;
    ast_rng_seed(&rng, 13);
    ast_tensor *px = random_tensor(c, MG, &rng), *pp = random_tensor(c, 3, &rng);
    ast_tensor *cx = random_tensor(c, MG, &rng), *cp = random_tensor(c, 3, &rng);
    ast_tensor *ix = random_tensor(c, MG, &rng), *ip = random_tensor(c, 3, &rng);
    ast_model_out pred = {px, pp};
    ast_tensor *loss = ast_masking_loss(f.mk, c, &pred, cx, cp, ix, ip);
    int clean = target == AST_RECON_CLEAN;
    double re, rp, want = hand_loss(me, mp, px, pp, clean ? cx : ix, clean ? cp : ip, 0.7, &re, &rp);
    cr_assert(re > 0 && rp > 0, "both masks must select entries");
    /* float32 sums of <= 100 O(1) squares: 1e-5 relative */
    cr_assert_float_eq(loss->data[0], want, 1e-5 * want);

    ast_masking_metrics got;
    cr_assert(ast_masking_take_metrics(f.mk, &got));
    cr_assert_float_eq(got.expr_reconstruction, re, 1e-5 * re);
    cr_assert_float_eq(got.pos_reconstruction, rp, 1e-5 * rp);
    cr_assert_eq(got.applied, 1.0);
    ast_ctx_free(c);
    module_close(&f);
}

Test(masking, reconstruction_loss_against_clean_data) { check_reconstruction(AST_RECON_CLEAN); }
Test(masking, reconstruction_loss_against_the_pre_mask_input) { check_reconstruction(AST_RECON_INPUT); }

/* One draw's model inputs and reconstruction loss (0 when the module
 * leaves the batch alone, as the trainer then adds none). */
typedef struct masked_step {
    float x[MB * MN * MG], p[MB * MN * 3], loss;
    int masked;
} masked_step;

static masked_step step_of(module_fixture *f, int64_t step)
{
    masked_step out = {.masked = ast_masking_draw(f->mk, &f->rng, step, NULL, f->node_mask) != NULL};
    ast_ctx *c = ast_ctx_new(0);
    ast_rng rng;
    ast_rng_seed(&rng, 21);
    ast_tensor *x = random_tensor(c, MG, &rng), *p = random_tensor(c, 3, &rng), *xi = x, *pi = p;
    ast_model_out pred = {random_tensor(c, MG, &rng), random_tensor(c, 3, &rng)};
    if (out.masked) ast_masking_inputs(f->mk, c, &xi, &pi);
    memcpy(out.x, xi->data, sizeof out.x), memcpy(out.p, pi->data, sizeof out.p);
    if (out.masked) out.loss = ast_masking_loss(f->mk, c, &pred, x, p, x, p)->data[0];
    ast_masking_collect(f->mk);
    ast_ctx_free(c);
    return out;
}

/* A device's module (ast_masking_pin) takes the masking ops for every
 * batch, so that a captured step can replay any: its unmasked batches must
 * give the model inputs and loss of a batch left alone, bit for bit, its
 * masked ones those of the CPU's module, and the metrics must match. */
Test(masking, a_pinned_module_gives_the_same_numbers_masked_or_not)
{
    ast_masking_config mc = always_on();
    mc.masking_probability = 0.5f, mc.progressive = 1, mc.progressive_steps = 4;
    module_fixture plain = module_open(mc, AST_MODE_JOINT, 14), pinned = module_open(mc, AST_MODE_JOINT, 14);
    ast_masking_pin(pinned.mk, ast_backend_cpu());
    int masked = 0, unmasked = 0;
    for (int64_t step = 0; step < 24; step++) {
        masked_step a = step_of(&plain, step), b = step_of(&pinned, step);
        cr_assert(b.masked, "step %lld: a pinned module takes every batch", (long long)step);
        cr_assert(!memcmp(a.x, b.x, sizeof a.x) && !memcmp(a.p, b.p, sizeof a.p), "step %lld (%s): inputs differ",
                  (long long)step, a.masked ? "masked" : "unmasked");
        cr_assert(!memcmp(&a.loss, &b.loss, sizeof a.loss), "step %lld (%s): loss %.9g, pinned %.9g", (long long)step,
                  a.masked ? "masked" : "unmasked", a.loss, b.loss);
        masked += a.masked, unmasked += !a.masked;
    }
    cr_assert(masked > 2 && unmasked > 2, "both kinds of batch: %d masked, %d not", masked, unmasked);
    ast_masking_metrics ma, mb;
    cr_assert(ast_masking_take_metrics(plain.mk, &ma) && ast_masking_take_metrics(pinned.mk, &mb));
    cr_assert(!memcmp(&ma, &mb, sizeof ma), "metrics: %.9g %.9g %.9g, pinned %.9g %.9g %.9g", ma.expr_reconstruction,
              ma.pos_reconstruction, ma.applied, mb.expr_reconstruction, mb.pos_reconstruction, mb.applied);
    module_close(&plain), module_close(&pinned);
}

/* ---- config ---------------------------------------------------------------- */

static int masking_from_yaml(const char *yaml, ast_train_config *tc, ast_error *e)
{
    ast_cfg *cfg = ast_cfg_load_string(yaml, "m.yaml", e);
    cr_assert(cfg, "%s", e->msg);
    int rc = ast_train_config_from_cfg(cfg, tc, e);
    ast_cfg_free(cfg);
    return rc;
}

Test(masking, config_keys_and_training_modes)
{
    ast_train_config tc;
    ast_error e = {""};
    cr_assert_eq(masking_from_yaml("training_mode: pos_to_expr\n"
                                   "masking: {enable: true, mask_strategy: structured, progressive_masking: true,\n"
                                   "          progressive_steps: 30, reconstruction_target: input,\n"
                                   "          mask_conditioning: true, masking_probability: 0.25}\n",
                                   &tc, &e), 0, "%s", e.msg);
    const ast_masking_config *mc = &tc.masking;
    cr_assert(mc->enable && mc->strategy == AST_MASK_STRUCTURED && mc->progressive && mc->progressive_steps == 30);
    cr_assert(mc->target == AST_RECON_INPUT && mc->mask_conditioning && mc->masking_probability == 0.25f);
    cr_assert(tc.mode == AST_MODE_POS_TO_EXPR && tc.loss.expression_noised && !tc.loss.positions_noised);

    cr_assert_eq(masking_from_yaml("training_mode: expr_to_pos\n", &tc, &e), 0, "%s", e.msg);
    cr_assert(!tc.masking.enable && tc.masking.target == AST_RECON_CLEAN && !tc.masking.mask_conditioning);
    cr_assert(!tc.loss.expression_noised && tc.loss.positions_noised);
    cr_assert_eq(masking_from_yaml("training_mode: joint\n", &tc, &e), 0, "%s", e.msg);
    cr_assert(tc.loss.expression_noised && tc.loss.positions_noised);

    cr_assert_eq(masking_from_yaml("training_mode: expr_to_pos\nmasking: {enable: true, mask_position: false}\n", &tc, &e),
                 -1);
    cr_assert(strstr(e.msg, "m.yaml:2:19: masking.enable: nothing can be masked in training_mode expr_to_pos"),
              "%s", e.msg);
    ast_cfg *bad = ast_cfg_load_string("masking: {reconstruction_target: noisy}\n", "m.yaml", &e);
    cr_assert_null(bad);
    cr_assert(strstr(e.msg, "reconstruction_target"), "%s", e.msg);
}

/* ---- training on the bundled data ------------------------------------------ */

static const char *tiny_yaml =
    "data: {set_size: 12, preprocessing: {position_key: spatial, cell_type_key: null}}\n"
    "diffusion: {diffusion_steps: 100}\n"
    "masking: {enable: true, masking_probability: 0.7, progressive_masking: true, progressive_steps: 4}\n"
    "training: {learning_rate: 1e-2, batch_size: 2, epochs: 2, steps_per_epoch: 3, val_sets: 4,\n"
    "           val_t_points: 2, early_stopping: false}\n"
    TINY_MODEL_YAML;

typedef struct run_fixture {
    train_setup s;
    ast_model *m;
    ast_trainer *t;
} run_fixture;

/* overrides: NULL-terminated "key=value" list. */
static void run_open(run_fixture *f, const char *dir, const char *const *overrides)
{
    ast_error e = {""};
    train_setup_open(&f->s, tiny_yaml, overrides);
    f->m = ast_model_new(&f->s.mc, f->s.tc.seed, &e);
    cr_assert(f->m, "%s", e.msg);
    f->t = ast_trainer_new(f->m, &f->s.d, f->s.sp, &f->s.tc, dir, NULL, &e);
    cr_assert(f->t, "%s", e.msg);
}

static void run_close(run_fixture *f)
{
    ast_trainer_free(f->t);
    ast_model_free(f->m);
    train_setup_close(&f->s);
}


static int count_lines_with(const char *dir, const char *a, const char *b)
{
    char path[256], line[1024];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    int n = 0;
    while (fgets(line, sizeof line, f)) n += strstr(line, a) && strstr(line, b);
    fclose(f);
    return n;
}

Test(masking, training_with_masking_trains_the_tokens, .timeout = 60)
{
    run_fixture f, plain;
    const char *off[] = {"masking.enable=false", NULL};
    run_open(&plain, train_tmp_dir("masking"), off);
    char *dir = train_tmp_dir("masking");
    run_open(&f, dir, NULL);
    int G = f.s.d.n_genes;
    cr_assert_eq(ast_model_param_count(f.m), ast_model_param_count(plain.m) + G + 3);
    cr_assert_eq(ast_model_active_param_count(f.m), ast_model_active_param_count(plain.m) + G + 3);
    /* Validation never masks: the same weights give the same loss. */
    cr_assert_eq(ast_trainer_val_loss(f.t), ast_trainer_val_loss(plain.t));

    ast_tensor *te = ast_params_find(ast_model_params(f.m), EXPR_TOKEN);
    ast_tensor *tp = ast_params_find(ast_model_params(f.m), POS_TOKEN);
    float *te0 = malloc(G * sizeof *te0), tp0[3];
    memcpy(te0, te->data, G * sizeof *te0), memcpy(tp0, tp->data, sizeof tp0);
    ast_train_result r;
    ast_error e = {""};
    cr_assert_eq(ast_trainer_run(f.t, &r, &e), 0, "%s", e.msg);
    for (int i = 0; i < ast_trainer_n_losses(f.t); i++) cr_assert(isfinite(ast_trainer_losses(f.t)[i]));
    cr_assert(memcmp(te0, te->data, G * sizeof *te0) && memcmp(tp0, tp->data, sizeof tp0), "the tokens must train");
    cr_assert_eq(count_lines_with(dir, "\"kind\":\"train\"", "\"masked_expr_reconstruction\""), 6);
    cr_assert_gt(count_lines_with(dir, "\"kind\":\"train\"", "\"masking_applied\":1"), 0);
    cr_assert_gt(count_lines_with(dir, "\"kind\":\"train\"", "\"masking_applied\":0"), 0,
                 "step 0 of the progressive schedule masks nothing");
    free(te0);
    run_close(&f);
    run_close(&plain);
}

static double *losses_of(const char *dir, int epochs, int64_t *n)
{
    char set[64];
    snprintf(set, sizeof set, "training.epochs=%d", epochs);
    const char *ov[] = {set, NULL};
    run_fixture f;
    run_open(&f, dir, ov);
    ast_error e = {""};
    ast_train_result r;
    cr_assert(ast_trainer_resume(f.t, &e) >= 0, "%s", e.msg);
    cr_assert_eq(ast_trainer_run(f.t, &r, &e), 0, "%s", e.msg);
    *n = ast_trainer_n_losses(f.t);
    double *out = malloc(*n * sizeof *out);
    memcpy(out, ast_trainer_losses(f.t), *n * sizeof *out);
    run_close(&f);
    return out;
}

Test(masking, resumed_run_continues_the_progressive_schedule_exactly, .timeout = 60)
{
    /* progressive_steps 4 over 6 steps: a schedule restarted at 0 on resume
     * would mask less and change the later losses. */
    int64_t n_full, n_first, n_rest;
    double *full = losses_of(train_tmp_dir("masking"), 2, &n_full);
    char *dir = train_tmp_dir("masking");
    double *first = losses_of(dir, 1, &n_first), *rest = losses_of(dir, 2, &n_rest);
    cr_assert(n_full == 6 && n_first == 3 && n_rest == 3);
    for (int i = 0; i < 3; i++) cr_assert_eq(first[i], full[i], "step %d", i + 1);
    for (int i = 0; i < 3; i++) cr_assert_eq(rest[i], full[3 + i], "step %d: %.9g vs %.9g", 4 + i, rest[i], full[3 + i]);
    free(full), free(first), free(rest);
}

Test(masking, every_training_mode_trains_with_masking, .timeout = 60)
{
    const char *modes[] = {"training_mode=expr_to_pos", "training_mode=pos_to_expr"};
    for (int k = 0; k < 2; k++) {
        const char *ov[] = {modes[k], "training.epochs=1", "masking.masking_probability=1.0", NULL};
        run_fixture f;
        run_open(&f, train_tmp_dir("masking"), ov);
        ast_error e = {""};
        ast_train_result r;
        cr_assert_eq(ast_trainer_run(f.t, &r, &e), 0, "%s: %s", modes[k], e.msg);
        for (int i = 0; i < ast_trainer_n_losses(f.t); i++) cr_assert(isfinite(ast_trainer_losses(f.t)[i]), "%s", modes[k]);
        cr_assert(isfinite(r.best_val), "%s", modes[k]);
        run_close(&f);
    }
}
