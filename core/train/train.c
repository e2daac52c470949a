/* The training loop: sample neighbourhood sets, noise them, predict x0,
 * take an AdamW step; validate, checkpoint and early-stop per epoch. */
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/progress.h"
#include "engine/blas_coretype.h"
#include "io/safetensors.h"
#include "train/metrics_jsonl.h"
#include "train/train_dist.h"
#include "train/train_stop.h"
#include "train_internal.h"

void ast_train_config_default(ast_train_config *tc)
{
    memset(tc, 0, sizeof *tc);
    tc->mode = AST_MODE_JOINT;
    tc->diffusion_steps = 1000;
    tc->nu_expression = tc->nu_position = 1.0;
    ast_loss_config_default(&tc->loss);
    tc->sets_per_step = 4;
    tc->set_size = 64;
    tc->region_cap = 1024;
    tc->val_at_T = 1;
    tc->val_sample_steps = 10;
    tc->select_on = AST_SELECT_LOSS;
    tc->epochs = 10;
    tc->steps_per_epoch = 50;
    tc->accumulate = 1;
    tc->cuda_graph = 1;
    tc->adamw = (ast_adamw_config){.lr = 1e-4f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f, .weight_decay = 1e-5f, .amsgrad = 1};
    tc->lr = (ast_lr_schedule){.kind = AST_LR_CONSTANT, .lr = 1e-4f};
    tc->clip_norm = 1.0;
    tc->early_stopping = 1;
    tc->patience = 10;
    tc->val_sets = 16;
    tc->val_t_points = 4;
    tc->seed = 42;
    tc->progress = 1;
    ast_masking_config_default(&tc->masking);
}

/* Zeroed host memory: pinned by `pin` (a device backend copies the
 * training batch from it without staging, and a captured step reads it
 * when replayed), else calloc's. */
static void *batch_alloc(const ast_backend *pin, size_t n, size_t size)
{
    if (!pin) return calloc(n, size);
    void *p = pin->host_alloc(pin, n * size);
    return p ? memset(p, 0, n * size) : NULL;
}

static void batch_release(const ast_backend *pin, void *p)
{
    if (!pin) free(p);
    else if (p) pin->host_free(pin, p);
}

int ast_batch_init(ast_batch *b, int B, int N, int G, const ast_model *prior_of, const ast_backend *pin,
                   const char *what, ast_error *e)
{
    int prior = 0, geo = 0;
    if (prior_of) ast_model_prior_wants(prior_of, &prior, &geo);
    /* In double: B * N * G of hostile sizes overflows size_t. More than the
     * machine's memory is refused before asking (Linux's overcommit would
     * grant it and the kernel kill us later, without a word). */
    double per_cell = 2.0 * G + 7.0 + 3.0 * prior + (double)N * geo;
    double bytes = ((double)B * N * per_cell + 4.0 * B) * sizeof(float);
    double ram = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    size_t cells = (size_t)B * N;
    *b = (ast_batch){.B = B, .N = N, .G = G, .pinned_by = pin};
    if (bytes < (double)(SIZE_MAX / 4) && (ram <= 0 || bytes <= ram)) {
        if (prior) b->prior = batch_alloc(pin, cells * 3, sizeof(float));
        if (geo) b->geo = batch_alloc(pin, cells * N, sizeof(float));
        b->expr = batch_alloc(pin, cells * G, sizeof(float)), b->z_expr = batch_alloc(pin, cells * G, sizeof(float));
        b->pos = batch_alloc(pin, cells * 3, sizeof(float)), b->z_pos = batch_alloc(pin, cells * 3, sizeof(float));
        b->mask = batch_alloc(pin, cells, sizeof(float)), b->t = batch_alloc(pin, (size_t)B, sizeof(float));
        b->t_int = batch_alloc(pin, (size_t)B, sizeof(int));
        b->pos_a = batch_alloc(pin, (size_t)B, sizeof(float)), b->pos_b = batch_alloc(pin, (size_t)B, sizeof(float));
        if (b->expr && b->z_expr && b->pos && b->z_pos && b->mask && b->t && b->t_int && b->pos_a && b->pos_b &&
            (!prior || b->prior) && (!geo || b->geo))
            return 0;
    }
    ast_batch_free(b);
    ast_error_set(e, "out of memory: the %s needs %.0f MiB (%d sets x %d cells x %d genes; this machine has %.0f "
                  "MiB); lower them", what, bytes / 1048576.0, B, N, G, ram / 1048576.0);
    return -1;
}

void ast_batch_free(ast_batch *b)
{
    void *parts[] = {b->expr, b->z_expr, b->pos, b->z_pos, b->mask, b->t, b->t_int, b->pos_a, b->pos_b, b->prior, b->geo};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) batch_release(b->pinned_by, parts[i]);
    *b = (ast_batch){0};
}

void ast_batch_coeffs(const ast_trainer *t, ast_batch *b)
{
    ast_pos_param_coeffs(&t->sched, t->tc.pos_param, b->B, b->t_int, b->pos_a, b->pos_b);
}

void ast_batch_prior(const ast_trainer *t, ast_batch *b, int lo, int hi)
{
    ast_batch rows = train_ranks_rows(b, lo, hi);
    if ((rows.prior || rows.geo) && rows.B > 0)
        ast_model_prior_host(t->model, rows.B, rows.N, rows.z_expr, rows.mask, rows.prior, rows.geo);
}

const char *ast_trainer_file(const ast_trainer *t, const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", t->dir, name);
    return buf;
}

static int write_text_file(const char *path, const char *text, ast_error *e)
{
    return ast_atomic_write_bytes(path, text, strlen(text), e);
}

/* Evaluation compares cells with each other within sets; the spatial
 * metrics skip sets below 3 cells, so a smaller test split scores 0. */
#define MIN_TEST_CELLS 3

/* What the splits must hold before anything is sized by them. */
static int check_splits(const ast_dataset *d, const ast_split sp[3], int set_size, ast_error *e)
{
    const char *src = d->source ? d->source : "the dataset";
    if (sp[AST_SPLIT_VAL].n < 1) {
        ast_error_set(e, "%s: the validation split is empty; set data.split_ratio.val above 0", src);
        return -1;
    }
    /* Sets never cross slices or splits: a set_size above the largest slice
     * pads every set, and 1e6 would allocate gigabytes of padding. */
    int most = ast_data_max_set_size(d, &sp[AST_SPLIT_TRAIN], 0, INT_MAX);
    if (set_size > most) {
        ast_error_set(e, "data.set_size: %d cells per set, but the training split's largest slice has %d cells "
                      "(%lld in the split); use at most %d, or 0 for whole slices", set_size, most,
                      (long long)sp[AST_SPLIT_TRAIN].n, most);
        return -1;
    }
    int64_t n_test = sp[AST_SPLIT_TEST].n;
    if (n_test > 0 && n_test < MIN_TEST_CELLS) {
        ast_error_set(e, "%s: the test split has %lld cell%s, but evaluation needs at least %d (its metrics compare "
                      "cells with each other); raise data.split_ratio.test, or set it to 0 to skip evaluation",
                      src, (long long)n_test, n_test == 1 ? "" : "s", MIN_TEST_CELLS);
        return -1;
    }
    return 0;
}

/* The sets, the fixed validation centres and both batches. */
static int trainer_sets(ast_trainer *t, const ast_split splits[3], ast_error *e)
{
    const ast_train_config *tc = &t->tc;
    const ast_dataset *d = t->data;
    float scale = ast_data_position_scale(d, &splits[AST_SPLIT_TRAIN], tc->set_size, tc->seed);
    t->train_sets = (ast_set_sampler){d, &splits[AST_SPLIT_TRAIN], tc->set_size, scale, tc->rotate, tc->expr_dropout};
    t->val_sets = (ast_set_sampler){d, &splits[AST_SPLIT_VAL], tc->set_size, scale, 0, 0.0f};
    const ast_backend *b = ast_model_backend(t->model), *pin = b->memory == AST_MEM_HOST ? NULL : b;
    /* Masking may replace the expression the network sees by its token, a
     * parameter in the model's memory: the network then computes the prior
     * itself, from what it sees. Validation masks nothing. */
    const ast_model *prior_of = t->masking && ast_masking_covers(&tc->masking, tc->mode, AST_MOD_EXPR) ? NULL : t->model;
    if (ast_batch_init(&t->batch, tc->sets_per_step, tc->set_size, d->n_genes, prior_of, pin,
                       "training batch (training.batch_size x data.set_size x genes)", e) < 0 ||
        ast_batch_init(&t->val_batch, tc->val_sets, tc->set_size, d->n_genes, t->model, NULL,
                       "validation batch (training.val_sets x data.set_size x genes)", e) < 0)
        return -1;
    /* Fixed validation centres: the same sets every epoch and on resume. */
    ast_rng vr;
    ast_rng_seed(&vr, tc->seed ^ 0x7a11da7eull);
    t->val_centres = ast_xmalloc((size_t)tc->val_sets * sizeof *t->val_centres);
    for (int i = 0; i < tc->val_sets; i++)
        t->val_centres[i] = splits[AST_SPLIT_VAL].cells[ast_rng_next(&vr) % (uint64_t)splits[AST_SPLIT_VAL].n];
    return 0;
}

/* What the run's weights and checkpoints say about themselves. */
static void describe(ast_trainer *t, const char *config_yaml)
{
    const char **kv = t->meta;
    t->genes_json = ast_st_names_json((const char *const *)t->data->genes, t->data->n_genes);
    *kv++ = AST_META_VERSION, *kv++ = PACKAGE_VERSION;
    *kv++ = AST_META_GENES, *kv++ = t->genes_json;
    if (config_yaml) *kv++ = AST_META_CONFIG, *kv++ = t->config_yaml = ast_xstrdup(config_yaml);
    *kv = NULL;
}

ast_trainer *ast_trainer_new(ast_model *m, const ast_dataset *d, const ast_split splits[3], const ast_train_config *tc,
                             const char *run_dir, const char *config_yaml, ast_error *e)
{
    char path[4096];
    if (check_splits(d, splits, tc->set_size, e) < 0 || ast_make_dirs(run_dir, e) < 0) return NULL;
    ast_trainer *t = ast_xcalloc(1, sizeof *t);
    t->model = m, t->data = d, t->tc = *tc;
    /* From here on tc->set_size is the N that batches are sized by. */
    int n_train = ast_data_max_set_size(d, &splits[AST_SPLIT_TRAIN], tc->set_size, tc->region_cap);
    int n_val = ast_data_max_set_size(d, &splits[AST_SPLIT_VAL], tc->set_size, tc->region_cap);
    t->tc.set_size = n_train > n_val ? n_train : n_val;
    tc = &t->tc;
    t->dir = ast_xstrdup(run_dir);
    t->best_val = t->best_crit = INFINITY;
    t->best_score = t->last_score = NAN;
    t->best_epoch = -1;
    describe(t, config_yaml);
    if (ast_schedule_init(&t->sched, tc->diffusion_steps, tc->nu_expression, tc->nu_position, e) < 0 ||
        (config_yaml && ast_dist_rank() == 0 &&
         write_text_file(ast_trainer_file(t, "config.yaml", path, sizeof path), config_yaml, e) < 0)) {
        ast_trainer_free(t);
        return NULL;
    }
    t->n_model_params = ast_params_count(ast_model_params(m));
    /* The mask tokens join the parameters before the optimiser sizes its
     * state and before all of them move to the model's device. */
    if (tc->masking.enable)
        t->masking = ast_masking_new(&tc->masking, tc->mode, ast_model_params(m), tc->sets_per_step, tc->set_size,
                                     d->n_genes);
    if (train_ranks_init(t, e) < 0 || ast_model_place(m, e) < 0) {
        ast_trainer_free(t);
        return NULL;
    }
    if (ast_model_backend(m)->memory != AST_MEM_HOST) /* a device step reads its masks from pinned memory */
        ast_masking_pin(t->masking, ast_model_backend(m));
    t->opt = train_ranks_optimizer(t);
    t->ctx = ast_ctx_new_on(ast_model_backend(m), tc->seed ^ 0x5eed0c7full);
    ast_ctx_set_precision(t->ctx, tc->precision); /* training steps and validation */
    ast_ctx_set_stats(t->ctx, 0); /* the statistics are for monitors (ast_trainer_add_monitors) */
    ast_rng_seed(&t->data_rng, tc->seed);
    if (trainer_sets(t, splits, e) < 0) {
        ast_trainer_free(t);
        return NULL;
    }
    return t;
}

void ast_trainer_free(ast_trainer *t)
{
    if (!t) return;
    ast_schedule_free(&t->sched);
    ast_adamw_free(t->opt);
    ast_masking_free(t->masking);
    train_graph_free(&t->graph);
    ast_ctx_free(t->ctx);
    ast_batch_free(&t->batch);
    ast_batch_free(&t->ahead);
    ast_batch_free(&t->val_batch);
    train_monitors_free(t->monitors);
    train_tboard_close(t);
    train_ranks_free(&t->ranks);
    if (t->metrics) fclose(t->metrics);
    free(t->val_centres), free(t->losses), free(t->dir), free(t->genes_json), free(t->config_yaml);
    free(t);
}

int64_t ast_trainer_n_losses(const ast_trainer *t) { return t->n_losses; }
const double *ast_trainer_losses(const ast_trainer *t) { return t->losses; }
int ast_trainer_cuda_graph(const ast_trainer *t) { return t->graph.state == TRAIN_GRAPH_ON; }

ast_loss_parts ast_trainer_forward(ast_trainer *t, ast_batch *b)
{
    ast_ctx *c = t->ctx;
    int64_t sx[3] = {b->B, b->N, b->G}, sp[3] = {b->B, b->N, 3}, st[2] = {b->B, 1}, sm[2] = {b->B, b->N};
    ast_tensor *x = ast_tensor_from(c, 3, sx, b->z_expr), *p = ast_tensor_from(c, 3, sp, b->z_pos);
    ast_tensor *tt = ast_tensor_from(c, 2, st, b->t), *m = ast_tensor_from(c, 2, sm, b->mask);
    ast_tensor *x_in = x, *p_in = p;
    if (b->masks) ast_masking_inputs(b->masks, c, &x_in, &p_in);
    /* From pinned memory on a device: copies a captured step replays. */
    ast_model_prior_in given = {NULL, NULL};
    if (b->prior) given.prior = ast_tensor_from(c, 3, sp, b->prior);
    if (b->geo) given.geodesic = ast_tensor_from(c, 3, (int64_t[]){b->B, b->N, b->N}, b->geo);
    ast_model_out out = ast_model_forward_given(t->model, c, x_in, tt, p_in, m, b->prior || b->geo ? &given : NULL,
                                                NULL, NULL);
    out.positions = ast_pos_x0_hat_from(c, t->tc.pos_param, b->pos_a, b->pos_b, p_in, out.positions);
    ast_tensor *x0 = ast_tensor_from(c, 3, sx, b->expr), *p0 = ast_tensor_from(c, 3, sp, b->pos);
    ast_loss_parts lp = ast_diffusion_loss(c, &t->tc.loss, &out, x0, p0, m);
    if (b->masks) lp.total = ast_add(c, lp.total, ast_masking_loss(b->masks, c, &out, x0, p0, x, p));
    return lp;
}

void train_draw_batch(ast_trainer *t, ast_batch *b)
{
    /* Each rank fills the expression of its own sets alone: the largest
     * part of a batch, which no other step of the draw reads (masked
     * training, whose masks read every set's, runs in one process). */
    ast_sample_sets_of(&t->train_sets, &t->data_rng, b->B, t->ranks.lo, t->ranks.hi, b->expr, b->pos, b->mask);
    for (int i = 0; i < b->B; i++) b->t_int[i] = 1 + (int)(ast_rng_next(&t->data_rng) % (uint64_t)t->tc.diffusion_steps);
    ast_noised z = {b->z_expr, b->z_pos, b->t, b->t_int};
    ast_apply_noise(&t->sched, t->tc.mode, &t->data_rng, b->B, b->N, b->G, b->expr, b->pos, b->mask, &z);
    ast_batch_coeffs(t, b);
    ast_batch_prior(t, b, t->ranks.lo, t->ranks.hi);
    /* t->step counts optimiser updates and is checkpointed: the progressive schedule survives a resume. */
    ast_masking_schedule(t->masking, ast_ctx_scheduled(t->ctx, "masking.ratio", NAN));
    b->masks = ast_masking_draw(t->masking, &t->data_rng, t->step, b->z_expr, b->mask);
}

/* to = from for sets [lo, hi) (a rank's share), two batches of the same
 * sizes and parts (masks aside): on the step's critical path, so the
 * expression (nearly all of the bytes) is copied by the thread pool. */
static void batch_copy(ast_batch *to, const ast_batch *from, int lo, int hi)
{
    size_t N = (size_t)from->N, G = (size_t)from->G, B = (size_t)from->B, f = sizeof(float);
    size_t cell0 = (size_t)lo * N, cells = (size_t)(hi - lo) * N;
    ast_copy_parallel(to->expr + cell0 * G, from->expr + cell0 * G, cells * G * f);
    ast_copy_parallel(to->z_expr + cell0 * G, from->z_expr + cell0 * G, cells * G * f);
    memcpy(to->pos, from->pos, B * N * 3 * f), memcpy(to->z_pos, from->z_pos, B * N * 3 * f);
    memcpy(to->mask, from->mask, B * N * f), memcpy(to->t, from->t, B * f), memcpy(to->t_int, from->t_int, B * sizeof(int));
    memcpy(to->pos_a, from->pos_a, B * f), memcpy(to->pos_b, from->pos_b, B * f);
    if (to->prior) memcpy(to->prior + cell0 * 3, from->prior + cell0 * 3, cells * 3 * f); /* ast_batch_prior's rows */
    if (to->geo) ast_copy_parallel(to->geo + cell0 * N, from->geo + cell0 * N, cells * N * f);
}

void train_prepare_batch(ast_trainer *t)
{
    if (!t->drawn_ahead) {
        train_draw_batch(t, &t->batch);
        return;
    }
    batch_copy(&t->batch, &t->ahead, t->ranks.lo, t->ranks.hi);
    t->drawn_ahead = 0;
}

ast_tensor *train_queue_micro_step(ast_trainer *t)
{
    ast_ctx_reset(t->ctx);
    ast_ctx_set_training(t->ctx, 1);
    ast_ctx_set_grad(t->ctx, 1);
    ast_batch mine = train_ranks_rows(&t->batch, t->ranks.lo, t->ranks.hi);
    ast_loss_parts lp = ast_trainer_forward(t, &mine);
    ast_tensor *scaled = ast_affine(t->ctx, lp.total, t->ranks.share / (float)t->tc.accumulate, 0.0f);
    ast_backward(t->ctx, scaled);
    return lp.total;
}

/* One micro-batch: sample, noise, forward, backward (gradients add up).
 * Every rank draws the whole batch and trains on its sets; returns its
 * share of the batch's loss. On a device, reading the loss is where the
 * micro-batch synchronises: the host waits for its forward and backward
 * (the clipping's norm would wait for them anyway, right after), and the
 * masking's values come back in the same breath. */
static double micro_step(ast_trainer *t)
{
    train_prepare_batch(t);
    float loss;
    ast_tensor_read(t->ctx, train_queue_micro_step(t), 0, 1, &loss);
    ast_masking_collect(t->masking);
    return t->ranks.share * loss;
}

static void log_step(ast_trainer *t, double loss, double gnorm)
{
    const ast_schedule_values *v = &t->scheduled;
    cJSON *line = ast_metrics_line("train", (long long)t->step, t->epoch);
    ast_metrics_add(line, "loss", "%.9g", loss);
    ast_metrics_add(line, "grad_norm", "%.6g", gnorm);
    ast_metrics_add(line, "lr", "%.6g", v->lr);
    for (int i = 0; i < v->n; i++) ast_metrics_add(line, v->named[i].name, "%.6g", v->named[i].value);
    ast_masking_metrics mm;
    if (ast_masking_take_metrics(t->masking, &mm)) {
        ast_metrics_add(line, "masked_expr_reconstruction", "%.9g", mm.expr_reconstruction);
        ast_metrics_add(line, "masked_pos_reconstruction", "%.9g", mm.pos_reconstruction);
        ast_metrics_add(line, "masking_applied", "%.6g", mm.applied);
    }
    ast_metrics_write(t->metrics, line);
    train_tboard_sync(t);
}

/* The step's learning rate and scheduled values, set before its forward
 * passes so plugins see them in every micro-batch. */
static int schedule_step(ast_trainer *t, ast_error *e)
{
    ast_schedule_values *v = &t->scheduled;
    *v = (ast_schedule_values){.lr = ast_lr_at(&t->tc.lr, t->step, t->epoch)};
    if (t->tc.schedule && t->tc.schedule(t->tc.schedule_ud, t->step, t->epoch, v, e) < 0) return -1;
    for (int i = 0; i < v->n; i++) ast_ctx_set_scheduled(t->ctx, v->named[i].name, v->named[i].value);
    return 0;
}

/* The error of a non-finite step. A checkpoint is written at every epoch's
 * end, so one of this run exists once an epoch has finished (t->epoch
 * counts finished epochs, resumed ones too); before that there is none. */
static void non_finite_error(const ast_trainer *t, double loss, double gnorm, ast_error *e)
{
    char last[4200];
    if (t->epoch > 0)
        snprintf(last, sizeof last, "The last good checkpoint is %s/checkpoint.safetensors (after epoch %d)", t->dir,
                 t->epoch);
    else
        snprintf(last, sizeof last, "No checkpoint was written: it failed in the first epoch");
    ast_error_set(e, "step %lld: the %s is not finite (loss %g, gradient norm %g); stopped without updating. %s; "
                  "lower training.learning_rate or check the data for extreme values",
                  (long long)t->step + 1, isfinite(loss) ? "gradient" : "loss", loss, gnorm, last);
}

/* The update of the micro-batches' gradients, eager: the loss is checked
 * on the host before it, the gradient's norm on the backend (which then
 * leaves the weights as they were) and read after. */
static int eager_step(ast_trainer *t, double *loss_out, double *gnorm_out)
{
    double loss = 0.0;
    ast_params_zero_grad(ast_model_params(t->model));
    train_ranks_step_begin(t);
    for (int i = 0; i < t->tc.accumulate; i++) loss += micro_step(t) / t->tc.accumulate;
    *loss_out = loss = train_ranks_reduce(t, loss);
    train_monitors_queue(t);
    train_monitors_observe(t, AST_PHASE_TRAIN_STEP);
    if (!isfinite(loss)) return -1;
    ast_adamw_stage(t->opt, t->scheduled.lr);
    ast_adamw_queue(t->opt, t->tc.clip_norm, NULL);
    *gnorm_out = ast_adamw_norm(t->opt);
    return isfinite(*gnorm_out) ? 0 : -1;
}

/* One optimiser update; -1 with e set if the loss or gradient is not finite. */
static int train_step(ast_trainer *t, double *loss_out, ast_error *e)
{
    double loss = NAN, gnorm = NAN;
    if (schedule_step(t, e) < 0) return -1;
    int ok = train_graph_step(t, &loss, &gnorm);
    if (ok == TRAIN_GRAPH_NOT_USED) ok = eager_step(t, &loss, &gnorm);
    if (ok < 0) {
        non_finite_error(t, loss, gnorm, e);
        return -1;
    }
    train_ranks_step_end(t);
    t->step++;
    log_step(t, loss, gnorm);
    if (t->n_losses == t->cap_losses)
        t->losses = ast_xrealloc(t->losses, (size_t)(t->cap_losses = t->cap_losses ? 2 * t->cap_losses : 256) * sizeof(double));
    t->losses[t->n_losses++] = loss;
    *loss_out = loss;
    return 0;
}

/* The epoch's training.select_on criterion, lower is better. An epoch
 * whose sampled score is NaN (no set large enough) ranks below every
 * scored one, yet above none at all, so that best.safetensors exists. */
static double criterion(const ast_trainer *t, double val, double score)
{
    if (t->tc.select_on == AST_SELECT_LOSS || !t->tc.val_score) return val;
    return isnan(score) ? DBL_MAX : -score;
}

static const char *score_name(const ast_trainer *t) { return t->tc.val_score_name ? t->tc.val_score_name : "score"; }

static void log_epoch(ast_trainer *t, double train_loss, double val, double score)
{
    cJSON *line = ast_metrics_line("epoch", (long long)t->step, t->epoch);
    ast_metrics_add(line, "train_loss", "%.9g", train_loss);
    ast_metrics_add(line, "val_loss", "%.9g", val);
    if (t->tc.val_score) {
        char key[64];
        snprintf(key, sizeof key, "val_%s", score_name(t));
        ast_metrics_add(line, key, "%.9g", score);
    }
    ast_metrics_write(t->metrics, line);
    train_tboard_sync(t);
}

static int end_epoch(ast_trainer *t, double train_loss, ast_error *e)
{
    train_monitors_observe(t, AST_PHASE_EPOCH_END);
    double val = ast_trainer_val_loss(t);
    double score = t->tc.val_score ? t->tc.val_score(t->tc.val_score_ud, t->model, &t->sched) : NAN;
    t->last_val = val, t->last_train = train_loss, t->last_score = score;
    log_epoch(t, train_loss, val, score);
    char path[4096];
    double crit = criterion(t, val, score);
    if (crit < t->best_crit) {
        t->best_crit = crit, t->best_val = val, t->best_score = score;
        t->best_epoch = t->epoch, t->bad_epochs = 0;
        if (t->ranks.rank == 0 &&
            ast_params_save(ast_model_params(t->model), ast_trainer_file(t, "best.safetensors", path, sizeof path),
                            t->meta, e) < 0)
            return -1;
    } else {
        t->bad_epochs++;
    }
    t->epoch++;
    t->epoch_step = 0, t->epoch_loss_sum = 0.0;
    fflush(t->metrics);
    return ast_trainer_save(t, e);
}

static int open_metrics(ast_trainer *t, ast_error *e)
{
    char path[4096];
    if (t->metrics) return 0;
    /* A fresh start owns the log: lines there are from an attempt killed
     * before its first checkpoint. Rank 0 writes it; the others' lines,
     * the same, go nowhere. */
    ast_trainer_file(t, "metrics.jsonl", path, sizeof path);
    t->metrics = fopen(t->ranks.rank == 0 ? path : "/dev/null", t->step ? "a" : "w");
    if (!t->metrics) {
        ast_error_set(e, "%s: cannot open for writing: %s", path, strerror(errno));
        return -1;
    }
    return train_tboard_open(t, e);
}

double ast_trainer_run_seconds(const ast_trainer *t)
{
    return t->prior_seconds + (t->run_start > 0 ? ast_now() - t->run_start : 0.0);
}

/* A number for JSON, which has no NaN: null instead. */
static const char *json_num(double x, char buf[32])
{
    if (isfinite(x)) snprintf(buf, 32, "%.9g", x);
    else snprintf(buf, 32, "null");
    return buf;
}

typedef struct summary_args {
    ast_trainer *t;
    const ast_train_result *r;
} summary_args;

static int print_summary(FILE *f, void *ud)
{
    ast_trainer *t = ((summary_args *)ud)->t;
    const ast_train_result *r = ((summary_args *)ud)->r;
    char blas[256], best[32], last[32];
    size_t peak = ast_ctx_arena_peak(t->ctx);
    peak = peak > t->prior_peak_arena ? peak : t->prior_peak_arena;
    cJSON *p = ast_split_protocol_json(ast_split_resolve(t->data, &t->tc.split), &t->tc.split);
    char *protocol = cJSON_PrintUnformatted(p);
    cJSON_Delete(p);
    int rc = fprintf(f,
            "{\n  \"steps\": %lld,\n  \"epochs\": %d,\n  \"best_val_loss\": %.9g,\n  \"best_epoch\": %d,\n"
            "  \"last_val_loss\": %.9g,\n  \"last_train_loss\": %.9g,\n  \"select_on\": \"%s\",\n"
            "  \"best_val_score\": %s,\n  \"last_val_score\": %s,\n  \"seconds\": %.3f,\n"
            "  \"steps_per_second\": %.4f,\n  \"invocations\": %d,\n  \"stop_reason\": \"%s\",\n"
            "  \"parameters\": %lld,\n  \"active_parameters\": %lld,\n  \"peak_arena_bytes\": %zu,\n"
            "  \"position_scale\": %.9g,\n  \"cuda_graph\": %s,\n  \"blas\": \"%s\",\n  \"protocol\": %s\n}\n",
            (long long)r->steps, r->epochs, r->best_val, r->best_epoch, r->last_val, r->last_train,
            t->tc.select_on == AST_SELECT_LOSS || !t->tc.val_score ? "loss" : "sampled", json_num(r->best_score, best),
            json_num(r->last_score, last), r->seconds,
            r->steps_per_second, t->invocations, r->stop_reason, (long long)ast_model_param_count(t->model),
            (long long)ast_model_active_param_count(t->model), peak, t->train_sets.pos_scale,
            ast_trainer_cuda_graph(t) ? "true" : "false", ast_blas_coretype_describe(blas, sizeof blas), protocol);
    cJSON_free(protocol);
    return rc < 0 ? -1 : 0;
}

/* summary.json replaced whole (a reader polling a running sweep never sees
 * half of it); a failure to write it is logged, the run's result stands. */
static void write_summary(ast_trainer *t, const ast_train_result *r)
{
    if (t->ranks.rank != 0) return;
    char path[4096];
    ast_error e = {0};
    summary_args args = {t, r};
    if (ast_atomic_write(ast_trainer_file(t, "summary.json", path, sizeof path), print_summary, &args, &e))
        ast_log(AST_LOG_WARN, "%s", e.msg);
}

/* The result describes the whole run, not this invocation: a resumed one
 * that trains no step (killed after its last checkpoint, run again) adds
 * its few milliseconds to the checkpointed seconds instead of replacing
 * them with its own zero steps per second. */
static void fill_result(ast_trainer *t, ast_train_result *r)
{
    r->steps = t->step, r->epochs = t->epoch;
    r->best_val = t->best_val, r->best_epoch = t->best_epoch;
    r->last_val = t->last_val, r->last_train = t->last_train;
    r->best_score = t->best_score, r->last_score = t->last_score;
    r->seconds = ast_trainer_run_seconds(t);
    int64_t timed = t->prior_timed_steps + (t->step - t->first_step);
    r->steps_per_second = (double)timed / (r->seconds + 1e-9);
}

/* training.init_from, for a run that has taken no step (a resumed one has
 * its weights from the checkpoint). The mask tokens of masked training come
 * after the model's parameters: a file without them leaves theirs. */
static int init_weights(ast_trainer *t, ast_error *e)
{
    ast_st_file *f = ast_st_open(t->tc.init_from, e);
    int rc = f ? ast_st_check_genes(f, (const char *const *)t->data->genes, t->data->n_genes, e) : -1;
    if (rc == 0) rc = ast_params_load_from(ast_model_params(t->model), f, 0, t->n_model_params, e);
    ast_st_close(f);
    if (rc == 0) {
        ast_log(AST_LOG_INFO, "starting from the weights in %s (training.init_from)", t->tc.init_from);
        return 0;
    }
    ast_error why = *e;
    ast_error_set(e, "training.init_from: %s", why.msg);
    return -1;
}

/* A signal asked to stop (train_stop.h), between two steps: the checkpoint
 * holds the step within the epoch and the epoch's loss so far, so a resumed
 * run takes the next step as this one would have. */
static int stop_on_signal(ast_trainer *t, ast_progress *bar, ast_train_result *r, ast_error *e)
{
    char status[64];
    snprintf(status, sizeof status, "stopped by signal %d, checkpoint written", ast_train_stop_signal());
    ast_progress_finish(bar, status);
    fflush(t->metrics);
    if (ast_trainer_save(t, e) < 0) return -1;
    fill_result(t, r);
    r->stop_reason = "signal";
    r->stop_signal = ast_train_stop_signal();
    write_summary(t, r);
    return 0;
}

static int train_epochs(ast_trainer *t, ast_train_result *r, ast_error *e)
{
    memset(r, 0, sizeof *r);
    if ((t->step == 0 && t->tc.init_from && init_weights(t, e) < 0) || train_ranks_check_same(t, e) < 0 ||
        open_metrics(t, e) < 0)
        return -1;
    double start = t->run_start = ast_now();
    t->first_step = t->step;
    t->invocations++; /* this one; the checkpoint counts the earlier ones */
    r->stop_reason = "epochs";
    ast_progress bar;
    char label[32], status[96];
    while (t->epoch < t->tc.epochs) {
        if (t->tc.early_stopping && t->bad_epochs >= t->tc.patience) {
            r->stop_reason = "early_stopping";
            break;
        }
        snprintf(label, sizeof label, "epoch %d/%d", t->epoch + 1, t->tc.epochs);
        ast_progress_start(&bar, label, t->tc.steps_per_epoch, t->tc.progress);
        double loss = 0.0;
        for (; t->epoch_step < t->tc.steps_per_epoch; t->epoch_step++) {
            if (ast_dist_any(ast_train_stop_signal())) return stop_on_signal(t, &bar, r, e); /* ranks stop together */
            if (train_step(t, &loss, e) < 0) return -1;
            t->epoch_loss_sum += loss;
            snprintf(status, sizeof status, "loss %.4f", loss);
            ast_progress_update(&bar, t->epoch_step + 1, status);
        }
        if (end_epoch(t, t->epoch_loss_sum / t->tc.steps_per_epoch, e) < 0) return -1;
        int at = snprintf(status, sizeof status, "train %.4f  val %.4f", t->last_train, t->last_val);
        if (t->tc.val_score) snprintf(status + at, sizeof status - (size_t)at, "  %s %.3f", score_name(t), t->last_score);
        if (t->best_epoch == t->epoch - 1) strncat(status, " (best)", sizeof status - strlen(status) - 1);
        ast_progress_finish(&bar, status);
        if (t->tc.max_minutes > 0 && ast_dist_any(ast_now() - start > 60.0 * t->tc.max_minutes)) {
            r->stop_reason = "time_limit";
            break;
        }
    }
    fill_result(t, r);
    write_summary(t, r);
    return 0;
}

int ast_trainer_run(ast_trainer *t, ast_train_result *r, ast_error *e)
{
    ast_train_stop_catch();
    int rc = train_epochs(t, r, e);
    ast_train_stop_release();
    return rc;
}
