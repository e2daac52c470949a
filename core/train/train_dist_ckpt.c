/* The AdamW state in checkpoints (train_ckpt.h). Whole, it is in
 * checkpoint.safetensors: a run of one process or with replicated state
 * writes it there, and any run resumes from it (a ZeRO-1 rank takes its
 * part). Split over R ranks (ZeRO-1), rank r writes its part to
 *   checkpoint.shards/step-S.rank-r-of-R.safetensors
 * and, once every rank has, rank 0 writes the marker
 *   checkpoint.shards/step-S.complete
 * that says the set of step S is whole, then checkpoint.safetensors, which
 * names the split; the sets of other steps go after that. Each file is
 * written atomically and the previous set stays until the new
 * checkpoint.safetensors is in place, so a run killed at any moment
 * resumes from one whole checkpoint. Only the same number of ranks can
 * resume a split state; each rank checks that its file is its part of the
 * set of the checkpoint's step. */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/atomic_file.h"
#include "train/train_dist.h"
#include "train_ckpt.h"

#define SHARD_DIR "checkpoint.shards"
#define SHARD_FORMAT "alphast-optimizer-shard-1"

static const char *shard_file(const ast_trainer *t, int64_t step, char *buf, size_t n)
{
    snprintf(buf, n, "%s/" SHARD_DIR "/step-%" PRId64 ".rank-%d-of-%d.safetensors", t->dir, step, t->ranks.rank,
             t->ranks.size);
    return buf;
}

static const char *marker_file(const ast_trainer *t, int64_t step, char *buf, size_t n)
{
    snprintf(buf, n, "%s/" SHARD_DIR "/step-%" PRId64 ".complete", t->dir, step);
    return buf;
}

/* What the marker of step `step` holds. */
static void marker_text(const ast_trainer *t, int64_t step, char *buf, size_t n)
{
    snprintf(buf, n, "{\"step\": %" PRId64 ", \"ranks\": %d, \"parameters\": %" PRId64 "}\n", step, t->ranks.size,
             t->ranks.n_grad);
}

/* The metadata of this rank's part: what makes it the part it is. */
typedef struct shard_meta {
    const char *key;
    char value[32];
} shard_meta;

enum { N_SHARD_META = 6 };

static void describe_shard(const ast_trainer *t, int64_t step, shard_meta m[N_SHARD_META])
{
    const ast_adamw *o = t->opt;
    const char *keys[N_SHARD_META] = {"step", "optimizer_step", "rank", "ranks", "first", "count"};
    int64_t values[N_SHARD_META] = {step, o->step, t->ranks.rank, t->ranks.size, o->first, o->count};
    for (int k = 0; k < N_SHARD_META; k++) {
        m[k].key = keys[k];
        snprintf(m[k].value, sizeof m[k].value, "%" PRId64, values[k]);
    }
}

/* The second moments are averages of squares: a negative one (the reader
 * already refuses non-finite values) would make AdamW's sqrt NaN. */
static int check_moment(const ast_st_file *f, const char *name, const float *v, int64_t n, ast_error *e)
{
    for (int64_t j = 0; j < n; j++)
        if (v[j] < 0.0f) {
            ast_error_set(e, "%s: tensor '%s' holds %g at element %lld, but a second moment is never negative; the "
                          "checkpoint is damaged: restore it, or start over (alphast-run train --fresh, or a new run "
                          "directory)", ast_st_path(f), name, (double)v[j], (long long)j);
            return -1;
        }
    return 0;
}

static char *moment_name(int k, const char *param)
{
    size_t n = strlen(moment_names[k]) + strlen(param) + 1;
    char *name = ast_xmalloc(n);
    snprintf(name, n, "%s%s", moment_names[k], param);
    return name;
}

static int write_shard(ast_trainer *t, ast_error *e)
{
    ast_adamw *o = t->opt;
    ast_params *p = ast_model_params(t->model);
    int n = ast_params_count(p);
    ast_st_writer *w = ast_st_writer_new();
    char **names = ast_xcalloc((size_t)n * 3, sizeof *names), path[4200];
    float *staged = train_moments_to_host(o), *at = staged; /* the moments live beside the parameters */
    for (int k = 0; k < moment_kinds(o); k++)
        for (int i = 0; i < n; i++)
            if (o->len[i]) {
                names[k * n + i] = moment_name(k, ast_params_at(p, i)->name);
                ast_st_writer_add(w, names[k * n + i], AST_ST_F32, 1, &o->len[i], at);
                at += o->len[i];
            }
    shard_meta m[N_SHARD_META];
    describe_shard(t, t->step, m);
    ast_st_writer_metadata(w, "format", SHARD_FORMAT);
    for (int k = 0; k < N_SHARD_META; k++) ast_st_writer_metadata(w, m[k].key, m[k].value);
    int rc = ast_st_writer_write(w, shard_file(t, t->step, path, sizeof path), e);
    ast_st_writer_free(w);
    for (int i = 0; i < 3 * n; i++) free(names[i]);
    free(names), free(staged);
    return rc;
}

int train_shards_save(ast_trainer *t, ast_error *e)
{
    char dir[4200], path[4200], text[160];
    int rc = ast_make_dirs(ast_trainer_file(t, SHARD_DIR, dir, sizeof dir), e);
    if (rc == 0) rc = write_shard(t, e);
    if (!ast_dist_all(rc == 0)) {
        if (rc == 0)
            ast_error_set(e, "%s: another rank could not write its part of the checkpoint of step %" PRId64 " (its "
                          "message says why); the last whole checkpoint stays", dir, t->step);
        return -1;
    }
    if (t->ranks.rank > 0) return 0;
    marker_text(t, t->step, text, sizeof text);
    return ast_atomic_write_bytes(marker_file(t, t->step, path, sizeof path), text, strlen(text), e);
}

/* Whether `name` is a file of the set checkpoint.safetensors now names. */
static int in_current_set(const ast_trainer *t, const char *name)
{
    char want[64];
    int64_t step;
    int rank, ranks, used = 0;
    snprintf(want, sizeof want, "step-%" PRId64 ".complete", t->step);
    if (!strcmp(name, want)) return 1;
    return sscanf(name, "step-%" SCNd64 ".rank-%d-of-%d.safetensors%n", &step, &rank, &ranks, &used) == 3 &&
           !name[used] && step == t->step && ranks == t->ranks.size;
}

void train_shards_prune(ast_trainer *t)
{
    char dir[4200], path[4600];
    DIR *d = opendir(ast_trainer_file(t, SHARD_DIR, dir, sizeof dir));
    for (struct dirent *x; d && (x = readdir(d));) {
        /* Other steps' sets, other rank counts' (a run started over) and temporaries a killed write left. */
        if (!strncmp(x->d_name, "step-", 5) && !in_current_set(t, x->d_name)) {
            snprintf(path, sizeof path, "%s/%s", dir, x->d_name);
            unlink(path); /* what stays costs disk, never correctness */
        }
    }
    if (d) closedir(d);
}

/* The state whole in f: every moment of every parameter is read and
 * checked (on every rank, so all refuse a damaged file alike); a rank
 * keeps its part. */
static int load_whole(ast_trainer *t, const ast_st_file *f, ast_error *e)
{
    ast_adamw *o = t->opt;
    ast_params *p = ast_model_params(t->model);
    float *tmp = ast_xmalloc(((size_t)ast_params_numel(p) + 1) * sizeof *tmp);
    const ast_backend *b = ast_params_backend(p); /* the moments live beside the parameters */
    int rc = 0;
    for (int k = 0; rc == 0 && k < moment_kinds(o); k++)
        for (int i = 0; rc == 0 && i < ast_params_count(p); i++) {
            ast_tensor *x = ast_params_at(p, i);
            char *name = moment_name(k, x->name);
            rc = ast_st_read_f32(f, name, x->ndim, x->shape, tmp, e);
            if (rc == 0 && k > 0) rc = check_moment(f, name, tmp, x->size, e);
            if (rc == 0 && o->len[i])
                b->to_backend(b, moments(o, k)[i], tmp + o->lo[i], (size_t)o->len[i] * sizeof *tmp);
            free(name);
        }
    free(tmp);
    return rc;
}

static int refuse_split(const ast_trainer *t, const ast_st_file *f, const char *sharding, const char *ranks,
                        ast_error *e)
{
    ast_error_set(e, "%s: its AdamW state is split over %s ranks (%s: %s), but this run has %d rank%s%s: resume it "
                  "as it was run (mpirun -np %s alphast-run train, training.optimizer_sharding: zero1), or start "
                  "over (alphast-run train --fresh, or a new run directory)", ast_st_path(f), ranks ? ranks : "?",
                  CKPT_SHARDING, sharding, t->ranks.size, t->ranks.size == 1 ? "" : "s",
                  t->ranks.size > 1 && !t->ranks.sharded ? " with replicated state" : "", ranks ? ranks : "R");
    return -1;
}

/* The marker of the checkpoint's step must be there and say what this
 * run's split is. */
static int check_marker(const ast_trainer *t, const ast_st_file *f, ast_error *e)
{
    char path[4200], want[160], got[160] = "";
    marker_text(t, t->step, want, sizeof want);
    FILE *m = ast_fopen_regular(marker_file(t, t->step, path, sizeof path), NULL);
    size_t n = m ? fread(got, 1, sizeof got - 1, m) : 0;
    got[n] = 0;
    if (m) fclose(m);
    if (m && !strcmp(got, want)) return 0;
    ast_error_set(e, "%s names the AdamW state of step %" PRId64 " split over %d ranks, but %s %s: the set is not "
                  "whole; restore the run directory's %s/ as it was, or start over (alphast-run train --fresh, or a "
                  "new run directory)", ast_st_path(f), t->step, t->ranks.size, path,
                  m ? "says otherwise" : "is missing", SHARD_DIR);
    return -1;
}

/* This rank's file: its metadata must be this rank's part of the set, and
 * it must hold the moments of that part and nothing else. Each is read and
 * checked on the host, then copied beside the parameters. */
static int read_shard(ast_trainer *t, const ast_st_file *s, ast_error *e)
{
    ast_adamw *o = t->opt;
    ast_params *p = ast_model_params(t->model);
    shard_meta m[N_SHARD_META];
    describe_shard(t, t->step, m);
    const char *fmt = ast_st_metadata(s, "format");
    for (int k = -1; k < N_SHARD_META; k++) {
        const char *key = k < 0 ? "format" : m[k].key, *want = k < 0 ? SHARD_FORMAT : m[k].value;
        const char *got = ast_st_metadata(s, key);
        if (got && !strcmp(got, want)) continue;
        ast_error_set(e, "%s: field '%s' is %s%s%s, but this run's part of the checkpoint of step %" PRId64 " has "
                      "'%s'%s; restore the run directory as it was, or start over (alphast-run train --fresh)",
                      ast_st_path(s), key, got ? "'" : "", got ? got : "missing", got ? "'" : "", t->step, want,
                      fmt && strcmp(fmt, SHARD_FORMAT) ? " (not an alphast optimizer shard)" : "");
        return -1;
    }
    int expected = 0, rc = 0;
    const ast_backend *b = ast_params_backend(p);
    float *tmp = ast_xmalloc(((size_t)o->count + 1) * sizeof *tmp);
    for (int k = 0; rc == 0 && k < moment_kinds(o); k++)
        for (int i = 0; rc == 0 && i < ast_params_count(p); i++) {
            if (!o->len[i]) continue;
            char *name = moment_name(k, ast_params_at(p, i)->name);
            rc = ast_st_read_f32(s, name, 1, &o->len[i], tmp, e);
            if (rc == 0 && k > 0) rc = check_moment(s, name, tmp, o->len[i], e);
            if (rc == 0) b->to_backend(b, moments(o, k)[i], tmp, (size_t)o->len[i] * sizeof *tmp);
            free(name);
            expected++;
        }
    free(tmp);
    if (rc == 0 && ast_st_count(s) != expected) {
        ast_error_set(e, "%s: holds %d tensors, but this rank's part of the AdamW state is %d; restore the run "
                      "directory as it was, or start over (alphast-run train --fresh)", ast_st_path(s),
                      ast_st_count(s), expected);
        rc = -1;
    }
    return rc;
}

int train_moments_load(ast_trainer *t, const ast_st_file *f, ast_error *e)
{
    const char *sharding = ast_st_metadata(f, CKPT_SHARDING), *ranks = ast_st_metadata(f, CKPT_SHARD_RANKS);
    if (!sharding) return load_whole(t, f, e);
    char mine[16], path[4200];
    snprintf(mine, sizeof mine, "%d", t->ranks.size);
    if (strcmp(sharding, "zero1") || !ranks || strcmp(ranks, mine) || !t->ranks.sharded)
        return refuse_split(t, f, sharding, ranks, e);
    if (check_marker(t, f, e) < 0) return -1;
    ast_st_file *s = ast_st_open(shard_file(t, t->step, path, sizeof path), e);
    int rc = s ? read_shard(t, s, e) : -1;
    ast_st_close(s);
    /* Each rank reads its own file: all stop together when one cannot. */
    if (!ast_dist_all(rc == 0) && rc == 0) {
        ast_error_set(e, "%s: another rank could not read its part of the AdamW state (its message says why)",
                      ast_st_path(f));
        rc = -1;
    }
    return rc;
}
