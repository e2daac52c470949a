/* Data parallelism in the training loop (train_dist_loop.h). */
#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "io/safetensors.h"
#include "train/train_dist.h"
#include "train_internal.h"

/* 0 if the run splits over `size` ranks; -1 with e saying why not. */
static int check_splittable(const ast_trainer *t, int size, ast_error *e)
{
    if (size > 1 && t->tc.sets_per_step < size) {
        ast_error_set(e, "training.batch_size is %d set%s, fewer than the %d ranks: each rank trains on its share "
                      "of every batch; raise training.batch_size to at least %d, or launch fewer ranks",
                      t->tc.sets_per_step, t->tc.sets_per_step == 1 ? "" : "s", size, size);
        return -1;
    }
    /* The masks are drawn for the whole batch inside the masking module,
     * which has no way yet to hand one rank its sets' part of them. */
    if (size > 1 && t->tc.masking.enable) {
        ast_error_set(e, "masking.enable: masked training runs in one process only for now; launch one rank, or "
                      "set masking.enable: false");
        return -1;
    }
    return 0;
}

int train_ranks_init(ast_trainer *t, ast_error *e)
{
    train_ranks *r = &t->ranks;
    ast_params *p = ast_model_params(t->model);
    *r = (train_ranks){.rank = ast_dist_rank(), .size = ast_dist_size()};
    if (check_splittable(t, r->size, e) < 0) return -1;
    int64_t lo, hi;
    ast_dist_part(t->tc.sets_per_step, r->rank, r->size, &lo, &hi);
    r->lo = (int)lo, r->hi = (int)hi;
    r->share = (float)(hi - lo) / (float)t->tc.sets_per_step;
    ast_dist_part(t->tc.val_sets, r->rank, r->size, &lo, &hi);
    r->val_lo = (int)lo, r->val_hi = (int)hi;
    r->val_share = (double)(hi - lo) / t->tc.val_sets;
    r->n_grad = ast_params_numel(p);
    for (int i = 0; i < ast_params_n_buffers(p); i++) r->n_buf += ast_params_buffer_at(p, i)->size;
    r->part = ast_xmalloc(((size_t)r->size + 1) * sizeof *r->part);
    for (int k = 0; k < r->size; k++) ast_dist_part(r->n_grad, k, r->size, &r->part[k], &hi);
    r->part[r->size] = r->n_grad;
    r->sharded = r->size > 1 && t->tc.sharding == AST_SHARD_ZERO1;
    if (r->size < 2) return 0;
    const ast_backend *b = ast_model_backend(t->model);
    size_t flat_bytes = ((size_t)(r->n_grad + r->n_buf) + 1) * sizeof *r->flat;
    if (b->memory != AST_MEM_HOST) {
        if (ast_dist_device_start(b, e) < 0) return -1;
        r->device = b; /* its copies to and from the host go fastest from pinned memory */
        r->flat = b->host_alloc(b, flat_bytes);
        if (!r->flat) {
            ast_error_set(e, "device: %s: out of pinned host memory for the %zu bytes a step exchanges; launch "
                          "fewer ranks per machine", b->name, flat_bytes);
            return -1;
        }
    } else {
        r->flat = ast_xmalloc(flat_bytes);
    }
    r->buf_start = ast_xmalloc(((size_t)r->n_buf + 1) * sizeof *r->buf_start);
    return 0;
}

ast_adamw *train_ranks_optimizer(ast_trainer *t)
{
    const train_ranks *r = &t->ranks;
    int64_t first = r->sharded ? r->part[r->rank] : 0, count = r->sharded ? r->part[r->rank + 1] - first : r->n_grad;
    return ast_adamw_new_part(ast_model_params(t->model), &t->tc.adamw, first, count);
}

void train_ranks_free(train_ranks *r)
{
    if (r->device) {
        r->device->host_free(r->device, r->flat);
        ast_dist_device_stop();
    } else {
        free(r->flat);
    }
    free(r->part), free(r->buf_start);
    memset(r, 0, sizeof *r);
}

ast_batch train_ranks_rows(const ast_batch *b, int lo, int hi)
{
    int64_t cells = (int64_t)lo * b->N;
    return (ast_batch){.B = hi - lo, .N = b->N, .G = b->G, .expr = b->expr + cells * b->G, .pos = b->pos + cells * 3,
                       .mask = b->mask + cells, .z_expr = b->z_expr + cells * b->G, .z_pos = b->z_pos + cells * 3,
                       .t = b->t + lo, .t_int = b->t_int + lo, .pos_a = b->pos_a + lo, .pos_b = b->pos_b + lo,
                       .prior = b->prior ? b->prior + cells * 3 : NULL, .geo = b->geo ? b->geo + cells * b->N : NULL,
                       .masks = b->masks, .pinned_by = b->pinned_by};
}

/* Every parameter's gradient (grad = 1) or data into the flat buffer (to =
 * 1) or back out of it, in registration order; returns the end of their
 * part of flat. On the host: ranks on a device exchange the parameters'
 * one buffer in its memory (train_dist_device.c). */
static float *copy_params(ast_params *p, float *flat, int grad, int to)
{
    for (int i = 0; i < ast_params_count(p); i++) {
        ast_tensor *x = ast_params_at(p, i);
        float *own = grad ? x->grad : x->data;
        if (to) memcpy(flat, own, (size_t)x->size * sizeof(float));
        else memcpy(own, flat, (size_t)x->size * sizeof(float));
        flat += x->size;
    }
    return flat;
}

/* Copies the buffers into flat (to 1) or back out of it (to 0). */
static void copy_buffers(ast_params *p, float *flat, int to)
{
    for (int i = 0; i < ast_params_n_buffers(p); i++) {
        ast_tensor *x = ast_params_buffer_at(p, i);
        if (to) memcpy(flat, x->data, (size_t)x->size * sizeof(float));
        else memcpy(x->data, flat, (size_t)x->size * sizeof(float));
        flat += x->size;
    }
}

void train_ranks_step_begin(ast_trainer *t)
{
    train_ranks *r = &t->ranks;
    if (r->size < 2) return; /* one process keeps the one stream its checkpoint saves */
    uint64_t k = ast_mix64(t->tc.seed ^ 0x5eed0c7full);
    k = ast_mix64(k + (uint64_t)t->step);
    ast_rng_seed(ast_ctx_rng(t->ctx), ast_mix64(k + (uint64_t)r->rank));
    copy_buffers(ast_model_params(t->model), r->buf_start, 1);
}

/* The parameters' gradients (grad = 1) or data in a device's memory: one
 * buffer, parameter after parameter (engine/params.c). */
static float *device_flat(ast_params *p, int grad)
{
    return grad ? ast_params_at(p, 0)->grad : ast_params_at(p, 0)->data;
}

double train_ranks_reduce(ast_trainer *t, double loss)
{
    train_ranks *r = &t->ranks;
    if (r->size < 2) return loss;
    ast_params *p = ast_model_params(t->model);
    /* On the host the gradients join the buffers' changes and the loss in
     * one sum; a device's are summed where they are, flat then holding the
     * rest (the buffers stay on the host, engine/params.c). */
    float *at = r->device ? r->flat : copy_params(p, r->flat, 1, 1);
    if (r->device) ast_dist_device_sum_f32(r->device, device_flat(p, 1), r->n_grad, r->flat);
    copy_buffers(p, at, 1);
    for (int64_t j = 0; j < r->n_buf; j++) at[j] -= r->buf_start[j];
    at[r->n_buf] = (float)loss;
    ast_dist_sum_f32(r->device ? at : r->flat, r->n_buf + 1 + (r->device ? 0 : r->n_grad));
    if (!r->device) at = copy_params(p, r->flat, 1, 0);
    /* Unchanged buffers stay exactly as they were: their changes sum to 0. */
    for (int64_t j = 0; j < r->n_buf; j++) at[j] = r->buf_start[j] + at[j] / (float)r->size;
    copy_buffers(p, at, 0);
    return at[r->n_buf];
}

void train_ranks_step_end(ast_trainer *t)
{
    train_ranks *r = &t->ranks;
    if (!r->sharded) return;
    ast_params *p = ast_model_params(t->model);
    if (r->device) {
        ast_dist_device_allgather_f32(r->device, device_flat(p, 0), r->part, r->flat);
        return;
    }
    copy_params(p, r->flat, 0, 1);
    ast_dist_allgather_f32(r->flat, r->part);
    copy_params(p, r->flat, 0, 0);
}

/* What a rank starts from: weights, buffers, the data stream, the step
 * and the config. The weights are read through a host copy: on a GPU they
 * are in its memory. */
static uint64_t start_hash(ast_trainer *t)
{
    ast_params *p = ast_model_params(t->model);
    uint64_t h = ast_fnv1a(AST_FNV_OFFSET, &t->step, sizeof t->step);
    h = ast_fnv1a(h, t->data_rng.s, sizeof t->data_rng.s);
    if (t->config_yaml) h = ast_fnv1a(h, t->config_yaml, strlen(t->config_yaml));
    float *host = ast_params_host_copy(p); /* the parameters, then the buffers */
    h = ast_fnv1a(h, host, (size_t)(t->ranks.n_grad + t->ranks.n_buf) * sizeof *host);
    free(host);
    return h;
}

int train_ranks_check_same(ast_trainer *t, ast_error *e)
{
    if (t->ranks.size < 2) return 0;
    uint64_t mine = start_hash(t), root = mine;
    ast_dist_broadcast(&root, sizeof root, 0);
    if (ast_dist_all(mine == root)) return 0;
    ast_error_set(e, "%s: the ranks do not start from the same weights, data stream and config (this is rank %d%s): "
                  "every rank must read the same config, data and checkpoint; on several machines, keep the run "
                  "directory and the data on a file system they share", t->dir, t->ranks.rank,
                  mine == root ? ", which agrees with rank 0" : ", which differs from rank 0");
    return -1;
}
