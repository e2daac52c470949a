/* Checkpoints: one safetensors file with the weights (PyTorch names), the
 * plugins' buffers (host->buffer, e.g. the MoE's selection bias), the
 * AdamW state, and in its metadata the step, epoch (and for a checkpoint
 * a signal made mid-epoch, the step within it and its loss so far),
 * early-stopping state, both RNG states and the length of metrics.jsonl, so a resumed run
 * continues exactly where the saved one was, plus the run's bookkeeping
 * across invocations (seconds, timed steps, arena peak, invocations) for
 * summary.json, and what best.safetensors also says (alphast's version,
 * the genes, the config). Written atomically. Everything read back is
 * range-checked against the rest of the file, the run directory, the data's
 * genes and the model: a damaged or edited checkpoint is refused naming the
 * file and the field. */
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train_ckpt.h"

#define CKPT_FORMAT "alphast-checkpoint-1"
#define CKPT_FILE "checkpoint.safetensors"

static void rng_encode(const ast_rng *r, char *buf, size_t n)
{
    uint32_t spare;
    memcpy(&spare, &r->spare, sizeof spare);
    snprintf(buf, n, "%016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %016" PRIx64 " %d %08" PRIx32, r->s[0], r->s[1],
             r->s[2], r->s[3], r->has_spare, spare);
}

/* 0 if s is a whole encoded state: the four words, not all zero (the
 * generator's fixed point), has_spare 0 or 1 and a finite spare. */
static int rng_decode(const char *s, ast_rng *r)
{
    uint32_t spare;
    int used = -1;
    if (!s || sscanf(s, "%" SCNx64 " %" SCNx64 " %" SCNx64 " %" SCNx64 " %d %" SCNx32 "%n", &r->s[0], &r->s[1],
                     &r->s[2], &r->s[3], &r->has_spare, &spare, &used) != 6 || s[used])
        return -1;
    memcpy(&r->spare, &spare, sizeof spare);
    int zero = !(r->s[0] | r->s[1] | r->s[2] | r->s[3]);
    return zero || (r->has_spare != 0 && r->has_spare != 1) || !isfinite(r->spare) ? -1 : 0;
}

float *train_moments_to_host(ast_adamw *o)
{
    const ast_backend *b = ast_params_backend(o->params);
    int n = ast_params_count(o->params);
    float *host = ast_xmalloc(((size_t)moment_kinds(o) * (size_t)o->count + 1) * sizeof *host), *at = host;
    for (int k = 0; k < moment_kinds(o); k++)
        for (int i = 0; i < n; i++) {
            if (!o->len[i]) continue;
            b->to_host(b, at, moments(o, k)[i], (size_t)o->len[i] * sizeof *at);
            at += o->len[i];
        }
    return host;
}

/* The checkpoint's metadata: the trainer's counters, early-stopping state,
 * timings and both RNG states, as text (safetensors metadata is strings). */
static void add_metadata(ast_trainer *t, ast_st_writer *w)
{
    char buf[256];
    ast_st_writer_metadata(w, "format", CKPT_FORMAT);
    for (const char *const *kv = t->meta; kv[0]; kv += 2) ast_st_writer_metadata(w, kv[0], kv[1]);
#define META(key, fmt, value) (snprintf(buf, sizeof buf, fmt, value), ast_st_writer_metadata(w, key, buf))
    META("step", "%lld", (long long)t->step);
    META("epoch", "%d", t->epoch);
    META("epoch_step", "%d", t->epoch_step);
    META("epoch_loss_sum", "%.17g", t->epoch_loss_sum);
    META("optimizer_step", "%lld", (long long)t->opt->step);
    META("best_val", "%.17g", t->best_val);
    META("best_crit", "%.17g", t->best_crit);
    META("best_score", "%.17g", t->best_score);
    META("last_score", "%.17g", t->last_score);
    META("best_epoch", "%d", t->best_epoch);
    META("bad_epochs", "%d", t->bad_epochs);
    META("last_val", "%.17g", t->last_val);
    META("last_train", "%.17g", t->last_train);
    META("metrics_bytes", "%ld", t->metrics ? ftell(t->metrics) : 0L);
    META("seconds", "%.17g", ast_trainer_run_seconds(t));
    META("timed_steps", "%lld", (long long)(t->prior_timed_steps + (t->run_start > 0 ? t->step - t->first_step : 0)));
    size_t peak = ast_ctx_arena_peak(t->ctx);
    META("peak_arena_bytes", "%zu", peak > t->prior_peak_arena ? peak : t->prior_peak_arena);
    META("invocations", "%d", t->invocations);
    if (t->ranks.sharded) {
        META(CKPT_SHARDING, "%s", "zero1");
        META(CKPT_SHARD_RANKS, "%d", t->ranks.size);
    }
#undef META
    rng_encode(t->drawn_ahead ? &t->rng_before_ahead : &t->data_rng, buf, sizeof buf);
    ast_st_writer_metadata(w, "data_rng", buf);
    rng_encode(ast_ctx_rng(t->ctx), buf, sizeof buf);
    ast_st_writer_metadata(w, "ctx_rng", buf);
}

int ast_trainer_save(ast_trainer *t, ast_error *e)
{
    if (t->ranks.sharded && train_shards_save(t, e) < 0) return -1;
    if (t->ranks.rank > 0) return 0; /* rank 0 writes the rest, the same on every rank */
    ast_params *p = ast_model_params(t->model);
    int n = ast_params_count(p);
    ast_st_writer *w = ast_st_writer_new();
    char **names = ast_xcalloc((size_t)n * 3, sizeof *names);
    /* Everything the file holds is staged on the host first: the
     * parameters and the AdamW moments live in the backend's memory. */
    float *host = ast_params_host_copy(p), *at = host;
    for (int i = 0; i < n + ast_params_n_buffers(p); i++) {
        ast_tensor *x = i < n ? ast_params_at(p, i) : ast_params_buffer_at(p, i - n);
        ast_st_writer_add(w, x->name, AST_ST_F32, x->ndim, x->shape, at);
        at += x->size;
    }
    float *staged = t->ranks.sharded ? NULL : train_moments_to_host(t->opt);
    at = staged;
    for (int k = 0; k < 3 && staged; k++)
        for (int i = 0; i < n && moments(t->opt, k)[i]; i++) {
            ast_tensor *x = ast_params_at(p, i);
            size_t len = strlen(moment_names[k]) + strlen(x->name) + 1;
            names[k * n + i] = ast_xmalloc(len);
            snprintf(names[k * n + i], len, "%s%s", moment_names[k], x->name);
            ast_st_writer_add(w, names[k * n + i], AST_ST_F32, x->ndim, x->shape, at);
            at += x->size;
        }
    add_metadata(t, w);
    char path[4096];
    int rc = ast_st_writer_write(w, ast_trainer_file(t, CKPT_FILE, path, sizeof path), e);
    if (rc == 0 && t->ranks.sharded) train_shards_prune(t);
    ast_st_writer_free(w);
    for (int i = 0; i < 3 * n; i++) free(names[i]);
    free(names), free(host), free(staged);
    return rc;
}

/* The refusal of a value read back: the file, the field, what it holds,
 * what it must hold and the fix. value NULL: the field is missing. */
static int bad_field(const ast_st_file *f, const char *key, const char *value, const char *want, ast_error *e)
{
    ast_error_set(e, "%s: checkpoint field '%s' is %s%s%s, but %s; the checkpoint is damaged, edited or not an "
                  "alphast checkpoint of this version: restore it, or start over (alphast-run train --fresh, or a "
                  "new run directory)", ast_st_path(f), key, value ? "'" : "", value ? value : "missing",
                  value ? "'" : "", want);
    return -1;
}

/* An integer field in [lo, hi] (strtod would take 1e300 and nan). */
static int meta_int(const ast_st_file *f, const char *key, int64_t lo, int64_t hi, int64_t *out, ast_error *e)
{
    const char *v = ast_st_metadata(f, key);
    char want[128], *end = NULL;
    snprintf(want, sizeof want, "it must be an integer in %lld..%lld", (long long)lo, (long long)hi);
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || end == v || *end || errno || x < lo || x > hi) return bad_field(f, key, v, want, e);
    *out = x;
    return 0;
}

/* The bookkeeping fields came later: a checkpoint without one is older, not damaged. */
static int meta_int_opt(const ast_st_file *f, const char *key, int64_t lo, int64_t hi, int64_t def, int64_t *out,
                        ast_error *e)
{
    if (!ast_st_metadata(f, key)) return *out = def, 0;
    return meta_int(f, key, lo, hi, out, e);
}

/* A number in [lo, hi]; NaN only if nan_ok. */
static int meta_num(const ast_st_file *f, const char *key, double lo, double hi, int nan_ok, double *out, ast_error *e)
{
    const char *v = ast_st_metadata(f, key);
    char want[128], *end = NULL;
    snprintf(want, sizeof want, "it must be a number in %g..%g%s", lo, hi, nan_ok ? " or nan" : "");
    double x = v ? strtod(v, &end) : NAN;
    if (!v || end == v || *end || (isnan(x) && !nan_ok) || x < lo || x > hi) return bad_field(f, key, v, want, e);
    *out = x;
    return 0;
}

/* training.select_on's bookkeeping; a checkpoint older than it selected
 * on the loss, best_val. */
static int read_selection(ast_trainer *t, const ast_st_file *f, ast_error *e)
{
    double crit = t->best_val, best = NAN, last = NAN, lo = t->best_epoch < 0 ? INFINITY : -DBL_MAX;
    if ((ast_st_metadata(f, "best_crit") && meta_num(f, "best_crit", lo, t->best_epoch < 0 ? INFINITY : DBL_MAX, 0, &crit, e)) ||
        (ast_st_metadata(f, "best_score") && meta_num(f, "best_score", -DBL_MAX, DBL_MAX, 1, &best, e)) ||
        (ast_st_metadata(f, "last_score") && meta_num(f, "last_score", -DBL_MAX, DBL_MAX, 1, &last, e)))
        return -1;
    t->best_crit = crit, t->best_score = best, t->last_score = last;
    return 0;
}

/* Step, epoch and early stopping, each against the others: every epoch
 * ends with a checkpoint after at least one step, and the best epoch and
 * the bad epochs since add up to the epochs done. */
static int read_progress(ast_trainer *t, const ast_st_file *f, ast_error *e)
{
    int64_t epoch, step, ostep, best_epoch, bad;
    if (meta_int(f, "epoch", 0, INT_MAX - 1, &epoch, e) ||
        meta_int(f, "step", epoch, (epoch + 1) * (int64_t)INT_MAX, &step, e) || /* the epoch under way's too */
        meta_int(f, "optimizer_step", step, step, &ostep, e) || /* one AdamW update per step */
        meta_int(f, "best_epoch", -1, epoch - 1, &best_epoch, e) ||
        meta_int(f, "bad_epochs", epoch - 1 - best_epoch, epoch - 1 - best_epoch, &bad, e))
        return -1;
    /* No best epoch yet: best_val is still its initial +inf. */
    double best, last_val, last_train, best_lo = best_epoch < 0 ? INFINITY : -DBL_MAX;
    if (meta_num(f, "best_val", best_lo, best_epoch < 0 ? INFINITY : DBL_MAX, 0, &best, e) ||
        meta_num(f, "last_val", -INFINITY, INFINITY, 1, &last_val, e) || /* a NaN validation loss is logged */
        meta_num(f, "last_train", -DBL_MAX, DBL_MAX, 0, &last_train, e)) /* a non-finite step stops the run */
        return -1;
    t->step = step, t->epoch = (int)epoch, t->opt->step = ostep;
    t->best_val = best, t->best_epoch = (int)best_epoch, t->bad_epochs = (int)bad;
    t->last_val = last_val, t->last_train = last_train;
    return read_selection(t, f, e);
}

/* Where in its epoch a checkpoint that a signal made mid-epoch stopped
 * (train_stop.h): both 0 at an epoch's end and in checkpoints older than the
 * fields. Each step of the epoch is a step of the run, and the epoch must
 * still have a step to take under this config. */
static int read_epoch_position(ast_trainer *t, const ast_st_file *f, ast_error *e)
{
    int64_t at, most = t->tc.steps_per_epoch - 1;
    double sum = 0.0;
    if (t->step - t->epoch < most) most = t->step - t->epoch;
    if (meta_int_opt(f, "epoch_step", 0, most, 0, &at, e) ||
        (ast_st_metadata(f, "epoch_loss_sum") && meta_num(f, "epoch_loss_sum", -DBL_MAX, DBL_MAX, 0, &sum, e)))
        return -1;
    t->epoch_step = (int)at, t->epoch_loss_sum = sum;
    return 0;
}

static int read_bookkeeping(ast_trainer *t, const ast_st_file *f, ast_error *e)
{
    int64_t timed, peak, calls;
    double seconds = 0.0;
    if ((ast_st_metadata(f, "seconds") && meta_num(f, "seconds", 0.0, 1e12, 0, &seconds, e)) ||
        meta_int_opt(f, "timed_steps", 0, t->step, 0, &timed, e) ||
        meta_int_opt(f, "peak_arena_bytes", 0, INT64_C(1) << 53, 0, &peak, e) ||
        meta_int_opt(f, "invocations", 1, INT_MAX - 1, 1, &calls, e))
        return -1;
    t->prior_seconds = seconds, t->prior_timed_steps = timed;
    t->prior_peak_arena = (size_t)peak, t->invocations = (int)calls;
    return 0;
}

/* metrics_bytes must end a line of metrics.jsonl as it is: larger would
 * extend the log (1e11 made a 100 GB sparse file), mid-line would glue the
 * next line to a fragment. */
static int check_metrics(const ast_trainer *t, const ast_st_file *f, int64_t *bytes, ast_error *e)
{
    char path[4096], want[4300], last = '\n';
    struct stat st;
    ast_trainer_file(t, "metrics.jsonl", path, sizeof path);
    int64_t size = stat(path, &st) ? -1 : (int64_t)st.st_size;
    if (size < 0 && errno != ENOENT) {
        ast_error_set(e, "%s: cannot read: %s", path, strerror(errno));
        return -1;
    }
    if (meta_int(f, "metrics_bytes", 0, INT64_MAX, bytes, e)) return -1;
    if (size < 0 && *bytes > 0) snprintf(want, sizeof want, "%s is missing (restore the run's log)", path);
    else snprintf(want, sizeof want, "%s holds only %lld bytes (restore the run's log)", path, (long long)size);
    if (*bytes > 0 && *bytes > size) return bad_field(f, "metrics_bytes", ast_st_metadata(f, "metrics_bytes"), want, e);
    int fd = *bytes > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        if (pread(fd, &last, 1, (off_t)(*bytes - 1)) != 1) last = 0;
        close(fd);
    }
    if (last != '\n') {
        snprintf(want, sizeof want, "byte %lld of %s ends no line", (long long)*bytes, path);
        return bad_field(f, "metrics_bytes", ast_st_metadata(f, "metrics_bytes"), want, e);
    }
    return 0;
}

/* 1 if `name` is a parameter, a buffer or an AdamW moment of the model. */
static int known_tensor(ast_trainer *t, const char *name)
{
    ast_params *p = ast_model_params(t->model);
    for (int i = 0; i < ast_params_n_buffers(p); i++)
        if (!strcmp(name, ast_params_buffer_at(p, i)->name)) return 1;
    for (int i = 0; i < ast_params_count(p); i++) {
        const char *x = ast_params_at(p, i)->name;
        if (!strcmp(name, x)) return 1;
        for (int k = 0; k < 3; k++) {
            size_t n = strlen(moment_names[k]);
            if (k < moment_kinds(t->opt) && !strncmp(name, moment_names[k], n) && !strcmp(name + n, x)) return 1;
        }
    }
    return 0;
}

/* Every tensor the model needs is read (a missing one fails there); one
 * more means another model: resuming a 2-layer run with a 1-layer config
 * would drop a layer without a word. */
static int check_no_extra(ast_trainer *t, const ast_st_file *f, ast_error *e)
{
    ast_params *p = ast_model_params(t->model);
    int expected = ast_params_count(p) + ast_params_n_buffers(p);
    if (!ast_st_metadata(f, CKPT_SHARDING)) expected += moment_kinds(t->opt) * ast_params_count(p);
    for (int i = 0; ast_st_count(f) != expected && i < ast_st_count(f); i++)
        if (!known_tensor(t, ast_st_name(f, i))) {
            ast_error_set(e, "%s: tensor '%s' belongs to no parameter of this model; the checkpoint was made for "
                          "another model configuration: resume with its config.yaml, or start over "
                          "(alphast-run train --fresh, or a new run directory)", ast_st_path(f), ast_st_name(f, i));
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
    int64_t bytes;
    /* A checkpoint older than the gene list has none, and passes. */
    if (ast_st_check_genes(f, (const char *const *)t->data->genes, t->data->n_genes, e) || read_progress(t, f, e) ||
        read_epoch_position(t, f, e) || read_bookkeeping(t, f, e) || check_metrics(t, f, &bytes, e))
        return -1;
    static const char rng_want[] = "it must be a generator state (4 hex words, not all 0, has_spare 0 or 1, a "
                                   "finite spare)";
    if (rng_decode(ast_st_metadata(f, "data_rng"), &t->data_rng))
        return bad_field(f, "data_rng", ast_st_metadata(f, "data_rng"), rng_want, e);
    t->drawn_ahead = 0; /* a batch drawn ahead came from the stream replaced here */
    if (rng_decode(ast_st_metadata(f, "ctx_rng"), ast_ctx_rng(t->ctx)))
        return bad_field(f, "ctx_rng", ast_st_metadata(f, "ctx_rng"), rng_want, e);
    if (train_moments_load(t, f, e) < 0 || check_no_extra(t, f, e) < 0) return -1;
    char path[4096];
    /* Lines logged after this checkpoint belong to a run that never finished
     * (rank 0's log: the others write none). */
    ast_trainer_file(t, "metrics.jsonl", path, sizeof path);
    if (t->ranks.rank == 0 && truncate(path, (off_t)bytes) && errno != ENOENT) {
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

/* 1 when metrics.jsonl has a line after its first epoch line: the epoch's
 * checkpoint is saved before the next line is logged, so such a log
 * outlived a checkpoint. Lines up to the first epoch's end are an attempt
 * killed before its first checkpoint, which a fresh start overwrites. */
static int logged_past_a_checkpoint(const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    int epochs = 0, past = 0;
    while (f && !past && getline(&line, &cap, f) > 0) {
        past = epochs > 0 && line[0] != '\n';
        epochs += strstr(line, "\"kind\":\"epoch\"") != NULL;
    }
    free(line);
    if (f) fclose(f);
    return past;
}

/* No checkpoint, yet the directory holds what only a run that wrote one
 * leaves (summary.json comes after the last checkpoint): starting over would
 * overwrite its metrics without a word. -1 with e set then, else 0. */
static int check_no_earlier_run(const ast_trainer *t, const char *ckpt, ast_error *e)
{
    char path[4096];
    if (access(ast_trainer_file(t, "summary.json", path, sizeof path), F_OK) &&
        !logged_past_a_checkpoint(ast_trainer_file(t, "metrics.jsonl", path, sizeof path)))
        return 0;
    ast_error_set(e, "%s is missing, but %s is from a run that trained here: starting over would overwrite its "
                     "metrics; put the checkpoint back, start over with --fresh, or train into another --out",
                  ckpt, path);
    return -1;
}

int ast_trainer_resume(ast_trainer *t, ast_error *e)
{
    char path[4096];
    ast_trainer_file(t, CKPT_FILE, path, sizeof path);
    if (access(path, F_OK)) return check_no_earlier_run(t, path, e);
    return ast_trainer_load(t, path, e) < 0 ? -1 : 1;
}
