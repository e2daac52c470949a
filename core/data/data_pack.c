/* A dataset as named flat arrays, and back with every size and index
 * checked: the reader child's answer and the cache file are both outside
 * this process's control (a crashed child, a damaged or stale file). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_pack.h"

_Static_assert(sizeof(int) == 4, "int arrays are stored as I32");

/* The sizes in the "dims" part. */
enum { D_CELLS, D_GENES, D_SLICES, D_TYPES, D_COORDS, D_OBS, D_HAS_TYPES, D_HAS_NAMES, D_VAR, N_DIMS };

void ast_parts_add(ast_parts *p, const char *name, ast_st_dtype dtype, int64_t n, void *data, int owned)
{
    if (p->n == p->cap) p->v = ast_xrealloc(p->v, (size_t)(p->cap = p->cap ? 2 * p->cap : 16) * sizeof *p->v);
    ast_part *q = &p->v[p->n++];
    snprintf(q->name, sizeof q->name, "%s", name);
    q->dtype = dtype, q->n = n, q->data = data, q->owned = owned;
}

const ast_part *ast_parts_find(const ast_parts *p, const char *name)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->v[i].name, name)) return &p->v[i];
    return NULL;
}

void ast_parts_free(ast_parts *p)
{
    for (int i = 0; i < p->n; i++)
        if (p->v[i].owned) free(p->v[i].data);
    free(p->v);
    memset(p, 0, sizeof *p);
}

/* ---- packing ----------------------------------------------------------------- */

/* n strings as one owned block, each with its NUL. */
static void add_names(ast_parts *p, const char *name, char *const *s, int64_t n)
{
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total += strlen(s[i]) + 1;
    char *block = ast_xmalloc(total ? total : 1), *q = block;
    for (int64_t i = 0; i < n; i++) q = stpcpy(q, s[i]) + 1;
    ast_parts_add(p, name, AST_ST_U8, (int64_t)total, block, 1);
}

/* Column j of obs or var (`frame`), of `cells` rows. */
static void pack_column(const char *frame, const ast_obs_column *c, int j, int64_t cells, ast_parts *p)
{
    char key[AST_PART_NAME];
    snprintf(key, sizeof key, "%s.%d.name", frame, j);
    add_names(p, key, &c->name, 1);
    if (c->kind == AST_OBS_NUMBER) {
        snprintf(key, sizeof key, "%s.%d.numbers", frame, j);
        ast_parts_add(p, key, AST_ST_F64, cells, c->numbers, 0);
        snprintf(key, sizeof key, "%s.%d.stored", frame, j);
        ast_parts_add(p, key, AST_ST_I32, 1, (void *)&c->stored, 0);
        return;
    }
    snprintf(key, sizeof key, "%s.%d.codes", frame, j);
    ast_parts_add(p, key, AST_ST_I32, cells, c->codes, 0);
    snprintf(key, sizeof key, "%s.%d.categories", frame, j);
    add_names(p, key, c->categories, c->n_categories);
    snprintf(key, sizeof key, "%s.%d.colors", frame, j);
    if (c->colors) add_names(p, key, c->colors, c->n_categories);
}

void ast_data_pack(const ast_dataset *d, ast_parts *p)
{
    int64_t *dims = ast_xmalloc(N_DIMS * sizeof *dims), n = d->n_cells;
    dims[D_CELLS] = n, dims[D_GENES] = d->n_genes, dims[D_SLICES] = d->n_slices, dims[D_TYPES] = d->n_types;
    dims[D_COORDS] = d->coord_dims, dims[D_OBS] = d->n_obs;
    dims[D_HAS_TYPES] = d->cell_type != NULL, dims[D_HAS_NAMES] = d->cell_names != NULL, dims[D_VAR] = d->n_var;
    ast_parts_add(p, "dims", AST_ST_I64, N_DIMS, dims, 1);
    int64_t nnz = d->x.indptr[n], scaled = d->gene_mean ? (int64_t)d->n_slices * d->n_genes : 0;
    ast_parts_add(p, "indptr", AST_ST_I64, n + 1, d->x.indptr, 0);
    ast_parts_add(p, "indices", AST_ST_I32, nnz, d->x.indices, 0);
    ast_parts_add(p, "values", AST_ST_F32, nnz, d->x.values, 0);
    if (scaled) {
        ast_parts_add(p, "gene_mean", AST_ST_F64, scaled, d->gene_mean, 0);
        ast_parts_add(p, "gene_sd", AST_ST_F64, scaled, d->gene_sd, 0);
        ast_parts_add(p, "clip", AST_ST_F32, 1, (void *)&d->clip, 0);
    }
    ast_parts_add(p, "pos", AST_ST_F32, n * 3, d->pos, 0);
    ast_parts_add(p, "slice", AST_ST_I32, n, d->slice, 0);
    if (d->cell_type) ast_parts_add(p, "cell_type", AST_ST_I32, n, d->cell_type, 0);
    add_names(p, "genes", d->genes, d->n_genes);
    add_names(p, "type_names", d->type_names, d->n_types);
    if (d->cell_names) add_names(p, "cell_names", d->cell_names, n);
    for (int j = 0; j < d->n_obs; j++) pack_column("obs", &d->obs[j], j, n, p);
    for (int j = 0; j < d->n_var; j++) pack_column("var", &d->var[j], j, d->n_genes, p);
}

/* ---- unpacking ----------------------------------------------------------------- */

/* The array of part `name` if it has this dtype and n elements: taken
 * over when the parts own it, else copied. NULL otherwise. */
static void *take(ast_parts *p, const char *name, ast_st_dtype dtype, int64_t n)
{
    ast_part *q = (ast_part *)ast_parts_find(p, name);
    if (!q || q->dtype != dtype || q->n != n) return NULL;
    size_t bytes = (size_t)n * ast_st_dtype_size(dtype);
    void *out = q->data;
    if (q->owned) {
        q->owned = 0, q->data = NULL;
        return out ? out : ast_xmalloc(1);
    }
    out = ast_xmalloc(bytes ? bytes : 1);
    if (bytes) memcpy(out, q->data, bytes);
    return out;
}

/* Part `name`'s strings: exactly `want` of them (-1: any number, given in
 * *n), each NUL-terminated. NULL otherwise. */
static char **take_names(const ast_parts *p, const char *name, int64_t want, int64_t *n)
{
    const ast_part *q = ast_parts_find(p, name);
    if (!q || q->dtype != AST_ST_U8 || (q->n && ((const char *)q->data)[q->n - 1])) return NULL;
    const char *s = q->data;
    int64_t count = 0;
    for (int64_t i = 0; i < q->n; i++) count += s[i] == 0;
    if ((want >= 0 && count != want) || count > INT32_MAX) return NULL;
    char **out = ast_xcalloc((size_t)count + 1, sizeof *out);
    for (int64_t i = 0; i < count; i++, s += strlen(s) + 1) out[i] = ast_xstrdup(s);
    if (n) *n = count;
    return out;
}

static int ints_in_range(const int *v, int64_t n, int lo, int hi)
{
    for (int64_t i = 0; i < n; i++)
        if (v[i] < lo || v[i] >= hi) return 0;
    return 1;
}

static int all_finite(const float *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(v[i])) return 0;
    return 1;
}

/* Canonical CSR: offsets from 0 to the number of values, never
 * decreasing; columns inside the matrix and increasing along each row. */
static int csr_ok(const ast_csr *m, int64_t rows, int cols, int64_t nnz)
{
    if (m->indptr[0] != 0 || m->indptr[rows] != nnz) return 0;
    for (int64_t r = 0; r < rows; r++) {
        if (m->indptr[r + 1] < m->indptr[r]) return 0;
        for (int64_t k = m->indptr[r]; k < m->indptr[r + 1]; k++)
            if (m->indices[k] < 0 || m->indices[k] >= cols || (k > m->indptr[r] && m->indices[k] <= m->indices[k - 1]))
                return 0;
    }
    return all_finite(m->values, nnz);
}

static int sd_ok(const double *mean, const double *sd, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(mean[i]) || !(sd[i] > 0) || !isfinite(sd[i])) return 0;
    return 1;
}

/* X, and its z-score when the data were scaled. */
static int unpack_x(ast_parts *p, ast_dataset *d)
{
    const ast_part *v = ast_parts_find(p, "values"), *clip = ast_parts_find(p, "clip");
    int64_t nnz = v ? v->n : -1, scaled = (int64_t)d->n_slices * d->n_genes;
    if (!(d->x.indptr = take(p, "indptr", AST_ST_I64, d->n_cells + 1)) ||
        !(d->x.indices = take(p, "indices", AST_ST_I32, nnz)) || !(d->x.values = take(p, "values", AST_ST_F32, nnz)) ||
        !csr_ok(&d->x, d->n_cells, d->n_genes, nnz))
        return 0;
    if (!clip) return !ast_parts_find(p, "gene_mean");
    if (clip->dtype != AST_ST_F32 || clip->n != 1) return 0;
    memcpy(&d->clip, clip->data, sizeof d->clip); /* a file's tensors need not be aligned */
    if (!(d->clip >= 0)) return 0;
    return (d->gene_mean = take(p, "gene_mean", AST_ST_F64, scaled)) &&
           (d->gene_sd = take(p, "gene_sd", AST_ST_F64, scaled)) && sd_ok(d->gene_mean, d->gene_sd, scaled);
}

/* The sizes, each in its range; the numbers of obs and var columns into
 * columns[2]. */
static int unpack_dims(ast_parts *p, ast_dataset *d, int columns[2])
{
    int64_t *v = take(p, "dims", AST_ST_I64, N_DIMS); /* no genes: positions alone (expression_optional) */
    int ok = v && v[D_CELLS] >= 1 && v[D_CELLS] <= INT32_MAX && v[D_GENES] >= 0 && v[D_GENES] <= INT_MAX && v[D_SLICES] >= 1 &&
             v[D_SLICES] <= INT_MAX && v[D_TYPES] >= 0 && v[D_TYPES] <= INT_MAX &&
             (v[D_COORDS] == 0 || v[D_COORDS] == 2 || v[D_COORDS] == 3) &&
             v[D_OBS] >= 0 && v[D_OBS] <= INT_MAX && v[D_VAR] >= 0 && v[D_VAR] <= INT_MAX &&
             (v[D_HAS_TYPES] == 0 || v[D_HAS_TYPES] == 1) && (v[D_HAS_NAMES] == 0 || v[D_HAS_NAMES] == 1);
    if (ok) {
        d->n_cells = v[D_CELLS], d->n_genes = (int)v[D_GENES], d->n_slices = (int)v[D_SLICES];
        d->n_types = (int)v[D_TYPES], d->coord_dims = (int)v[D_COORDS];
        ok = (!v[D_HAS_TYPES] || (d->cell_type = take(p, "cell_type", AST_ST_I32, d->n_cells))) &&
             (!v[D_HAS_NAMES] || (d->cell_names = take_names(p, "cell_names", d->n_cells, NULL)));
    }
    if (ok) columns[0] = (int)v[D_OBS], columns[1] = (int)v[D_VAR];
    free(v);
    return ok ? 0 : -1;
}

static int unpack_column(ast_parts *p, const char *frame, int j, int64_t cells, ast_obs_column *c)
{
    char key[AST_PART_NAME];
    int64_t n = 0;
    snprintf(key, sizeof key, "%s.%d.name", frame, j);
    char **name = take_names(p, key, 1, NULL);
    if (!name) return 0;
    c->name = name[0];
    free(name);
    snprintf(key, sizeof key, "%s.%d.numbers", frame, j);
    if (ast_parts_find(p, key)) {
        c->kind = AST_OBS_NUMBER;
        if (!(c->numbers = take(p, key, AST_ST_F64, cells))) return 0;
        snprintf(key, sizeof key, "%s.%d.stored", frame, j);
        if (!ast_parts_find(p, key)) return 1; /* a cache from before: floats (0) */
        int *stored = take(p, key, AST_ST_I32, 1);
        int ok = stored && ints_in_range(stored, 1, AST_OBS_FLOATS, AST_OBS_BOOLS + 1);
        if (ok) c->stored = stored[0];
        free(stored);
        return ok;
    }
    c->kind = AST_OBS_CATEGORY;
    snprintf(key, sizeof key, "%s.%d.categories", frame, j);
    if (!(c->categories = take_names(p, key, -1, &n))) return 0;
    c->n_categories = (int)n;
    snprintf(key, sizeof key, "%s.%d.colors", frame, j);
    if (ast_parts_find(p, key) && !(c->colors = take_names(p, key, n, NULL))) return 0;
    snprintf(key, sizeof key, "%s.%d.codes", frame, j);
    return (c->codes = take(p, key, AST_ST_I32, cells)) && ints_in_range(c->codes, cells, -1, c->n_categories);
}

static int unpack_arrays(ast_parts *p, ast_dataset *d)
{
    int64_t n = d->n_cells;
    return unpack_x(p, d) && (d->pos = take(p, "pos", AST_ST_F32, n * 3)) && all_finite(d->pos, n * 3) &&
           (d->slice = take(p, "slice", AST_ST_I32, n)) && ints_in_range(d->slice, n, 0, d->n_slices) &&
           (!d->cell_type || ints_in_range(d->cell_type, n, -1, d->n_types)) &&
           (d->genes = take_names(p, "genes", d->n_genes, NULL)) &&
           (d->type_names = take_names(p, "type_names", d->n_types, NULL));
}

int ast_data_unpack(ast_parts *p, const char *from, ast_dataset *d, ast_error *e)
{
    memset(d, 0, sizeof *d);
    int columns[2], ok = unpack_dims(p, d, columns) == 0 && unpack_arrays(p, d);
    if (ok) d->obs = ast_xcalloc((size_t)columns[0] + 1, sizeof *d->obs);
    for (int j = 0; ok && j < columns[0]; j++) {
        ok = unpack_column(p, "obs", j, d->n_cells, &d->obs[j]);
        d->n_obs = j + 1; /* freed by ast_dataset_free, whole or partial */
    }
    if (ok) d->var = ast_xcalloc((size_t)columns[1] + 1, sizeof *d->var);
    for (int j = 0; ok && j < columns[1]; j++) {
        ok = unpack_column(p, "var", j, d->n_genes, &d->var[j]);
        d->n_var = j + 1;
    }
    if (ok) return 0;
    ast_error_set(e, "%s: missing, misshapen or out-of-range entries", from);
    ast_dataset_free(d);
    return -1;
}
