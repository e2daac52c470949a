/* Checkpoints: one safetensors file with the weights (PyTorch names), the
 * plugins' buffers (host->buffer, e.g. the MoE's selection bias), the
 * AdamW state, and in its metadata the step, epoch, early-stopping state,
 * both RNG states and the length of metrics.jsonl, so a resumed run
 * continues exactly where the saved one was. Written atomically. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "train_internal.h"

#define CKPT_FORMAT "alphast-checkpoint-1"
#define CKPT_FILE "checkpoint.safetensors"

static const char *const moment_names[3] = {"optimizer.exp_avg.", "optimizer.exp_avg_sq.", "optimizer.max_exp_avg_sq."};

static float **moments(ast_adamw *o, int k) { return k == 0 ? o->m : k == 1 ? o->v : o->vmax; }

static void rng_encode(const ast_rng *r, char *buf, size_t n)
{
    uint32_t spare;
    memcpy(&spare, &r->spare, sizeof spare);
    snprintf(buf, n, "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %d %08" PRIx32, r->s[0], r->s[1],
             r->s[2], r->s[3], r->has_spare, spare);
}

static int rng_decode(const char *s, ast_rng *r)
{
    uint32_t spare;
    if (!s || sscanf(s, "%" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %d %" SCNx32, &r->s[0], &r->s[1], &r->s[2],
                     &r->s[3], &r->has_spare, &spare) != 6)
        return -1;
    memcpy(&r->spare, &spare, sizeof spare);
    return 0;
}

int ast_trainer_save(ast_trainer *t, ast_error *e)
{
    ast_params *p = ast_model_params(t->model);
    int n = ast_params_count(p);
    ast_st_writer *w = ast_st_writer_new();
    char **names = ast_xcalloc((size_t)n * 3, sizeof *names);
    for (int i = 0; i < n; i++) {
        ast_tensor *x = ast_params_at(p, i);
        ast_st_writer_add(w, x->name, AST_ST_F32, x->ndim, x->shape, x->data);
    }
    for (int i = 0; i < ast_params_n_buffers(p); i++) {
        ast_tensor *x = ast_params_buffer_at(p, i);
        ast_st_writer_add(w, x->name, AST_ST_F32, x->ndim, x->shape, x->data);
    }
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n && moments(t->opt, k)[i]; i++) {
            ast_tensor *x = ast_params_at(p, i);
            size_t len = strlen(moment_names[k]) + strlen(x->name) + 1;
            names[k * n + i] = ast_xmalloc(len);
            snprintf(names[k * n + i], len, "%s%s", moment_names[k], x->name);
            ast_st_writer_add(w, names[k * n + i], AST_ST_F32, x->ndim, x->shape, moments(t->opt, k)[i]);
        }
    char buf[256];
    ast_st_writer_metadata(w, "format", CKPT_FORMAT);
#define META(key, fmt, value) (snprintf(buf, sizeof buf, fmt, value), ast_st_writer_metadata(w, key, buf))
    META("step", "%lld", (long long)t->step);
    META("epoch", "%d", t->epoch);
    META("optimizer_step", "%lld", (long long)t->opt->step);
    META("best_val", "%.17g", t->best_val);
    META("best_epoch", "%d", t->best_epoch);
    META("bad_epochs", "%d", t->bad_epochs);
    META("last_val", "%.17g", t->last_val);
    META("last_train", "%.17g", t->last_train);
    META("metrics_bytes", "%ld", t->metrics ? ftell(t->metrics) : 0L);
#undef META
    rng_encode(&t->data_rng, buf, sizeof buf);
    ast_st_writer_metadata(w, "data_rng", buf);
    rng_encode(ast_ctx_rng(t->ctx), buf, sizeof buf);
    ast_st_writer_metadata(w, "ctx_rng", buf);
    char path[4096];
    int rc = ast_st_writer_write(w, ast_trainer_file(t, CKPT_FILE, path, sizeof path), e);
    ast_st_writer_free(w);
    for (int i = 0; i < 3 * n; i++) free(names[i]);
    free(names);
    return rc;
}

static int meta_num(const ast_st_file *f, const char *key, double *out, ast_error *e)
{
    const char *v = ast_st_metadata(f, key);
    char *end;
    if (v) *out = strtod(v, &end);
    if (!v || end == v || *end) {
        ast_error_set(e, "%s: checkpoint metadata '%s' is missing or not a number; the file is not an alphast "
                      "checkpoint of this version (start a new run directory)", ast_st_path(f), key);
        return -1;
    }
    return 0;
}

static int load_state(ast_trainer *t, const ast_st_file *f, ast_error *e)
{
    const char *fmt = ast_st_metadata(f, "format");
    if (!fmt || strcmp(fmt, CKPT_FORMAT)) {
        ast_error_set(e, "%s: not an %s file (format '%s'); start a new run directory", ast_st_path(f), CKPT_FORMAT,
                      fmt ? fmt : "none");
        return -1;
    }
    double step, epoch, ostep, best, best_epoch, bad, last_val, last_train, bytes;
    if (meta_num(f, "step", &step, e) || meta_num(f, "epoch", &epoch, e) || meta_num(f, "optimizer_step", &ostep, e) ||
        meta_num(f, "best_val", &best, e) || meta_num(f, "best_epoch", &best_epoch, e) ||
        meta_num(f, "bad_epochs", &bad, e) || meta_num(f, "last_val", &last_val, e) ||
        meta_num(f, "last_train", &last_train, e) || meta_num(f, "metrics_bytes", &bytes, e))
        return -1;
    if (rng_decode(ast_st_metadata(f, "data_rng"), &t->data_rng) || rng_decode(ast_st_metadata(f, "ctx_rng"), ast_ctx_rng(t->ctx))) {
        ast_error_set(e, "%s: checkpoint RNG state is missing or malformed", ast_st_path(f));
        return -1;
    }
    ast_params *p = ast_model_params(t->model);
    char name[1024];
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < ast_params_count(p) && moments(t->opt, k)[i]; i++) {
            ast_tensor *x = ast_params_at(p, i);
            snprintf(name, sizeof name, "%s%s", moment_names[k], x->name);
            if (ast_st_read_f32(f, name, x->ndim, x->shape, moments(t->opt, k)[i], e) < 0) return -1;
        }
    t->step = (int64_t)step, t->epoch = (int)epoch, t->opt->step = (int64_t)ostep;
    t->best_val = best, t->best_epoch = (int)best_epoch, t->bad_epochs = (int)bad;
    t->last_val = last_val, t->last_train = last_train;
    char path[4096];
    /* Lines logged after this checkpoint belong to a run that never finished. */
    if (truncate(ast_trainer_file(t, "metrics.jsonl", path, sizeof path), (off_t)bytes) && errno != ENOENT) {
        ast_error_set(e, "%s: cannot truncate to the checkpoint: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int ast_trainer_load(ast_trainer *t, const char *path, ast_error *e)
{
    ast_st_file *f = ast_st_open(path, e);
    if (!f) return -1;
    int rc = load_state(t, f, e);
    ast_st_close(f);
    /* The buffers too: a resume with a plugin's state reset would not be exact. */
    if (rc == 0) rc = ast_params_load(ast_model_params(t->model), path, AST_LOAD_BUFFERS, e);
    return rc;
}

int ast_trainer_resume(ast_trainer *t, ast_error *e)
{
    char path[4096];
    ast_trainer_file(t, CKPT_FILE, path, sizeof path);
    if (access(path, F_OK)) return 0;
    return ast_trainer_load(t, path, e) < 0 ? -1 : 1;
}
