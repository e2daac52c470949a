/* Preprocessing of docs/model.md §8.2: gene alignment, library-size normalisation to
 * 1e4, log1p, per-gene z-score (ddof 1, std 0 -> 1) clipped at +-clip, all
 * per slice; 2-D slices lifted to 3-D; positions centred per slice.
 *
 * X stays sparse throughout: normalisation and log1p keep zeros zero, and
 * the z-score, which does not, is kept as per-slice gene means and
 * deviations that ast_data_row applies to one row at a time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_csr.h"

void ast_data_opts_default(ast_data_opts *o)
{
    memset(o, 0, sizeof *o);
    o->position_key = "spatial";
    o->detect_sections = 1;
    o->log_normalize = 1;
    o->scale = 1;
    o->clip = 10.0f;
    o->z_spacing = 1.0f;
}

typedef struct name_idx {
    const char *name;
    int idx;
} name_idx;

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const name_idx *)a)->name, ((const name_idx *)b)->name);
}

/* For each wanted gene its column in the data, or -1; the number found. */
static int gene_columns(const ast_dataset *d, const char *const *want, int n_want, int *col)
{
    name_idx *have = ast_xmalloc((size_t)d->n_genes * sizeof *have);
    for (int g = 0; g < d->n_genes; g++) have[g] = (name_idx){d->genes[g], g};
    qsort(have, (size_t)d->n_genes, sizeof *have, cmp_name);
    int found = 0;
    for (int j = 0; j < n_want; j++) {
        name_idx key = {want[j], 0}, *hit = bsearch(&key, have, (size_t)d->n_genes, sizeof *have, cmp_name);
        col[j] = hit ? hit->idx : -1;
        found += hit != NULL;
    }
    free(have);
    return found;
}

/* A var column's rows in the order col gives (-1: an absent gene, whose
 * value is missing; integers and booleans with one become floats, NaN). */
static void reorder_rows(ast_obs_column *c, const int *col, int n)
{
    if (c->kind == AST_OBS_NUMBER) {
        double *v = ast_xmalloc((size_t)n * sizeof *v);
        for (int j = 0; j < n; j++) {
            v[j] = col[j] >= 0 ? c->numbers[col[j]] : NAN;
            if (col[j] < 0) c->stored = AST_OBS_FLOATS;
        }
        free(c->numbers), c->numbers = v;
        return;
    }
    int *v = ast_xmalloc((size_t)n * sizeof *v);
    for (int j = 0; j < n; j++) v[j] = col[j] >= 0 ? c->codes[col[j]] : -1;
    free(c->codes), c->codes = v;
}

/* Reorders the columns to the requested gene list (and the var rows);
 * absent genes are 0. Row by row through dense scratch rows, so a gene listed twice is
 * copied twice, as a dense reorder would. */
static int align_genes(ast_dataset *d, const char *const *want, int n_want, ast_error *e)
{
    int *col = ast_xmalloc((size_t)n_want * sizeof *col);
    if (!gene_columns(d, want, n_want, col)) {
        free(col);
        ast_error_set(e, "%s: none of the %d genes of the gene list occur in the data (first: %s); check the list",
                      d->source, n_want, want[0]);
        return 0;
    }
    float *have = ast_xmalloc((size_t)d->n_genes * sizeof *have), *row = ast_xmalloc((size_t)n_want * sizeof *row);
    ast_csr_builder b = {{0}, 0, 0, 0};
    for (int64_t c = 0; c < d->n_cells; c++) {
        ast_data_row(d, c, have);
        for (int j = 0; j < n_want; j++) row[j] = col[j] >= 0 ? have[col[j]] : 0.0f;
        ast_csr_append_dense(&b, row, n_want);
    }
    for (int k = 0; k < d->n_var; k++) reorder_rows(&d->var[k], col, n_want);
    free(have), free(row), free(col);
    ast_csr_free(&d->x);
    d->x = b.m;
    for (int g = 0; g < d->n_genes; g++) free(d->genes[g]);
    free(d->genes);
    d->genes = ast_xmalloc((size_t)n_want * sizeof *d->genes);
    for (int j = 0; j < n_want; j++) d->genes[j] = ast_xstrdup(want[j]);
    d->n_genes = n_want;
    return 1;
}

/* The first value that is not a count (a whole number >= 0), as its
 * index into X's values, or -1. scanpy's usual state, normalize_total
 * then log1p, has fractions. */
static int64_t first_non_count(const ast_dataset *d)
{
    int64_t nnz = ast_csr_nnz(&d->x, d->n_cells);
    for (int64_t k = 0; k < nnz; k++)
        if (d->x.values[k] < 0.0f || d->x.values[k] != floorf(d->x.values[k])) return k;
    return -1;
}

static void report_non_counts(const ast_dataset *d, int64_t k)
{
    int64_t cell = 0;
    while (d->x.indptr[cell + 1] <= k) cell++;
    ast_log(AST_LOG_WARN, "%s: the expression matrix holds values that are not counts (%g for gene %s of cell %lld): "
            "taken as already log-normalised (as scanpy's normalize_total + log1p leave X) and used as it is; for "
            "the raw counts set data.layer (e.g. counts) or data.use_raw: true, or set "
            "data.preprocessing.log_normalize: false to silence this", d->source, d->x.values[k],
            d->genes[d->x.indices[k]], (long long)cell);
}

/* Library size 1e4, then log1p: zeros stay zero. */
static void log_normalize(ast_dataset *d)
{
    for (int64_t c = 0; c < d->n_cells; c++) {
        float *x = d->x.values + d->x.indptr[c];
        int64_t n = d->x.indptr[c + 1] - d->x.indptr[c];
        double total = 0.0;
        for (int64_t k = 0; k < n; k++) total += x[k];
        double f = total > 0.0 ? 1e4 / total : 0.0;
        for (int64_t k = 0; k < n; k++) x[k] = (float)log1p(x[k] * f);
    }
}

/* The z-score of every gene within each slice (ddof 1; a deviation of 0
 * becomes 1), from the non-zero values: each slice's zeros add
 * (0 - mean)^2 apiece. */
static void scale(ast_dataset *d, float clip)
{
    int64_t G = d->n_genes, S = d->n_slices;
    double *sum = ast_xcalloc((size_t)(S * G), sizeof *sum), *sq = ast_xcalloc((size_t)(S * G), sizeof *sq);
    int64_t *cells = ast_xcalloc((size_t)S, sizeof *cells), *nonzero = ast_xcalloc((size_t)(S * G), sizeof *nonzero);
    for (int64_t c = 0; c < d->n_cells; c++) {
        int64_t s = d->slice[c];
        cells[s]++;
        for (int64_t k = d->x.indptr[c]; k < d->x.indptr[c + 1]; k++)
            sum[s * G + d->x.indices[k]] += d->x.values[k], nonzero[s * G + d->x.indices[k]]++;
    }
    for (int64_t i = 0; i < S * G; i++) sum[i] /= cells[i / G] > 0 ? (double)cells[i / G] : 1.0;
    for (int64_t c = 0; c < d->n_cells; c++)
        for (int64_t k = d->x.indptr[c]; k < d->x.indptr[c + 1]; k++) {
            int64_t i = d->slice[c] * G + d->x.indices[k];
            sq[i] += pow(d->x.values[k] - sum[i], 2);
        }
    for (int64_t i = 0; i < S * G; i++) {
        int64_t n = cells[i / G];
        double sd = n > 1 ? sqrt((sq[i] + (double)(n - nonzero[i]) * sum[i] * sum[i]) / (double)(n - 1)) : 0.0;
        sq[i] = sd > 0.0 ? sd : 1.0;
    }
    free(cells), free(nonzero);
    d->gene_mean = sum, d->gene_sd = sq, d->clip = clip;
}

/* Subtracts the slice's mean from the first `axes` coordinates. */
static void center_slice(ast_dataset *d, int slice, int axes)
{
    double mean[3] = {0};
    int64_t n = 0;
    for (int64_t c = 0; c < d->n_cells; c++)
        if (d->slice[c] == slice) {
            n++;
            for (int k = 0; k < axes; k++) mean[k] += d->pos[c * 3 + k];
        }
    for (int64_t c = 0; c < d->n_cells && n; c++)
        if (d->slice[c] == slice)
            for (int k = 0; k < axes; k++) d->pos[c * 3 + k] -= (float)(mean[k] / (double)n);
}

int ast_data_preprocess(ast_dataset *d, const ast_data_opts *o, ast_error *e)
{
    if (o->genes && !align_genes(d, o->genes, o->n_genes, e)) return -1;
    int64_t at = o->log_normalize ? first_non_count(d) : -1;
    if (o->log_normalize && at < 0) log_normalize(d);
    if (at >= 0) report_non_counts(d, at); /* normalising again would take log1p of logs */
    if (o->scale) scale(d, o->clip);
    for (int s = 0; s < d->n_slices; s++) {
        /* 2-D slices keep their z = slice * spacing offset; only x, y are centred. */
        center_slice(d, s, d->coord_dims);
        if (d->coord_dims == 2)
            for (int64_t c = 0; c < d->n_cells; c++)
                if (d->slice[c] == s) d->pos[c * 3 + 2] = (float)s * o->z_spacing;
    }
    return 0;
}
