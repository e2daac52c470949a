/* The reverse diffusion with its state on a device (sample_device.h). */
#include <stdlib.h>
#include <string.h>

#include "engine/backend.h"
#include "engine/graph.h"
#include "eval/sample_device.h"

/* Cells per forward pass on a device: the reference's 32 sets of 512
 * cells in one pass (an eval forward's arena is then a few GB of a GPU's
 * memory); more sets go in passes of this many cells, one after another
 * within the step. */
#define DEVICE_PASS_CELLS 16384

/* One modality of the state: in device memory, z (the model's input) and
 * the last x0 prediction (kept for ret x0); where its step's coefficients
 * (cz, cx, std [B] each) and noise [B, N, D] are in a staged block. */
typedef struct modality {
    int generated, D;
    float *state, *pred;
    int64_t coef, eps;
} modality;

typedef struct dev_sampler {
    ast_model *m;
    const ast_schedule *s;
    const ast_sampler_config *sc;
    const ast_backend *b;
    ast_ctx *c;
    int B, N, per_pass;
    modality mod[2];
    const float *host_mask;
    float *mask, *count; /* device: [B, N] (NULL: every cell valid), each set's valid cells (at least 1) [B] */
    /* What a step reads besides the state, staged: t_int / T [B] and the
     * coefficients a, b of x0_hat [B] each first, then the modalities'. Two pinned
     * blocks, the host filling one while the device runs the step copied
     * from the other, and the device's copy. */
    float *host[2], *staged;
    int64_t n_staged;
    int align; /* x0 predictions of positions turned onto the state (sc->align, positions generated) */
    float *prior, *geo; /* device copies of the sets' constants (ast_sample_prior), or NULL */
} dev_sampler;

static float *device_copy(const ast_backend *b, const float *host, int64_t n)
{
    float *d = b->buffer_alloc(b, (size_t)n * sizeof *d);
    AST_ASSERT(d, "out of %s memory for the sampler's state (%lld floats)", b->name, (long long)n);
    if (host) b->to_backend(b, d, host, (size_t)n * sizeof *d);
    return d;
}

/* An arena header over device memory the sampler owns (no gradient). */
static ast_tensor *on_device(dev_sampler *ds, float *data, int ndim, const int64_t *shape)
{
    ast_tensor *t = ast_alloc(ds->c, sizeof *t);
    t->data = data, t->ndim = ndim, t->memory = ds->b->memory;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->size = ast_shape_size(ndim, shape);
    return t;
}

/* Each set's count of valid cells as ast_center_sets divides by it. */
static float *set_counts(const ast_backend *b, int B, int N, const float *mask)
{
    float *count = ast_xmalloc((size_t)B * sizeof *count);
    for (int i = 0; i < B; i++) {
        double n = 0.0;
        for (int j = 0; j < N; j++) n += mask ? mask[(int64_t)i * N + j] : 1.0;
        count[i] = n < 1.0 ? 1.0f : (float)n;
    }
    float *d = device_copy(b, count, B);
    b->synchronize(b); /* the pageable source is freed next */
    free(count);
    return d;
}

/* The sets' prior and geodesics, computed once on the host, uploaded once. */
static void upload_prior(dev_sampler *ds, const ast_sample_prior *sp)
{
    int64_t cells = (int64_t)ds->B * ds->N;
    ds->prior = sp->prior ? device_copy(ds->b, sp->prior, cells * 3) : NULL;
    ds->geo = sp->geo ? device_copy(ds->b, sp->geo, cells * ds->N) : NULL;
}

static void dev_open(dev_sampler *ds, ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, int B, int N,
                     const float *mask, const ast_sample_prior *sp, const ast_noised *z)
{
    *ds = (dev_sampler){.m = m, .s = s, .sc = sc, .b = ast_model_backend(m), .B = B, .N = N, .host_mask = mask};
    ds->c = ast_ctx_new_on(ds->b, sc->seed);
    ast_ctx_set_training(ds->c, 0);
    ast_ctx_set_grad(ds->c, 0);
    ast_ctx_set_precision(ds->c, sc->precision);
    ast_ctx_set_stats(ds->c, 0); /* nobody reads them here; on a device each is a wait */
    ds->per_pass = N < DEVICE_PASS_CELLS ? DEVICE_PASS_CELLS / N : 1;
    int64_t cells = (int64_t)B * N, staged = 3 * (int64_t)B;
    const float *start[2] = {z->expr, z->pos};
    for (int k = 0; k < 2; k++) {
        modality *md = &ds->mod[k];
        md->generated = ast_mode_noises(sc->mode, k), md->D = k == AST_MOD_POS ? 3 : ast_model_cfg(m)->num_genes;
        md->state = device_copy(ds->b, start[k], cells * md->D);
        if (md->generated && sc->ret == AST_RETURN_X0) md->pred = device_copy(ds->b, NULL, cells * md->D);
        if (md->generated) md->coef = staged, md->eps = staged + 3 * B, staged += 3 * (int64_t)B + cells * md->D;
    }
    ds->mask = mask ? device_copy(ds->b, mask, cells) : NULL;
    upload_prior(ds, sp);
    ds->count = set_counts(ds->b, B, N, mask); /* its wait covers the copies before it */
    ds->align = sc->align && ds->mod[AST_MOD_POS].generated;
    ds->n_staged = staged;
    ds->staged = device_copy(ds->b, NULL, staged);
    for (int k = 0; k < 2; k++) {
        ds->host[k] = ds->b->host_alloc(ds->b, (size_t)staged * sizeof(float));
        AST_ASSERT(ds->host[k], "out of pinned host memory for the sampler (%lld floats)", (long long)staged);
    }
}

static void dev_close(dev_sampler *ds)
{
    const ast_backend *b = ds->b;
    b->synchronize(b);
    for (int k = 0; k < 2; k++) {
        b->buffer_free(b, ds->mod[k].state);
        if (ds->mod[k].pred) b->buffer_free(b, ds->mod[k].pred);
    }
    float *owned[] = {ds->mask, ds->prior, ds->geo};
    for (int k = 0; k < 3; k++)
        if (owned[k]) b->buffer_free(b, owned[k]);
    b->buffer_free(b, ds->count);
    b->buffer_free(b, ds->staged);
    b->host_free(b, ds->host[0]), b->host_free(b, ds->host[1]);
    ast_ctx_free(ds->c);
}

/* The step from the state's times down to s_int, staged in pinned block
 * `to`: the times, the coefficients and the posterior noise, drawn from
 * rng as ast_reverse_step draws it (expression first). */
static void stage_step(dev_sampler *ds, float *to, ast_rng *rng, const ast_noised *z, int s_int)
{
    int B = ds->B;
    memcpy(to, z->t, (size_t)B * sizeof *to);
    ast_pos_param_coeffs(ds->s, ds->sc->pos_param, B, z->t_int, to + B, to + 2 * B);
    for (int k = 0; k < 2; k++) {
        modality *md = &ds->mod[k];
        if (!md->generated) continue;
        float *coef = to + md->coef;
        for (int i = 0; i < B; i++) {
            ast_reverse_coeffs rc;
            ast_reverse_coeffs_at(ds->s, k, z->t_int[i], s_int, &rc);
            coef[i] = rc.cz, coef[B + i] = rc.cx, coef[2 * B + i] = rc.std;
        }
        ast_masked_noise(rng, to + md->eps, ds->host_mask, B, ds->N, md->D, k == AST_MOD_POS);
    }
}

/* [nb, 1, 1] of the staged block from offset `at` + b0 (the device's copy). */
static ast_tensor *per_set(dev_sampler *ds, int64_t at, int b0, int nb)
{
    return on_device(ds, ds->staged + at + b0, 3, (int64_t[]){nb, 1, 1});
}

/* dst (device, src's size) = src, queued. */
static void store(const dev_sampler *ds, float *dst, const ast_tensor *src)
{
    ds->b->zero(ds->b, dst, (size_t)src->size * sizeof *dst);
    ds->b->accumulate(ds->b, dst, src->data, src->size);
}

/* x [nb, N, 3] less each set's mean over its valid cells, padded cells 0:
 * ast_center_sets as ops. */
static ast_tensor *centred(dev_sampler *ds, int b0, int nb, ast_tensor *x)
{
    ast_ctx *c = ds->c;
    ast_tensor *mk = ds->mask ? on_device(ds, ds->mask + (int64_t)b0 * ds->N, 3, (int64_t[]){nb, ds->N, 1}) : NULL;
    ast_tensor *count = on_device(ds, ds->count + b0, 3, (int64_t[]){nb, 1, 1});
    ast_tensor *mean = ast_div(c, ast_sum_axis(c, mk ? ast_mul(c, x, mk) : x, 1), count);
    ast_tensor *r = ast_sub(c, x, mean);
    return mk ? ast_mul(c, r, mk) : r;
}

/* z_s = cz z_t + cx x0 + std eps for sets b0 .. b0 + nb of modality k,
 * into the state (and the prediction, for ret x0). */
static void step_modality(dev_sampler *ds, int k, int b0, int nb, ast_tensor *z, ast_tensor *pred)
{
    ast_ctx *c = ds->c;
    modality *md = &ds->mod[k];
    int64_t off = (int64_t)b0 * ds->N * md->D;
    ast_tensor *cz = per_set(ds, md->coef, b0, nb), *cx = per_set(ds, md->coef + ds->B, b0, nb);
    ast_tensor *sd = per_set(ds, md->coef + 2 * ds->B, b0, nb);
    ast_tensor *eps = on_device(ds, ds->staged + md->eps + off, 3, (int64_t[]){nb, ds->N, md->D});
    ast_tensor *next = ast_add(c, ast_add(c, ast_mul(c, z, cz), ast_mul(c, pred, cx)), ast_mul(c, eps, sd));
    if (k == AST_MOD_POS) next = centred(ds, b0, nb, next);
    store(ds, md->state + off, next);
    if (md->pred) store(ds, md->pred + off, pred);
}

/* One forward pass over sets b0 .. b0 + nb and their reverse step. */
static void queue_pass(dev_sampler *ds, int b0, int nb)
{
    ast_ctx *c = ds->c;
    int N = ds->N, G = ds->mod[AST_MOD_EXPR].D;
    int64_t first = (int64_t)b0 * N;
    ast_ctx_reset(c);
    ast_tensor *x = on_device(ds, ds->mod[AST_MOD_EXPR].state + first * G, 3, (int64_t[]){nb, N, G});
    ast_tensor *p = on_device(ds, ds->mod[AST_MOD_POS].state + first * 3, 3, (int64_t[]){nb, N, 3});
    ast_tensor *t = on_device(ds, ds->staged + b0, 2, (int64_t[]){nb, 1});
    ast_tensor *mk = ds->mask ? on_device(ds, ds->mask + first, 2, (int64_t[]){nb, N}) : NULL;
    ast_model_prior_in given = {ds->prior ? on_device(ds, ds->prior + first * 3, 3, (int64_t[]){nb, N, 3}) : NULL,
                                ds->geo ? on_device(ds, ds->geo + first * N, 3, (int64_t[]){nb, N, N}) : NULL};
    ast_model_out out = ast_model_forward_given(ds->m, c, x, t, p, mk, ds->prior || ds->geo ? &given : NULL, NULL, NULL);
    ast_tensor *z[2] = {x, p};
    ast_tensor *a = per_set(ds, ds->B, b0, nb), *b = per_set(ds, 2 * (int64_t)ds->B, b0, nb);
    ast_tensor *pred[2] = {out.expression, ast_pos_x0_hat_with(c, ds->sc->pos_param, a, b, p, out.positions)};
    /* On the device (the op kabsch_align): the step still replays. */
    if (ds->align) pred[AST_MOD_POS] = ast_kabsch_align(c, pred[AST_MOD_POS], p, mk);
    for (int k = 0; k < 2; k++)
        if (ds->mod[k].generated) step_modality(ds, k, b0, nb, z[k], pred[k]);
}

static void queue_step(dev_sampler *ds)
{
    for (int b0 = 0; b0 < ds->B; b0 += ds->per_pass)
        queue_pass(ds, b0, ds->B - b0 < ds->per_pass ? ds->B - b0 : ds->per_pass);
}

/* Why the steps stay op by op, said once per process (an evaluation samples many times). */
static void say_op_by_op(const char *why)
{
    static int said;
    if (!said++) ast_log(AST_LOG_INFO, "the reverse diffusion runs op by op, not as a CUDA graph: %s", why);
}

/* Queues step i: op by op (the second counting what made the host wait),
 * or captured (the third, when the second made nothing wait) and replayed. */
static void run_step(dev_sampler *ds, int i, ast_graph **g, int *waits)
{
    char why[320];
    if (*g) {
        ast_graph_replay(*g);
        return;
    }
    if (i == 2 && *waits == 0 && !ds->sc->op_by_op) {
        if (ast_graph_begin(ds->c, why, sizeof why) == 0) {
            queue_step(ds);
            *g = ast_graph_end(ds->c, why, sizeof why);
        }
        if (*g) {
            ast_graph_replay(*g);
            return;
        }
        say_op_by_op(why);
    }
    int64_t before = ast_graph_traffic(ds->c);
    queue_step(ds);
    if (i == 1) *waits = (int)(ast_graph_traffic(ds->c) - before);
    if (i == 1 && *waits && !ds->sc->op_by_op) {
        snprintf(why, sizeof why, "the step waits for the host %d time%s (the model's prior of a generated "
                 "expression, computed on the host from the state, or a plugin that reads device data there, "
                 "such as MoE routing; ALPHAST_TRACE_TRAFFIC=1 shows where)", *waits, *waits == 1 ? "" : "s");
        say_op_by_op(why);
    }
}

int ast_sample_on_device(ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, ast_rng *rng, int B, int N,
                         const float *mask, const ast_sample_prior *sp, ast_noised *z, float *out_expr, float *out_pos)
{
    dev_sampler ds;
    dev_open(&ds, m, s, sc, B, N, mask, sp, z);
    int *grid = ast_xmalloc((size_t)s->steps * sizeof *grid), n = ast_sample_grid(s->steps, sc->num_steps, grid);
    int waits = -1, replayed = 0;
    ast_graph *g = NULL;
    stage_step(&ds, ds.host[0], rng, z, grid[0]);
    for (int i = 0; i < n; i++) {
        ds.b->to_backend(ds.b, ds.staged, ds.host[i & 1], (size_t)ds.n_staged * sizeof(float));
        run_step(&ds, i, &g, &waits);
        replayed += g != NULL;
        for (int k = 0; k < B; k++) z->t_int[k] = grid[i], z->t[k] = (float)grid[i] / (float)s->steps;
        /* The next step's block, while the device runs this one; the
         * other's copy (the step before) is done since the last wait. */
        if (i + 1 < n) stage_step(&ds, ds.host[(i + 1) & 1], rng, z, grid[i + 1]);
        ds.b->synchronize(ds.b);
    }
    float *out[2] = {out_expr, out_pos};
    for (int k = 0; k < 2; k++) {
        modality *md = &ds.mod[k];
        if (md->generated)
            ds.b->to_host(ds.b, out[k], md->pred ? md->pred : md->state, (size_t)B * N * md->D * sizeof(float));
    }
    ast_graph_free(g);
    dev_close(&ds);
    free(grid);
    return replayed;
}
