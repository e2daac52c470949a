/* The diffusion loss against loops written out from spec §4.2 step 5, and
 * its gradients against finite differences. */
#include <criterion/criterion.h>
#include <math.h>

#include "alphast/loss.h"
#include "gradcheck.h"

enum { B = 3, N = 4, G = 2 };

/* Set 0: all valid; set 1: 3 valid; set 2: one valid cell (no distance term). */
static const float mask_data[B * N] = {1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0};

typedef struct loss_fixture {
    ast_params *p;
    ast_tensor *pred_x, *pred_p, *x, *pos, *mask;
} loss_fixture;

static loss_fixture fixture(void)
{
    loss_fixture f;
    f.p = ast_params_new(17);
    f.pred_x = gc_input(f.p, "pred_x", 3, (int64_t[]){B, N, G}, 1.0f);
    f.pred_p = gc_input(f.p, "pred_p", 3, (int64_t[]){B, N, 3}, 1.0f);
    f.x = gc_input(f.p, "x", 3, (int64_t[]){B, N, G}, 1.0f);
    f.pos = gc_input(f.p, "pos", 3, (int64_t[]){B, N, 3}, 1.0f);
    f.mask = gc_input(f.p, "mask", 2, (int64_t[]){B, N}, 0.0f);
    f.mask->flags &= ~(uint32_t)AST_REQUIRES_GRAD;
    for (int i = 0; i < B * N; i++) f.mask->data[i] = mask_data[i];
    return f;
}

static double dist(const float *a, const float *b)
{
    double s = 0;
    for (int k = 0; k < 3; k++) s += ((double)a[k] - b[k]) * ((double)a[k] - b[k]);
    return sqrt(s);
}

static double expected_expression(const loss_fixture *f)
{
    double s = 0, m = 0;
    for (int c = 0; c < B * N; c++) {
        m += mask_data[c];
        for (int g = 0; g < G; g++) {
            double d = (double)f->pred_x->data[c * G + g] - f->x->data[c * G + g];
            s += mask_data[c] * d * d;
        }
    }
    return s / (G * m);
}

/* Mean over sets with >= 2 valid cells of (1/n^2) sum over valid pairs. */
static double expected_distances(const loss_fixture *f)
{
    double total = 0;
    int sets = 0;
    for (int b = 0; b < B; b++) {
        int idx[N], n = 0;
        for (int i = 0; i < N; i++)
            if (mask_data[b * N + i] != 0.0f) idx[n++] = b * N + i;
        if (n < 2) continue;
        double s = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double d = dist(f->pred_p->data + 3 * idx[i], f->pred_p->data + 3 * idx[j]) -
                           dist(f->pos->data + 3 * idx[i], f->pos->data + 3 * idx[j]);
                s += d * d;
            }
        total += s / ((double)n * n);
        sets++;
    }
    return total / sets;
}

static double expected_direct(const loss_fixture *f)
{
    double s = 0, m = 0;
    for (int c = 0; c < B * N; c++) {
        m += mask_data[c];
        for (int k = 0; k < 3; k++) {
            double d = (double)f->pred_p->data[c * 3 + k] - f->pos->data[c * 3 + k];
            s += mask_data[c] * d * d;
        }
    }
    return s / (3 * m);
}

/* float32 sums of <= 50 squared O(1) terms: 1e-5 relative. */
#define VAL_TOL 1e-5

Test(loss, parts_match_the_spec_formulas)
{
    loss_fixture f = fixture();
    ast_ctx *c = ast_ctx_new(0);
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    lc.lambda_expression = 0.5f;
    lc.lambda_position = 2.0f;
    ast_model_out pred = {f.pred_x, f.pred_p};
    ast_loss_parts l = ast_diffusion_loss(c, &lc, &pred, f.x, f.pos, f.mask);
    double e = expected_expression(&f), d = expected_distances(&f);
    cr_assert_float_eq(l.expression->data[0], e, VAL_TOL * e);
    cr_assert_float_eq(l.position->data[0], d, VAL_TOL * d);
    cr_assert_float_eq(l.total->data[0], 0.5 * e + 2.0 * d, VAL_TOL * (e + d));
    cr_assert_null(l.moe_aux, "no plugin published a loss");

    lc.use_distance_matrix = 0;
    lc.expression_noised = 0; /* expr_to_pos: only positions count */
    l = ast_diffusion_loss(c, &lc, &pred, f.x, f.pos, f.mask);
    double p = expected_direct(&f);
    cr_assert_float_eq(l.position->data[0], p, VAL_TOL * p);
    cr_assert_float_eq(l.total->data[0], 2.0 * p, VAL_TOL * p);
    ast_ctx_free(c);
    ast_params_free(f.p);
}

Test(loss, published_losses_join_the_total)
{
    loss_fixture f = fixture();
    ast_ctx *c = ast_ctx_new(0);
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    ast_tensor *aux = ast_tensor_from(c, 1, (int64_t[]){1}, (float[]){0.25f});
    ast_add_loss(c, "moe_aux", aux);
    ast_model_out pred = {f.pred_x, f.pred_p};
    ast_loss_parts l = ast_diffusion_loss(c, &lc, &pred, f.x, f.pos, f.mask);
    cr_assert_eq(l.moe_aux->data[0], 0.25f);
    double want = expected_expression(&f) + expected_distances(&f) + 0.25;
    cr_assert_float_eq(l.total->data[0], want, VAL_TOL * want);
    ast_ctx_free(c);
    ast_params_free(f.p);
}

static ast_tensor *fwd_loss(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const loss_fixture *f = ud;
    ast_loss_config lc;
    ast_loss_config_default(&lc);
    ast_model_out pred = {in[0], in[1]};
    return ast_diffusion_loss(c, &lc, &pred, f->x, f->pos, f->mask).total;
}

/* The loss is quadratic in pred_x and smooth in pred_p away from zero
 * distances (random points): h = 1e-2 gives truncation ~1e-4 relative and
 * float32 rounding of L (~1) / 2h ~ 1e-5; 1e-2 is a loose safe bound. */
Test(loss, gradients_match_finite_differences)
{
    loss_fixture f = fixture();
    ast_tensor *in[] = {f.pred_x, f.pred_p};
    gc_result r = gc_check(fwd_loss, in, 2, &f, 1e-2f, 1e-2);
    cr_assert_lt(r.max_err, 1e-2, "input %d[%lld]: analytic %g numeric %g", r.worst_input,
                 (long long)r.worst_index, r.analytic, r.numeric);
    /* padded cells and the single-cell set get no gradient from positions */
    for (int cell = 0; cell < B * N; cell++)
        if (mask_data[cell] == 0.0f || cell == 2 * N)
            for (int k = 0; k < 3; k++) cr_assert_eq(f.pred_p->grad[cell * 3 + k], 0.0f, "cell %d", cell);
    ast_params_free(f.p);
}
