/* The preprocessing cache: a parsed and preprocessed dataset saved as a
 * safetensors file named by a hash of everything that determines it (the
 * input files' identity and the preprocessing options), so repeated runs
 * on a large .h5ad skip parsing. A stale or damaged cache is never trusted:
 * any inconsistency means re-parsing. The name's hash of size and mtime
 * misses an edit that keeps both (`touch -r`), and a cache file can be
 * rewritten valid but different, so the file also records a digest of the
 * source's bytes and its own parts, checked on every load. */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_pack.h"
#include "base/hash.h"

/* Bump when the layout or the preprocessing code changes what is stored. */
/* 2: the readers validate what 1 accepted (negative counts, repeated coordinate columns, truncated
 * gzip, damaged .h5ad sizes), so data cached by 1 is read again.
 * 3: the dataset as parts (data_pack.h): X as sparse rows, the z-score as gene means and
 * deviations, the cell names and obs columns; X already log-normalised is not normalised again.
 * 4: the "digest" metadata (source bytes, then the parts). */
#define CACHE_FORMAT "alphast-data-cache 4"

const char *ast_data_default_cache_dir(char *buf, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(buf, n, "%s/alphast", xdg);
    else if (home && home[0]) snprintf(buf, n, "%s/.cache/alphast", home);
    else return NULL;
    return buf;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    return ast_fnv1a(h, s ? s : "\x01null", (s ? strlen(s) : 5) + 1); /* the NUL separates fields */
}

/* A file is identified by its absolute path, size and modification time. */
static uint64_t hash_file(uint64_t h, const char *path)
{
    char abs[PATH_MAX];
    struct stat st;
    if (!path) return hash_str(h, NULL);
    h = hash_str(h, realpath(path, abs) ? abs : path);
    if (stat(path, &st) == 0) {
        int64_t id[3] = {(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, (int64_t)st.st_mtim.tv_nsec};
        h = ast_fnv1a(h, id, sizeof id);
    }
    return h;
}

static uint64_t cache_key(const char *path, const ast_data_opts *o)
{
    uint64_t h = hash_str(AST_FNV_OFFSET, CACHE_FORMAT);
    h = hash_file(h, path);
    h = hash_file(h, o->coords_file);
    h = hash_str(hash_str(hash_str(h, o->position_key), o->cell_type_key), o->slice_key);
    h = hash_str(h, o->layer && o->layer[0] ? o->layer : NULL);
    h = hash_str(h, o->label_column);
    int flags[5] = {o->genes_by_cells, o->log_normalize, o->scale, o->use_raw, o->positions_optional};
    float values[2] = {o->clip, o->z_spacing};
    h = ast_fnv1a(ast_fnv1a(h, flags, sizeof flags), values, sizeof values);
    h = ast_fnv1a(h, &o->n_genes, sizeof o->n_genes);
    for (int g = 0; g < o->n_genes; g++) h = hash_str(h, o->genes[g]);
    return h;
}

/* FNV-1a of the bytes of the expression file and the coordinate file. */
static int source_hash(const char *path, const ast_data_opts *o, uint64_t *h, ast_error *e)
{
    *h = AST_FNV_OFFSET;
    if (ast_fnv1a_file(path, h, e) < 0) return -1;
    return o->coords_file ? ast_fnv1a_file(o->coords_file, h, e) : 0;
}

/* The digest a cache of these parts made from that source records. */
static void digest_of(uint64_t source, const ast_parts *p, char hex[17])
{
    uint64_t h = source;
    for (int i = 0; i < p->n; i++) {
        const ast_part *v = &p->v[i];
        h = ast_fnv1a(hash_str(h, v->name), &v->n, sizeof v->n);
        h = ast_fnv1a(h, v->data, (size_t)v->n * ast_st_dtype_size(v->dtype));
    }
    snprintf(hex, 17, "%016" PRIx64, h);
}

static int save(const char *file, const ast_dataset *d, uint64_t source, ast_error *e)
{
    ast_st_writer *w = ast_st_writer_new();
    ast_parts p = {0};
    char digest[17];
    ast_data_pack(d, &p);
    for (int i = 0; i < p.n; i++) ast_st_writer_add(w, p.v[i].name, p.v[i].dtype, 1, &p.v[i].n, p.v[i].data);
    digest_of(source, &p, digest);
    ast_st_writer_metadata(w, "format", CACHE_FORMAT);
    ast_st_writer_metadata(w, "digest", digest);
    int rc = ast_st_writer_write(w, file, e);
    ast_st_writer_free(w);
    ast_parts_free(&p);
    return rc;
}

/* Fills d from the cache file (copies: the file's buffer is freed after);
 * 0, or -1 (d left empty) on any inconsistency, with why in e. */
static int restore(const ast_st_file *f, const char *path, uint64_t source, ast_dataset *d, ast_error *e)
{
    const char *fmt = ast_st_metadata(f, "format"), *recorded = ast_st_metadata(f, "digest");
    ast_parts p = {0};
    char digest[17];
    memset(d, 0, sizeof *d);
    int ok = fmt && !strcmp(fmt, CACHE_FORMAT);
    for (int i = 0; ok && i < ast_st_count(f); i++) {
        ok = ast_st_ndim(f, i) == 1;
        ast_parts_add(&p, ast_st_name(f, i), ast_st_dtype_of(f, i), ok ? ast_st_shape(f, i)[0] : 0,
                      (void *)ast_st_data(f, i), 0);
    }
    if (ok) digest_of(source, &p, digest);
    if (!ok) ast_error_set(e, "%s: not in format '%s'", ast_st_path(f), CACHE_FORMAT);
    else if (!(ok = recorded && !strcmp(recorded, digest)))
        ast_error_set(e, "%s: made from other contents of %s, or changed since it was written", ast_st_path(f), path);
    else if ((ok = ast_data_unpack(&p, ast_st_path(f), d, e) == 0)) d->source = ast_xstrdup(path);
    ast_parts_free(&p);
    return ok ? 0 : -1;
}

static int parse(const char *path, const ast_data_opts *o, ast_dataset *d, ast_error *e)
{
    return ast_data_read(path, o, d, e) < 0 || ast_data_preprocess(d, o, e) < 0 ? -1 : 0;
}

/* Whoever can write the cache directory can plant a valid cache (the digest
 * is no secret) that runs would train on: a directory that group or others
 * may write is used only when sticky (/tmp), where only our own files are
 * read. Missing, it is created private. */
static int cache_dir_private(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) || !(st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_mode & S_ISVTX)) return 1;
    ast_log(AST_LOG_WARN, "data.cache_dir %s is writable by %s, who could plant preprocessing that runs train on; "
            "not using it (chmod go-w '%s', or choose a private directory)", dir,
            st.st_mode & S_IWOTH ? "every user" : "its group", dir);
    return 0;
}

static int make_private_dir(const char *dir, ast_error *e)
{
    struct stat st;
    int fresh = stat(dir, &st) != 0;
    if (ast_make_dirs(dir, e) < 0) return -1;
    if (fresh) chmod(dir, 0700);
    return 0;
}

/* A cache file found at `file`, if it is ours and holds this source's data. */
static int load_cached(const char *file, const char *path, uint64_t source, ast_dataset *d)
{
    struct stat st;
    ast_error why;
    if (stat(file, &st)) return 0;
    if (st.st_uid != geteuid()) {
        ast_log(AST_LOG_WARN, "ignoring the preprocessing cache %s: another user's file; re-parsing %s", file, path);
        return 0;
    }
    ast_st_file *f = ast_st_open(file, &why);
    int ok = f && restore(f, path, source, d, &why) == 0;
    ast_st_close(f);
    if (ok) ast_log(AST_LOG_INFO, "using cached preprocessing from %s", file);
    else ast_log(AST_LOG_WARN, "ignoring a stale or damaged preprocessing cache: %s; re-parsing %s", why.msg, path);
    return ok;
}

/* The dataset from the cache, else parsed (and then cached). */
static int load(const char *path, const ast_data_opts *o, const char *cache_dir, ast_dataset *d, ast_error *e)
{
    if (!cache_dir || !cache_dir_private(cache_dir)) return parse(path, o, d, e);
    char file[PATH_MAX];
    uint64_t source;
    snprintf(file, sizeof file, "%s/%016" PRIx64 ".safetensors", cache_dir, cache_key(path, o));
    if (source_hash(path, o, &source, e) < 0) return -1;
    if (load_cached(file, path, source, d)) return 0;
    if (parse(path, o, d, e) < 0) return -1;
    ast_error why;
    if (make_private_dir(cache_dir, &why) < 0 || save(file, d, source, &why) < 0)
        ast_log(AST_LOG_WARN, "cannot write the preprocessing cache (%s); data.cache_dir: null turns it off", why.msg);
    return 0;
}

int ast_data_load(const char *path, const ast_data_opts *o, const char *cache_dir, ast_dataset *d, ast_error *e)
{
    if (load(path, o, cache_dir, d, e) < 0) return -1;
    if (ast_data_check_sections(d, o, e) == 0) return 0;
    ast_dataset_free(d);
    return -1;
}
