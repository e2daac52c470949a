/* Geometry and losses: pairwise distances within each point set and the
 * row-masked mean squared error. */
#include <math.h>

#include "alphast/core.h"

/* ---- pdist ----------------------------------------------------------------- */

/* From the differences, not |a|^2 + |b|^2 - 2ab: that form cancels badly
 * for close points and has no usable gradient at distance 0. */
static float distance(const float *a, const float *b, int64_t d)
{
    float s = 0.0f;
    for (int64_t k = 0; k < d; k++) s += (a[k] - b[k]) * (a[k] - b[k]);
    return sqrtf(s);
}

/* dD_ij/dp_i = (p_i - p_j) / D_ij = -dD_ij/dp_j, taken as 0 at D_ij = 0.
 * D is symmetric, so each pair collects dy_ij + dy_ji once. */
static void pdist_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *p = n->in[0];
    float *gp = ast_grad(c, p);
    int64_t nb = p->shape[0], np = p->shape[1], d = p->shape[2];
    for (int64_t b = 0; b < nb; b++) {
        const float *pb = p->data + b * np * d, *yb = n->out->data + b * np * np, *dy = n->out->grad + b * np * np;
        float *gb = gp + b * np * d;
        for (int64_t i = 0; i < np; i++)
            for (int64_t j = i + 1; j < np; j++) {
                float dist = yb[i * np + j], g = dy[i * np + j] + dy[j * np + i];
                if (dist == 0.0f) continue;
                for (int64_t k = 0; k < d; k++) {
                    float u = (pb[i * d + k] - pb[j * d + k]) / dist; /* |u| <= 1: no overflow */
                    gb[i * d + k] += g * u;
                    gb[j * d + k] -= g * u;
                }
            }
    }
}

ast_tensor *ast_pdist(ast_ctx *c, ast_tensor *p)
{
    char s[64];
    AST_ASSERT(p->ndim == 3, "pdist takes point sets [B, N, D], got %s", ast_shape_str(p, s, sizeof s));
    int64_t nb = p->shape[0], np = p->shape[1], d = p->shape[2];
    ast_tensor *y = ast_zeros(c, 3, (int64_t[]){nb, np, np});
    for (int64_t b = 0; b < nb; b++) {
        const float *pb = p->data + b * np * d;
        float *yb = y->data + b * np * np;
        for (int64_t i = 0; i < np; i++)
            for (int64_t j = i + 1; j < np; j++)
                yb[i * np + j] = yb[j * np + i] = distance(pb + i * d, pb + j * d, d);
    }
    ast_record(c, &(ast_node){.op = "pdist", .backward = pdist_backward, .out = y, .in = {p}, .n_in = 1});
    return y;
}

/* ---- mse ------------------------------------------------------------------- */

static double row_sq_err(const float *a, const float *b, int64_t d)
{
    double s = 0.0;
    for (int64_t k = 0; k < d; k++) s += (double)(a[k] - b[k]) * (a[k] - b[k]);
    return s;
}

/* L = num / max(1, cnt), num = sum_r m_r S_r, cnt = sum_r m_r * cols:
 * dL/da = 2 m_r (a - b) / den = -dL/db, and, where cnt > 1 so the
 * denominator moves with the mask, dL/dm_r = (S_r - L * cols) / den.
 * farg[0] = cnt. */
static void mse_backward(ast_ctx *c, const ast_node *n)
{
    ast_tensor *a = n->in[0], *b = n->in[1], *m = n->in[2];
    float *ga = ast_grad(c, a), *gb = ast_grad(c, b), *gm = ast_grad(c, m);
    int64_t d = ast_cols(a);
    float cnt = n->farg[0], den = fmaxf(1.0f, cnt), g = n->out->grad[0] / den;
    for (int64_t r = 0; r < ast_rows(a); r++) {
        const float *ar = a->data + r * d, *br = b->data + r * d;
        float mr = m ? m->data[r] : 1.0f;
        for (int64_t k = 0; k < d; k++) {
            float e = 2.0f * g * mr * (ar[k] - br[k]);
            if (ga) ga[r * d + k] += e;
            if (gb) gb[r * d + k] -= e;
        }
        if (gm) gm[r] += g * (float)(row_sq_err(ar, br, d) - (cnt > 1.0f ? n->out->data[0] * (double)d : 0.0));
    }
}

ast_tensor *ast_mse(ast_ctx *c, ast_tensor *a, ast_tensor *b, ast_tensor *mask)
{
    char s1[64], s2[64];
    AST_ASSERT(ast_same_shape(a, b), "mse: %s against %s", ast_shape_str(a, s1, sizeof s1),
               ast_shape_str(b, s2, sizeof s2));
    int64_t rows = ast_rows(a), d = ast_cols(a);
    AST_ASSERT(!mask || mask->size == rows, "mse: mask %s for %lld rows",
               mask ? ast_shape_str(mask, s1, sizeof s1) : "", (long long)rows);
    double num = 0.0, cnt = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double mr = mask ? mask->data[r] : 1.0;
        num += mr * row_sq_err(a->data + r * d, b->data + r * d, d);
        cnt += mr * (double)d;
    }
    ast_tensor *y = ast_zeros(c, 1, (int64_t[]){1});
    y->data[0] = (float)(num / fmax(1.0, cnt));
    ast_record(c, &(ast_node){.op = "mse", .backward = mse_backward, .out = y, .in = {a, b, mask}, .n_in = 3,
                              .farg = {(float)cnt}});
    return y;
}
