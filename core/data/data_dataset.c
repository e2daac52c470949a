/* The dataset's lifetime and its rows: X stays sparse, and a row is made
 * dense (and z-scored, once preprocessed) only when a set needs it. */
#include <stdlib.h>
#include <string.h>

#include "data/data_csr.h"

static void free_strings(char **s, int64_t n)
{
    for (int64_t i = 0; s && i < n; i++) free(s[i]);
    free(s);
}

void ast_obs_column_free(ast_obs_column *c)
{
    free(c->name), free(c->numbers), free(c->codes);
    free_strings(c->categories, c->n_categories);
    free_strings(c->colors, c->colors ? c->n_categories : 0);
    memset(c, 0, sizeof *c);
}

void ast_dataset_free(ast_dataset *d)
{
    ast_csr_free(&d->x);
    free(d->gene_mean), free(d->gene_sd);
    free(d->pos), free(d->slice), free(d->cell_type), free(d->source);
    free_strings(d->genes, d->n_genes);
    free_strings(d->type_names, d->n_types);
    free_strings(d->cell_names, d->n_cells);
    for (int j = 0; j < d->n_obs; j++) ast_obs_column_free(&d->obs[j]);
    for (int j = 0; j < d->n_var; j++) ast_obs_column_free(&d->var[j]);
    free(d->obs), free(d->var);
    memset(d, 0, sizeof *d);
}

/* The arithmetic of docs/model.md §8.2's scaling, in double as before X
 * was kept sparse, so rows come out as they did. */
static float zscore(float x, double mean, double sd, float clip)
{
    float v = (float)((x - mean) / sd);
    return v > clip ? clip : v < -clip ? -clip : v;
}

void ast_data_row(const ast_dataset *d, int64_t cell, float *out)
{
    int G = d->n_genes;
    int64_t start = d->x.indptr[cell], end = d->x.indptr[cell + 1];
    if (!d->gene_mean) {
        memset(out, 0, (size_t)G * sizeof *out);
        for (int64_t k = start; k < end; k++) out[d->x.indices[k]] = d->x.values[k];
        return;
    }
    const double *mean = d->gene_mean + (int64_t)d->slice[cell] * G, *sd = d->gene_sd + (int64_t)d->slice[cell] * G;
    for (int g = 0; g < G; g++) out[g] = zscore(0.0f, mean[g], sd[g], d->clip);
    for (int64_t k = start; k < end; k++) {
        int g = d->x.indices[k];
        out[g] = zscore(d->x.values[k], mean[g], sd[g], d->clip);
    }
}
