/* The masking module of a training run: the learnable mask tokens, the
 * per-batch decision and masks, the token replacement on the tape, the
 * reconstruction loss and the step's masking metrics.
 *
 * On a device (ast_masking_pin) every batch takes the same ops, so that a
 * captured step (CUDA graph) replays any batch: the masks and the loss's
 * weights are drawn on the host into pinned memory, which the step's
 * copies read when they run, and an unmasked batch has all-zero masks and
 * weights, which leave the inputs and the loss as they are, bit for bit
 * (x * 1 + 0 * token = x; sum(0 * d^2) = 0). The CPU takes the masking
 * ops only for masked batches, as before. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "model/masking.h"

#define TOKEN_SCOPE "masking_module.mask_token"
#define TOKEN_INIT_STD 0.02f /* docs/model.md §1: mask tokens ~ N(0, 0.02^2) */

struct ast_masking {
    ast_masking_config cfg;
    int B, N, G;
    int can_expr, can_pos; /* the switches and the training mode allow masking it */
    ast_tensor *expr_token, *pos_token;
    float *m_expr, *m_pos; /* this batch's masks, 1 = masked */
    int has_expr, has_pos;
    const ast_backend *pin; /* whose pinned memory holds the masks and weights (a device), or NULL */
    float *w_expr, *w_pos;  /* pinned: the loss's weights m / count of this batch */
    float scheduled; /* a sweep's mask_ratio schedule: share of the target ratios; NAN = none */
    /* since the last metrics line */
    double sum_expr, sum_pos;
    int draws, applied;
    /* The last loss's R values where the host reads them once the backend
     * has synchronised (a replayed step writes them there too), and
     * whether a step has written them since ast_masking_collect. */
    const float *r_at[2];
    int pending;
};

static ast_tensor *token(ast_params *p, const char *name, int64_t width)
{
    char full[128];
    snprintf(full, sizeof full, TOKEN_SCOPE ".%s", name);
    ast_tensor *t = ast_params_find(p, full);
    if (!t) t = ast_param(ast_scope_new(p, TOKEN_SCOPE), name, 3, (int64_t[]){1, 1, width}, AST_INIT_NORMAL, TOKEN_INIT_STD);
    AST_ASSERT(t->size == width, "%s holds %lld values, not %lld", full, (long long)t->size, (long long)width);
    return t;
}

ast_masking *ast_masking_new(const ast_masking_config *mc, ast_train_mode mode, ast_params *p, int B, int N, int G)
{
    ast_masking *mk = ast_xcalloc(1, sizeof *mk);
    mk->cfg = *mc;
    mk->B = B, mk->N = N, mk->G = G;
    mk->can_expr = ast_masking_covers(mc, mode, AST_MOD_EXPR);
    mk->can_pos = ast_masking_covers(mc, mode, AST_MOD_POS);
    mk->expr_token = token(p, "expression_mask_token", G);
    mk->pos_token = token(p, "position_mask_token", 3);
    mk->m_expr = ast_xcalloc((size_t)B * N * G, sizeof *mk->m_expr);
    mk->m_pos = ast_xcalloc((size_t)B * N * 3, sizeof *mk->m_pos);
    mk->scheduled = NAN;
    return mk;
}

static void release_masks(ast_masking *mk)
{
    float *parts[] = {mk->m_expr, mk->m_pos, mk->w_expr, mk->w_pos};
    for (int i = 0; i < 4; i++)
        if (!mk->pin) free(parts[i]);
        else if (parts[i]) mk->pin->host_free(mk->pin, parts[i]);
}

void ast_masking_free(ast_masking *mk)
{
    if (!mk) return;
    release_masks(mk);
    free(mk);
}

static float *pinned_zeros(const ast_backend *b, size_t n)
{
    float *p = b->host_alloc(b, n * sizeof *p);
    AST_ASSERT(p, "out of pinned host memory for the masks (%zu floats)", n);
    return memset(p, 0, n * sizeof *p);
}

void ast_masking_pin(ast_masking *mk, const ast_backend *b)
{
    if (!mk || !b) return;
    release_masks(mk);
    size_t cells = (size_t)mk->B * mk->N;
    mk->pin = b;
    mk->m_expr = pinned_zeros(b, cells * mk->G), mk->w_expr = pinned_zeros(b, cells * mk->G);
    mk->m_pos = pinned_zeros(b, cells * 3), mk->w_pos = pinned_zeros(b, cells * 3);
}

void ast_masking_schedule(ast_masking *mk, float share)
{
    if (mk) mk->scheduled = share;
}

/* w = m / count over the masked entries of m [n]; 0 (w untouched) when
 * fewer than one is masked. */
static int mse_weights(const float *m, int64_t n, float *w)
{
    double count = 0.0;
    for (int64_t i = 0; i < n; i++) count += m[i];
    if (count < 1.0) return 0;
    for (int64_t i = 0; i < n; i++) w[i] = (float)(m[i] / count);
    return 1;
}

/* A pinned module's batch: the weights of its masks, zeros where a
 * modality is not masked (its mask too); the module, masked or not. */
static ast_masking *pinned_batch(ast_masking *mk)
{
    size_t cells = (size_t)mk->B * mk->N;
    if (!mk->has_expr) memset(mk->m_expr, 0, cells * mk->G * sizeof *mk->m_expr);
    if (!mk->has_pos) memset(mk->m_pos, 0, cells * 3 * sizeof *mk->m_pos);
    if (!mk->has_expr || !mse_weights(mk->m_expr, (int64_t)cells * mk->G, mk->w_expr))
        memset(mk->w_expr, 0, cells * mk->G * sizeof *mk->w_expr);
    if (!mk->has_pos || !mse_weights(mk->m_pos, (int64_t)cells * 3, mk->w_pos))
        memset(mk->w_pos, 0, cells * 3 * sizeof *mk->w_pos);
    mk->pending = mk->r_at[0] != NULL; /* a replay writes R where the captured step did */
    return mk;
}

/* The decision and the masks; 1 when the batch is masked. */
static int draw_masks(ast_masking *mk, ast_rng *rng, int64_t step, const float *z_expr, const float *node_mask)
{
    const ast_masking_config *mc = &mk->cfg;
    mk->has_expr = mk->has_pos = 0;
    if (!(ast_rng_uniform01(rng) < mc->masking_probability)) return 0;
    float rho_expr = isnan(mk->scheduled) ? ast_masking_ratio(mc, mc->expression_mask_ratio, step)
                                          : mc->expression_mask_ratio * mk->scheduled;
    float rho_pos = isnan(mk->scheduled) ? ast_masking_ratio(mc, mc->position_mask_ratio, step)
                                         : mc->position_mask_ratio * mk->scheduled;
    int m_cnt = mk->can_expr ? ast_mask_gene_count(mk->G, rho_expr) : 0;
    rho_pos = mk->can_pos ? rho_pos : 0.0f;
    if ((mk->has_expr = m_cnt > 0))
        ast_mask_expression(mc->strategy, rng, mk->B, mk->N, mk->G, m_cnt, z_expr, node_mask, mk->m_expr);
    if ((mk->has_pos = rho_pos > 0.0f)) ast_mask_positions(rng, mk->B, mk->N, rho_pos, node_mask, mk->m_pos);
    return mk->has_expr || mk->has_pos; /* ratios still 0 early in a progressive schedule */
}

ast_masking *ast_masking_draw(ast_masking *mk, ast_rng *rng, int64_t step, const float *z_expr,
                              const float *node_mask)
{
    if (!mk) return NULL;
    mk->draws++;
    int masked = draw_masks(mk, rng, step, z_expr, node_mask);
    mk->applied += masked;
    if (mk->pin) return pinned_batch(mk);
    return masked ? mk : NULL;
}

static ast_tensor *mask_tensor(ast_ctx *c, const ast_tensor *like, const float *m)
{
    return ast_tensor_from(c, like->ndim, like->shape, m);
}

static ast_tensor *replace(ast_ctx *c, ast_tensor *x, const float *m, ast_tensor *token)
{
    ast_tensor *masked = mask_tensor(c, x, m), *kept = ast_affine(c, masked, -1.0f, 1.0f);
    return ast_add(c, ast_mul(c, x, kept), ast_mul(c, masked, token));
}

static void check_shape(const ast_masking *mk, const ast_tensor *x, int64_t width)
{
    char s[64];
    AST_ASSERT(x->ndim == 3 && x->shape[0] == mk->B && x->shape[1] == mk->N && x->shape[2] == width,
               "masking: input %s for batches [%d, %d, %lld]", ast_shape_str(x, s, sizeof s), mk->B, mk->N,
               (long long)width);
}

/* Whether the step takes a modality's masking ops: a pinned module's
 * every step that can mask it, else the batches that mask it. */
static int takes(const ast_masking *mk, int has, int can) { return mk->pin ? can : has; }

void ast_masking_inputs(ast_masking *mk, ast_ctx *c, ast_tensor **expr, ast_tensor **pos)
{
    check_shape(mk, *expr, mk->G);
    check_shape(mk, *pos, 3);
    if (takes(mk, mk->has_expr, mk->can_expr)) *expr = replace(c, *expr, mk->m_expr, mk->expr_token);
    if (takes(mk, mk->has_pos, mk->can_pos)) *pos = replace(c, *pos, mk->m_pos, mk->pos_token);
}

/* Mean of (pred - target)^2 over the masked entries, as sum(w (pred -
 * target)^2) with w = m / count: a pinned module's weights w, else worked
 * out here from the mask m; 0 when nothing is masked. */
static ast_tensor *masked_mse(ast_ctx *c, ast_tensor *pred, ast_tensor *target, const float *m, const float *w)
{
    if (!w && m) {
        float *wh = ast_alloc_uninit(c, (size_t)pred->size * sizeof *wh); /* on the host, then uploaded once */
        w = mse_weights(m, pred->size, wh) ? wh : NULL;
    }
    if (!w) return ast_zeros(c, 1, (int64_t[]){1});
    ast_tensor *wt = mask_tensor(c, pred, w), *d = ast_sub(c, pred, target);
    return ast_sum(c, ast_mul(c, ast_mul(c, d, d), wt));
}

ast_tensor *ast_masking_loss(ast_masking *mk, ast_ctx *c, const ast_model_out *pred, ast_tensor *clean_expr,
                             ast_tensor *clean_pos, ast_tensor *input_expr, ast_tensor *input_pos)
{
    int clean = mk->cfg.target == AST_RECON_CLEAN;
    const float *w_expr = mk->pin && mk->can_expr ? mk->w_expr : NULL, *w_pos = mk->pin && mk->can_pos ? mk->w_pos : NULL;
    ast_tensor *r_expr = masked_mse(c, pred->expression, clean ? clean_expr : input_expr,
                                    !mk->pin && mk->has_expr ? mk->m_expr : NULL, w_expr);
    ast_tensor *r_pos = masked_mse(c, pred->positions, clean ? clean_pos : input_pos,
                                   !mk->pin && mk->has_pos ? mk->m_pos : NULL, w_pos);
    mk->r_at[0] = ast_ctx_read_later(c, r_expr->data, sizeof(float));
    mk->r_at[1] = ast_ctx_read_later(c, r_pos->data, sizeof(float));
    mk->pending = 1;
    return ast_affine(c, ast_add(c, r_expr, r_pos), mk->cfg.reconstruction_weight, 0.0f);
}

void ast_masking_collect(ast_masking *mk)
{
    if (!mk || !mk->pending) return;
    mk->sum_expr += mk->r_at[0][0];
    mk->sum_pos += mk->r_at[1][0];
    mk->pending = 0;
}

int ast_masking_take_metrics(ast_masking *mk, ast_masking_metrics *out)
{
    if (!mk) return 0;
    ast_masking_collect(mk);
    double n = mk->draws > 0 ? mk->draws : 1;
    *out = (ast_masking_metrics){mk->sum_expr / n, mk->sum_pos / n, mk->applied / n};
    mk->sum_expr = mk->sum_pos = 0.0;
    mk->draws = mk->applied = 0;
    return 1;
}
