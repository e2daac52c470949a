/* The files of `alphast-run sample`: CSV, and AnnData whose obs_names and
 * obs columns are the source's, so the cells join back to the data. */
#include <stdlib.h>
#include <string.h>

#include "base/atomic_file.h"
#include "io/h5ad_write.h"
#include "cli.h"
#include "sample_write.h"

typedef struct csv_job {
    const sample_cells *g;
    const ast_dataset *d;
    int with_expr;
} csv_job;

/* 9 significant digits: a float reads back exactly, so the written
 * placement scores as eval scored it (ties of distances included). */
static void csv_coords(FILE *f, const float *p, int dims)
{
    for (int k = 0; k < dims; k++) fprintf(f, ",%.9g", p[k]);
}

static int fill_csv(FILE *f, void *ud)
{
    const csv_job *c = ud;
    const sample_cells *g = c->g;
    int dims = c->d->coord_dims;
    fprintf(f, dims == 2 ? "cell,set,x,y,x_true,y_true" : "cell,set,x,y,z,x_true,y_true,z_true");
    for (int j = 0; c->with_expr && j < g->G; j++) fprintf(f, ",%s", c->d->genes[j]);
    fputc('\n', f);
    for (int64_t r = 0; r < g->n; r++) {
        fprintf(f, "%lld,%lld", (long long)g->cell[r], (long long)g->set[r]);
        csv_coords(f, g->pos + r * 3, dims);
        csv_coords(f, g->pos_true + r * 3, dims);
        for (int j = 0; c->with_expr && j < g->G; j++) fprintf(f, ",%.7g", g->expr[r * g->G + j]);
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

int sample_write_csv(const char *path, const sample_cells *g, const ast_dataset *d, int with_expr, ast_error *e)
{
    csv_job c = {g, d, with_expr};
    return ast_atomic_write(path, fill_csv, &c, e);
}

/* ---- AnnData ------------------------------------------------------------ */

/* The obs of the generated cells: the source's columns, gathered by row,
 * then cell and set. */
typedef struct obs_frame {
    ast_h5ad_column *cols;
    int n;
    char **file_names; /* [n] the columns' names in the file */
    const char **names;
    char **numbered; /* the row numbers as names, when the source has none */
} obs_frame;

/* Rows rows[0..n) of a source column (rows NULL: the first n). */
static ast_h5ad_column gathered(const ast_obs_column *src, const int64_t *rows, int64_t n)
{
    ast_h5ad_column c = {.name = src->name};
    size_t room = (size_t)(n ? n : 1);
    if (src->kind == AST_OBS_NUMBER && src->stored != AST_OBS_FLOATS) { /* as the source stored them */
        int64_t *v = ast_xmalloc(room * sizeof *v);
        for (int64_t r = 0; r < n; r++) v[r] = (int64_t)src->numbers[rows ? rows[r] : r];
        c.kind = src->stored == AST_OBS_INTS ? AST_H5AD_INT : AST_H5AD_BOOL, c.ints = v;
    } else if (src->kind == AST_OBS_NUMBER) {
        double *v = ast_xmalloc(room * sizeof *v);
        for (int64_t r = 0; r < n; r++) v[r] = src->numbers[rows ? rows[r] : r];
        c.kind = AST_H5AD_NUMBER, c.numbers = v;
    } else {
        int *v = ast_xmalloc(room * sizeof *v);
        for (int64_t r = 0; r < n; r++) v[r] = src->codes[rows ? rows[r] : r];
        c.kind = AST_H5AD_CATEGORY, c.codes = v;
        c.categories = (const char *const *)src->categories, c.n_categories = src->n_categories;
        c.colors = (const char *const *)src->colors;
    }
    return c;
}

/* What gathered allocated, for n columns. */
static void gathered_free(ast_h5ad_column *cols, int n)
{
    for (int j = 0; j < n; j++)
        free((void *)cols[j].numbers), free((void *)cols[j].codes), free((void *)cols[j].ints);
}

/* 1 if a column before j, or the index (obs/_index), has the name. */
static int taken(const obs_frame *o, int j, const char *name)
{
    if (!strcmp(name, "_index")) return 1;
    for (int k = 0; k < j; k++)
        if (!strcmp(o->cols[k].name, name)) return 1;
    return 0;
}

/* Column j's name in the file: each column is an HDF5 member of obs, so
 * a '/' (a path there) becomes '_', and a name that is taken gets _2,
 * _3, ... until it is free. */
static const char *file_name(obs_frame *o, int j, const char *want)
{
    size_t room = strlen(want) + 16, len;
    char *name = o->file_names[j] = ast_xmalloc(room);
    snprintf(name, room, "%s", want);
    for (char *c = name; (c = strchr(c, '/'));) *c = '_';
    len = strlen(name);
    for (int k = 2; taken(o, j, name); k++) snprintf(name + len, room - len, "_%d", k);
    return name;
}

/* A source column keeps its name where it can, and says so where not. */
static void name_source_column(obs_frame *o, int j, const char *path)
{
    const char *want = o->cols[j].name, *name = file_name(o, j, want);
    if (strcmp(name, want))
        ast_log(AST_LOG_WARN, "%s: obs column '%s' is written as '%s' (%s)", path, want, name,
                strchr(want, '/') ? "'/' separates HDF5 groups" : "the name is taken");
    o->cols[j].name = name;
}

/* cell and set, or alphast_cell and alphast_set where the source has
 * those names (then _2, ... where it has those too). */
static void own_column(obs_frame *o, int j, const char *name, const int64_t *v)
{
    char prefixed[32];
    snprintf(prefixed, sizeof prefixed, "alphast_%s", name);
    o->cols[j] = (ast_h5ad_column){file_name(o, j, taken(o, j, name) ? prefixed : name), AST_H5AD_INT, .ints = v};
}

static void obs_names(obs_frame *o, const sample_cells *g, const ast_dataset *d)
{
    o->names = ast_xmalloc((size_t)(g->n ? g->n : 1) * sizeof *o->names);
    if (!d->cell_names) o->numbered = ast_xmalloc((size_t)(g->n ? g->n : 1) * sizeof *o->numbered);
    for (int64_t r = 0; r < g->n; r++) {
        if (d->cell_names) {
            o->names[r] = d->cell_names[g->cell[r]];
            continue;
        }
        o->numbered[r] = ast_xmalloc(24);
        snprintf(o->numbered[r], 24, "%lld", (long long)g->cell[r]);
        o->names[r] = o->numbered[r];
    }
}

static void obs_frame_init(obs_frame *o, const sample_cells *g, const ast_dataset *d, const char *path)
{
    *o = (obs_frame){.n = d->n_obs + 2};
    o->cols = ast_xcalloc((size_t)o->n, sizeof *o->cols);
    o->file_names = ast_xcalloc((size_t)o->n, sizeof *o->file_names);
    for (int j = 0; j < d->n_obs; j++) {
        o->cols[j] = gathered(&d->obs[j], g->cell, g->n);
        name_source_column(o, j, path);
    }
    own_column(o, d->n_obs, "cell", g->cell);
    own_column(o, d->n_obs + 1, "set", g->set);
    obs_names(o, g, d);
}

static void obs_frame_free(obs_frame *o, int64_t n_cells)
{
    gathered_free(o->cols, o->n - 2);
    for (int j = 0; j < o->n; j++) free(o->file_names[j]);
    for (int64_t r = 0; o->numbered && r < n_cells; r++) free(o->numbered[r]);
    free(o->cols), free(o->file_names), free(o->names), free(o->numbered);
}

/* The first `dims` of each row's 3 coordinates. */
static float *coords(const float *p, int64_t n, int dims)
{
    float *v = ast_xmalloc((size_t)(n ? n : 1) * dims * sizeof *v);
    for (int64_t r = 0; r < n; r++) memcpy(v + r * dims, p + r * 3, (size_t)dims * sizeof *v);
    return v;
}

int sample_write_h5ad(const char *path, const sample_cells *g, const ast_dataset *d, const char *const *provenance,
                      ast_error *e)
{
    obs_frame o;
    obs_frame_init(&o, g, d, path);
    int dims = d->coord_dims;
    ast_h5ad_column *var = ast_xcalloc((size_t)d->n_var + 1, sizeof *var);
    for (int j = 0; j < d->n_var; j++) var[j] = gathered(&d->var[j], NULL, d->n_genes);
    ast_h5ad_table t = {.n_cells = g->n, .n_genes = g->G, .X = g->expr, .genes = (const char *const *)d->genes,
                        .cells = o.names, .n_obs = o.n, .obs = o.cols, .n_var = d->n_var, .var = var,
                        .uns_group = "alphast", .uns = provenance};
    t.obsm[t.n_obsm++] = (ast_h5ad_matrix){g->pos_key ? g->pos_key : "spatial", coords(g->pos, g->n, dims), dims};
    if (g->pos_true) t.obsm[t.n_obsm++] = (ast_h5ad_matrix){"spatial_true", coords(g->pos_true, g->n, dims), dims};
    if (g->pos_aligned)
        t.obsm[t.n_obsm++] = (ast_h5ad_matrix){"spatial_aligned", coords(g->pos_aligned, g->n, dims), dims};
    int rc = ast_h5ad_write(path, &t, e);
    for (int k = 0; k < t.n_obsm; k++) free((void *)t.obsm[k].data);
    gathered_free(var, d->n_var);
    free(var);
    obs_frame_free(&o, g->n);
    return rc;
}

/* ---- provenance --------------------------------------------------------- */

/* Plain words need no quotes; others are single-quoted, ' as '\''. */
static int plain(const char *w)
{
    if (!*w) return 0;
    for (const char *c = w; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+-@%", *c)) return 0;
    return 1;
}

static size_t append_word(char *out, size_t at, const char *w)
{
    if (at) out[at++] = ' ';
    if (plain(w)) return at + (size_t)sprintf(out + at, "%s", w);
    out[at++] = '\'';
    for (const char *c = w; *c; c++) {
        if (*c == '\'') at += (size_t)sprintf(out + at, "'\\'");
        out[at++] = *c;
    }
    out[at++] = '\'';
    out[at] = 0;
    return at;
}

char *sample_command_line(int argc, char **argv)
{
    size_t cap = sizeof CLI_PROG + 1;
    for (int i = 0; i < argc; i++) cap += 4 * strlen(argv[i]) + 3;
    char *out = ast_xmalloc(cap);
    size_t at = append_word(out, 0, CLI_PROG);
    for (int i = 0; i < argc; i++) at = append_word(out, at, argv[i]);
    return out;
}
