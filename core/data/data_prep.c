/* Preprocessing of docs/model.md §8.2: gene alignment, library-size normalisation to
 * 1e4, log1p, per-gene z-score (ddof 1, std 0 -> 1) clipped at +-clip, all
 * per slice; 2-D slices lifted to 3-D; positions centred per slice. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"

void ast_data_opts_default(ast_data_opts *o)
{
    memset(o, 0, sizeof *o);
    o->position_key = "spatial";
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

/* Reorders the columns to the requested gene list; absent genes are 0. */
static int align_genes(ast_dataset *d, const char *const *want, int n_want, ast_error *e)
{
    name_idx *have = ast_xmalloc((size_t)d->n_genes * sizeof *have);
    for (int g = 0; g < d->n_genes; g++) have[g] = (name_idx){d->genes[g], g};
    qsort(have, (size_t)d->n_genes, sizeof *have, cmp_name);
    float *x = ast_xcalloc((size_t)(d->n_cells * n_want), sizeof(float));
    int found = 0;
    for (int j = 0; j < n_want; j++) {
        name_idx key = {want[j], 0}, *hit = bsearch(&key, have, (size_t)d->n_genes, sizeof *have, cmp_name);
        if (!hit) continue;
        found++;
        for (int64_t c = 0; c < d->n_cells; c++) x[c * n_want + j] = d->expr[c * d->n_genes + hit->idx];
    }
    free(have);
    if (!found) {
        free(x);
        ast_error_set(e, "%s: none of the %d genes of the gene list occur in the data (first: %s); check the list",
                      d->source, n_want, want[0]);
        return 0;
    }
    for (int g = 0; g < d->n_genes; g++) free(d->genes[g]);
    free(d->genes);
    free(d->expr);
    d->expr = x;
    d->genes = ast_xmalloc((size_t)n_want * sizeof *d->genes);
    for (int j = 0; j < n_want; j++) d->genes[j] = ast_xstrdup(want[j]);
    d->n_genes = n_want;
    return 1;
}

static void log_normalize(ast_dataset *d)
{
    for (int64_t c = 0; c < d->n_cells; c++) {
        float *x = d->expr + c * d->n_genes;
        double total = 0.0;
        for (int g = 0; g < d->n_genes; g++) total += x[g];
        double f = total > 0.0 ? 1e4 / total : 0.0;
        for (int g = 0; g < d->n_genes; g++) x[g] = (float)log1p(x[g] * f);
    }
}

/* z-score every gene within one slice. */
static void scale_slice(ast_dataset *d, int slice, float clip)
{
    int G = d->n_genes;
    double *sum = ast_xcalloc((size_t)G, sizeof *sum), *sq = ast_xcalloc((size_t)G, sizeof *sq);
    int64_t n = 0;
    for (int64_t c = 0; c < d->n_cells; c++) {
        if (d->slice[c] != slice) continue;
        n++;
        for (int g = 0; g < G; g++) sum[g] += d->expr[c * G + g];
    }
    for (int g = 0; g < G; g++) sum[g] /= n > 0 ? (double)n : 1.0;
    for (int64_t c = 0; c < d->n_cells; c++)
        if (d->slice[c] == slice)
            for (int g = 0; g < G; g++) sq[g] += pow(d->expr[c * G + g] - sum[g], 2);
    for (int g = 0; g < G; g++) {
        double sd = n > 1 ? sqrt(sq[g] / (double)(n - 1)) : 0.0;
        sq[g] = sd > 0.0 ? sd : 1.0;
    }
    for (int64_t c = 0; c < d->n_cells; c++)
        if (d->slice[c] == slice)
            for (int g = 0; g < G; g++) {
                float v = (float)((d->expr[c * G + g] - sum[g]) / sq[g]);
                d->expr[c * G + g] = v > clip ? clip : v < -clip ? -clip : v;
            }
    free(sum), free(sq);
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
    if (o->log_normalize) log_normalize(d);
    for (int s = 0; s < d->n_slices; s++) {
        if (o->scale) scale_slice(d, s, o->clip);
        /* 2-D slices keep their z = slice * spacing offset; only x, y are centred. */
        center_slice(d, s, d->coord_dims);
        if (d->coord_dims == 2)
            for (int64_t c = 0; c < d->n_cells; c++)
                if (d->slice[c] == s) d->pos[c * 3 + 2] = (float)s * o->z_spacing;
    }
    return 0;
}
