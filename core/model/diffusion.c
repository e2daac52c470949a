/* The noise model of docs/model.md §3. Tables are computed as the reference does
 * (float64 cosine, float32 betas and cumulative log), so that the
 * reference values of §3.1 hold to float32 rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/diffusion.h"

#define COSINE_S 0.008

static const char *mode_names[] = {"joint", "expr_to_pos", "pos_to_expr"};

const char *ast_mode_name(ast_train_mode mode) { return mode_names[mode]; }

int ast_mode_parse(const char *s, ast_train_mode *out)
{
    int i = ast_name_index(s, mode_names, 3);
    if (i >= 0) *out = (ast_train_mode)i;
    return i < 0 ? -1 : 0;
}

int ast_mode_noises(ast_train_mode mode, int modality)
{
    if (mode == AST_MODE_JOINT) return 1;
    return modality == (mode == AST_MODE_EXPR_TO_POS ? AST_MOD_POS : AST_MOD_EXPR);
}

static const char *pos_param_names[] = {"x0", "v"};

const char *ast_pos_param_name(ast_pos_param p) { return pos_param_names[p]; }

int ast_pos_param_parse(const char *s, ast_pos_param *out)
{
    int i = ast_name_index(s, pos_param_names, 2);
    if (i >= 0) *out = (ast_pos_param)i;
    return i < 0 ? -1 : 0;
}

void ast_pos_param_coeffs(const ast_schedule *s, ast_pos_param p, int B, const int *t_int, float *a, float *b)
{
    for (int i = 0; i < B; i++) {
        a[i] = p == AST_POS_V ? s->alpha_bar[AST_MOD_POS][t_int[i]] : 0.0f;
        b[i] = p == AST_POS_V ? -s->sigma_bar[AST_MOD_POS][t_int[i]] : 1.0f;
    }
}

static void fill_modality(ast_schedule *s, int m, double nu)
{
    int T = s->steps;
    double *g = ast_xmalloc((size_t)(T + 2) * sizeof *g);
    double f0 = 0.0;
    for (int j = 0; j <= T + 1; j++) {
        double u = (double)j / (T + 1);
        double c = cos(M_PI / 2.0 * (pow(u, nu) + COSINE_S) / (1.0 + COSINE_S));
        if (j == 0) f0 = c * c;
        g[j] = c * c / f0;
    }
    float cum = 0.0f;
    for (int i = 0; i <= T; i++) {
        float beta = (float)(1.0 - g[i + 1] / g[i]);
        beta = beta < 0.0f ? 0.0f : beta > 0.9999f ? 0.9999f : beta;
        cum += logf(1.0f - beta);
        s->log_alpha_bar[m][i] = cum;
        s->alpha_bar[m][i] = expf(cum);
        s->sigma_bar[m][i] = sqrtf(-expm1f(2.0f * cum));
    }
    free(g);
}

int ast_schedule_init(ast_schedule *s, int steps, double nu_expr, double nu_pos, ast_error *e)
{
    memset(s, 0, sizeof *s);
    if (steps < 1) {
        ast_error_set(e, "diffusion.diffusion_steps must be at least 1 (got %d)", steps);
        return -1;
    }
    if (!(nu_expr > 0.0) || !(nu_pos > 0.0)) {
        ast_error_set(e, "diffusion.nu_expression and nu_position must be positive (got %g, %g)", nu_expr, nu_pos);
        return -1;
    }
    s->steps = steps;
    for (int m = 0; m < 2; m++) {
        s->log_alpha_bar[m] = ast_xmalloc((size_t)(steps + 1) * sizeof(float));
        s->alpha_bar[m] = ast_xmalloc((size_t)(steps + 1) * sizeof(float));
        s->sigma_bar[m] = ast_xmalloc((size_t)(steps + 1) * sizeof(float));
        fill_modality(s, m, m == AST_MOD_EXPR ? nu_expr : nu_pos);
    }
    return 0;
}

void ast_schedule_free(ast_schedule *s)
{
    for (int m = 0; m < 2; m++) {
        free(s->log_alpha_bar[m]);
        free(s->alpha_bar[m]);
        free(s->sigma_bar[m]);
    }
    memset(s, 0, sizeof *s);
}

void ast_center_sets(float *x, const float *mask, int B, int N, int D)
{
    for (int b = 0; b < B; b++) {
        double sum[8] = {0}, count = 0.0;
        for (int n = 0; n < N; n++) {
            float m = mask ? mask[b * N + n] : 1.0f;
            count += m;
            for (int d = 0; d < D; d++) sum[d] += m * x[((int64_t)b * N + n) * D + d];
        }
        if (count < 1.0) count = 1.0;
        for (int n = 0; n < N; n++) {
            float m = mask ? mask[b * N + n] : 1.0f;
            for (int d = 0; d < D; d++) {
                float *v = &x[((int64_t)b * N + n) * D + d];
                *v = (*v - (float)(sum[d] / count)) * m;
            }
        }
    }
}

void ast_masked_noise(ast_rng *rng, float *eps, const float *mask, int B, int N, int D, int center)
{
    for (int64_t i = 0; i < (int64_t)B * N; i++)
        for (int d = 0; d < D; d++) eps[i * D + d] = ast_rng_gauss(rng) * (mask ? mask[i] : 1.0f);
    if (center) ast_center_sets(eps, mask, B, N, D);
}

static void noise_modality(const ast_schedule *s, int m, ast_rng *rng, int B, int N, int D, const float *clean,
                           const float *mask, const int *t_int, float *z)
{
    int64_t per_set = (int64_t)N * D;
    ast_masked_noise(rng, z, mask, B, N, D, m == AST_MOD_POS);
    for (int b = 0; b < B; b++) {
        float a = s->alpha_bar[m][t_int[b]], sg = s->sigma_bar[m][t_int[b]];
        for (int64_t i = b * per_set; i < (b + 1) * per_set; i++) z[i] = a * clean[i] + sg * z[i];
    }
}

static void set_time(const ast_schedule *s, int B, int t_int_all, ast_noised *out)
{
    for (int b = 0; b < B; b++) {
        if (t_int_all >= 0) out->t_int[b] = t_int_all;
        out->t[b] = (float)out->t_int[b] / (float)s->steps;
    }
}

void ast_apply_noise(const ast_schedule *s, ast_train_mode mode, ast_rng *rng, int B, int N, int G,
                     const float *expr, const float *pos, const float *mask, ast_noised *out)
{
    set_time(s, B, -1, out);
    if (ast_mode_noises(mode, AST_MOD_EXPR))
        noise_modality(s, AST_MOD_EXPR, rng, B, N, G, expr, mask, out->t_int, out->expr);
    else /* a batch's expression: the most bytes of a draw */
        ast_copy_parallel(out->expr, expr, (size_t)B * N * G * sizeof(float));
    if (ast_mode_noises(mode, AST_MOD_POS))
        noise_modality(s, AST_MOD_POS, rng, B, N, 3, pos, mask, out->t_int, out->pos);
    else
        memcpy(out->pos, pos, (size_t)B * N * 3 * sizeof(float));
}

void ast_limit_sample(const ast_schedule *s, ast_train_mode mode, ast_rng *rng, int B, int N, int G,
                      const float *expr, const float *pos, const float *mask, ast_noised *out)
{
    set_time(s, B, s->steps, out);
    /* A given modality is copied in, unless the state already is the
     * caller's buffer (a sampler that never writes it). */
    if (ast_mode_noises(mode, AST_MOD_EXPR))
        ast_masked_noise(rng, out->expr, mask, B, N, G, 0);
    else if (out->expr != expr)
        memcpy(out->expr, expr, (size_t)B * N * G * sizeof(float));
    if (ast_mode_noises(mode, AST_MOD_POS))
        ast_masked_noise(rng, out->pos, mask, B, N, 3, 1);
    else if (out->pos != pos)
        memcpy(out->pos, pos, (size_t)B * N * 3 * sizeof(float));
}

void ast_reverse_coeffs_at(const ast_schedule *s, int m, int t_int, int s_int, ast_reverse_coeffs *out)
{
    float ls = s->log_alpha_bar[m][s_int], lt = s->log_alpha_bar[m][t_int];
    float a_ts = expf(lt - ls), a2_ts = expf(2.0f * lt - 2.0f * ls);
    float sig2_t = -expm1f(2.0f * lt), sig2_s = -expm1f(2.0f * ls);
    float r = expf(logf(sig2_s + 1e-8f) - logf(sig2_t + 1e-8f));
    float sb_t = s->sigma_bar[m][t_int], sb_s = s->sigma_bar[m][s_int];
    float var_ts = sb_t * sb_t - sb_s * sb_s * a2_ts;
    out->std = sqrtf(fmaxf(var_ts * r, 0.0f));
    out->cz = a_ts * r, out->cx = s->alpha_bar[m][s_int] * (1.0f - a2_ts * r);
}

/* Posterior q(z_s | z_t, x0 = pred) for one modality (docs/model.md §3.4). */
static void reverse_modality(const ast_schedule *s, int m, ast_rng *rng, int B, int N, int D, const float *pred,
                             const float *mask, int s_int, const int *t_int, float *z, int deterministic)
{
    int64_t per_set = (int64_t)N * D;
    float *eps = ast_xcalloc((size_t)B * per_set, sizeof(float));
    if (!deterministic) ast_masked_noise(rng, eps, mask, B, N, D, m == AST_MOD_POS);
    for (int b = 0; b < B; b++) {
        ast_reverse_coeffs c;
        ast_reverse_coeffs_at(s, m, t_int[b], s_int, &c);
        for (int64_t i = b * per_set; i < (b + 1) * per_set; i++) z[i] = c.cz * z[i] + c.cx * pred[i] + c.std * eps[i];
    }
    if (m == AST_MOD_POS) ast_center_sets(z, mask, B, N, D);
    free(eps);
}

void ast_reverse_step(const ast_schedule *s, ast_train_mode mode, ast_rng *rng, int B, int N, int G,
                      const float *pred_expr, const float *pred_pos, const float *mask, int s_int, ast_noised *z)
{
    int deterministic = rng == NULL;
    if (ast_mode_noises(mode, AST_MOD_EXPR))
        reverse_modality(s, AST_MOD_EXPR, rng, B, N, G, pred_expr, mask, s_int, z->t_int, z->expr, deterministic);
    if (ast_mode_noises(mode, AST_MOD_POS))
        reverse_modality(s, AST_MOD_POS, rng, B, N, 3, pred_pos, mask, s_int, z->t_int, z->pos, deterministic);
    set_time(s, B, s_int, z);
}

ast_tensor *ast_pos_x0_hat_with(ast_ctx *c, ast_pos_param p, ast_tensor *a, ast_tensor *b, ast_tensor *z_pos,
                                ast_tensor *out_pos)
{
    return p == AST_POS_X0 ? out_pos : ast_add(c, ast_mul(c, z_pos, a), ast_mul(c, out_pos, b));
}

ast_tensor *ast_pos_x0_hat_from(ast_ctx *c, ast_pos_param p, const float *a, const float *b, ast_tensor *z_pos,
                                ast_tensor *out_pos)
{
    if (p == AST_POS_X0) return out_pos;
    int64_t shape[3] = {out_pos->shape[0], 1, 1};
    return ast_pos_x0_hat_with(c, p, ast_tensor_from(c, 3, shape, a), ast_tensor_from(c, 3, shape, b), z_pos, out_pos);
}

ast_tensor *ast_pos_x0_hat(ast_ctx *c, const ast_schedule *s, ast_pos_param p, const int *t_int, ast_tensor *z_pos,
                           ast_tensor *out_pos)
{
    if (p == AST_POS_X0) return out_pos;
    int64_t n = out_pos->shape[0];
    float *a = ast_alloc(c, (size_t)n * sizeof *a), *b = ast_alloc(c, (size_t)n * sizeof *b);
    ast_pos_param_coeffs(s, p, (int)n, t_int, a, b); /* on the host, then uploaded */
    return ast_pos_x0_hat_from(c, p, a, b, z_pos, out_pos);
}
