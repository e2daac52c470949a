/* The reverse process of docs/model.md §6 on the noise model of core/diffusion.c:
 * start from the limit distribution at T, then alternately predict x0 with
 * the network and step the state down the reference's time grid. */
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "train/train_dist.h"
#include "eval/sample.h"
#include "eval/sample_device.h"

static const char *return_names[] = {"x0", "z0"};

const char *ast_sample_return_name(ast_sample_return r) { return return_names[r]; }

int ast_sample_return_parse(const char *s, ast_sample_return *out)
{
    int i = ast_name_index(s, return_names, 2);
    if (i >= 0) *out = (ast_sample_return)i;
    return i < 0 ? -1 : 0;
}

int ast_sample_grid(int T, int num_steps, int *s_out)
{
    int delta = num_steps > 0 && T / num_steps > 1 ? T / num_steps : 1;
    int n = 0;
    for (int s = (T - 1) / delta * delta; s >= 0; s -= delta) {
        if (s_out) s_out[n] = s;
        n++;
    }
    return n;
}

ast_sample_prior ast_sample_prior_new(ast_model *m, const ast_sampler_config *sc, int B, int N)
{
    int prior, geo;
    ast_model_prior_wants(m, &prior, &geo);
    if (ast_mode_noises(sc->mode, AST_MOD_EXPR)) return (ast_sample_prior){NULL, NULL};
    size_t cells = (size_t)B * N;
    return (ast_sample_prior){prior ? ast_xmalloc(cells * 3 * sizeof(float)) : NULL,
                              geo ? ast_xmalloc(cells * N * sizeof(float)) : NULL};
}

void ast_sample_prior_fill(ast_model *m, const ast_sample_prior *sp, int lo, int hi, int N, const float *expr,
                           const float *mask)
{
    if ((!sp->prior && !sp->geo) || hi <= lo) return;
    int64_t cells = (int64_t)lo * N, G = ast_model_cfg(m)->num_genes;
    ast_model_prior_host(m, hi - lo, N, expr + cells * G, mask ? mask + cells : NULL,
                         sp->prior ? sp->prior + cells * 3 : NULL, sp->geo ? sp->geo + cells * N : NULL);
}

void ast_sample_prior_free(ast_sample_prior *sp)
{
    free(sp->prior), free(sp->geo);
    *sp = (ast_sample_prior){NULL, NULL};
}

/* Cells per forward pass: the sets are independent, and the arena of one
 * pass over all of them ([B, N, G] several times over) would be the
 * largest allocation of an evaluation. */
#define PASS_CELLS 1024

/* The eval forward pass on sets b0 .. b0 + B of the state (of N cells,
 * G genes); copies the x0 predictions out of the arena (to the host),
 * which the next pass reuses, those of positions turned onto the state
 * first with sc->align (kabsch_align: each set on its own, so a pass's
 * share is the whole batch's). */
static void predict_sets(ast_model *m, ast_ctx *c, const ast_schedule *s, const ast_sampler_config *sc, int b0, int B,
                         int N, int G, const ast_noised *z, const float *mask, const ast_sample_prior *sp,
                         float *pred_expr, float *pred_pos)
{
    int64_t sx[3] = {B, N, G}, s3[3] = {B, N, 3}, st[2] = {B, 1}, sm[2] = {B, N}, cells = (int64_t)b0 * N;
    ast_ctx_reset(c);
    ast_tensor *x = ast_tensor_from(c, 3, sx, z->expr + cells * G), *p = ast_tensor_from(c, 3, s3, z->pos + cells * 3);
    ast_tensor *t = ast_tensor_from(c, 2, st, z->t + b0), *mk = mask ? ast_tensor_from(c, 2, sm, mask + cells) : NULL;
    ast_model_prior_in given = {NULL, NULL};
    if (sp->prior) given.prior = ast_tensor_from(c, 3, s3, sp->prior + cells * 3);
    if (sp->geo) given.geodesic = ast_tensor_from(c, 3, (int64_t[]){B, N, N}, sp->geo + cells * N);
    ast_model_out out = ast_model_forward_given(m, c, x, t, p, mk, sp->prior || sp->geo ? &given : NULL, NULL, NULL);
    ast_tensor *pos = ast_pos_x0_hat(c, s, sc->pos_param, z->t_int + b0, p, out.positions);
    if (sc->align && ast_mode_noises(sc->mode, AST_MOD_POS)) pos = ast_kabsch_align(c, pos, p, mk);
    /* On a device, where each pass synchronises: the reverse step runs on the host. */
    if (pred_expr) ast_tensor_read(c, out.expression, 0, (int64_t)B * N * G, pred_expr + cells * G);
    ast_tensor_read(c, pos, 0, (int64_t)B * N * 3, pred_pos + cells * 3);
}

/* After each rank of a run over MPI made its share of the passes: every
 * rank's predictions to every rank (pred [B, N, width]). */
static void gather_predictions(int B, int N, int per_pass, int width, float *pred)
{
    int size = ast_dist_size();
    int64_t *at = ast_xmalloc(((size_t)size + 1) * sizeof *at), first, last;
    for (int r = 0; r < size; r++) {
        ast_dist_part((B + per_pass - 1) / per_pass, r, size, &first, &last);
        at[r] = (first * per_pass < B ? first * per_pass : B) * N * width;
    }
    at[size] = (int64_t)B * N * width;
    ast_dist_allgather_f32(pred, at);
    free(at);
}

/* Sets per pass of N cells. */
static int pass_sets(int N) { return N < PASS_CELLS ? PASS_CELLS / N : 1; }

/* This process's sets [lo, hi): each rank of a training run over MPI
 * (train_dist.h) makes its share of the passes, the passes one process
 * would make, so the predictions are the same. */
static void rank_sets(int B, int N, int *lo, int *hi)
{
    int per_pass = pass_sets(N);
    int64_t first, last;
    ast_dist_part((B + per_pass - 1) / per_pass, ast_dist_rank(), ast_dist_size(), &first, &last);
    *lo = first * per_pass < B ? (int)first * per_pass : B;
    *hi = last * per_pass < B ? (int)last * per_pass : B;
}

static void predict_x0(ast_model *m, ast_ctx *c, const ast_schedule *s, const ast_sampler_config *sc, int B, int N, int G,
                       const ast_noised *z, const float *mask, const ast_sample_prior *sp, float *pred_expr,
                       float *pred_pos)
{
    int per_pass = pass_sets(N), lo, hi;
    rank_sets(B, N, &lo, &hi);
    for (int b0 = lo; b0 < hi; b0 += per_pass)
        predict_sets(m, c, s, sc, b0, B - b0 < per_pass ? B - b0 : per_pass, N, G, z, mask, sp, pred_expr, pred_pos);
    if (ast_dist_size() > 1) {
        if (pred_expr) gather_predictions(B, N, per_pass, G, pred_expr);
        gather_predictions(B, N, per_pass, 3, pred_pos);
    }
}

/* The host's loop: each pass's predictions copied to the host, the
 * reverse step there (the CPU, and a device run that spreads its passes
 * over MPI ranks). */
static void sample_on_host(ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, ast_rng *rng, int B, int N,
                           const float *mask, const ast_sample_prior *sp, ast_noised *z, float *out_expr, float *out_pos)
{
    int G = ast_model_cfg(m)->num_genes, gen_expr = ast_mode_noises(sc->mode, AST_MOD_EXPR);
    size_t n_expr = (size_t)B * N * G, n_pos = (size_t)B * N * 3;
    /* A given expression is never stepped: its prediction is not kept. */
    float *pred_expr = gen_expr ? ast_xcalloc(n_expr, sizeof(float)) : NULL, *pred_pos = ast_xcalloc(n_pos, sizeof(float));
    int *grid = ast_xmalloc((size_t)s->steps * sizeof(int));
    ast_ctx *c = ast_ctx_new_on(ast_model_backend(m), sc->seed); /* eval mode draws nothing from it */
    ast_ctx_set_training(c, 0);
    ast_ctx_set_grad(c, 0);
    ast_ctx_set_precision(c, sc->precision);
    ast_ctx_set_stats(c, 0); /* nobody reads them here; on a device each is a wait */
    int n_steps = ast_sample_grid(s->steps, sc->num_steps, grid);
    for (int i = 0; i < n_steps; i++) {
        predict_x0(m, c, s, sc, B, N, G, z, mask, sp, pred_expr, pred_pos);
        ast_reverse_step(s, sc->mode, rng, B, N, G, pred_expr, pred_pos, mask, grid[i], z);
    }
    if (sc->ret == AST_RETURN_X0) {
        if (gen_expr) memcpy(out_expr, pred_expr, n_expr * sizeof(float));
        if (ast_mode_noises(sc->mode, AST_MOD_POS)) memcpy(out_pos, pred_pos, n_pos * sizeof(float));
    }
    ast_ctx_free(c);
    free(pred_expr), free(pred_pos), free(grid);
}

/* Why a device's sampler steps on the host, or NULL when it need not. */
static const char *host_step_reason(const ast_model *m)
{
    if (ast_model_backend(m)->memory == AST_MEM_HOST) return "";
    return ast_dist_size() > 1 ? "the passes are spread over MPI ranks" : NULL;
}

int ast_sample(ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, int B, int N, const float *expr,
               const float *pos, const float *mask, float *out_expr, float *out_pos)
{
    float *t = ast_xcalloc((size_t)B, sizeof(float));
    int *t_int = ast_xcalloc((size_t)B, sizeof(int)), replayed = 0;
    /* The state lives in the output buffers; without out_expr its expression is the given one, only ever read. */
    ast_noised z = {out_expr ? out_expr : (float *)expr, out_pos, t, t_int};
    ast_rng rng;
    ast_rng_seed(&rng, sc->seed);
    ast_limit_sample(s, sc->mode, &rng, B, N, ast_model_cfg(m)->num_genes, expr, pos, mask, &z);
    const char *why = host_step_reason(m);
    static int said;
    if (why && why[0] && !said++)
        ast_log(AST_LOG_INFO, "the reverse diffusion copies each prediction to the host and steps there: %s", why);
    /* The sets this process evaluates: the prior of their given expression once. */
    int lo = 0, hi = B;
    if (why) rank_sets(B, N, &lo, &hi);
    ast_sample_prior sp = ast_sample_prior_new(m, sc, B, N);
    ast_sample_prior_fill(m, &sp, lo, hi, N, z.expr, mask);
    if (why) sample_on_host(m, s, sc, &rng, B, N, mask, &sp, &z, out_expr, out_pos);
    else replayed = ast_sample_on_device(m, s, sc, &rng, B, N, mask, &sp, &z, out_expr, out_pos);
    ast_sample_prior_free(&sp);
    free(t), free(t_int);
    return replayed;
}
