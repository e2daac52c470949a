/* alphast/h5ad_write.h: writing cells as an AnnData .h5ad file (anndata >=
 * 0.8 encodings) that anndata and ast_data_read_h5ad read back. */
#ifndef ALPHAST_H5AD_WRITE_H
#define ALPHAST_H5AD_WRITE_H

#include "engine/engine.h"

enum { AST_H5AD_MAX_COLUMNS = 4 };

typedef struct ast_h5ad_table {
    int64_t n_cells;
    int n_genes;
    const float *X;                  /* [n_cells, n_genes], dense */
    const char *const *genes;        /* var/_index */
    const char *const *cells;        /* obs/_index */
    int n_obsm;                      /* obsm/<name>: [n_cells, 3] float32 */
    const char *obsm_names[AST_H5AD_MAX_COLUMNS];
    const float *obsm[AST_H5AD_MAX_COLUMNS];
    int n_obs;                       /* obs/<name>: integer columns */
    const char *obs_names[AST_H5AD_MAX_COLUMNS];
    const int64_t *obs[AST_H5AD_MAX_COLUMNS];
} ast_h5ad_table;

/* Writes the table to path (through a temporary file renamed over it).
 * 0, or -1 with e set. */
int ast_h5ad_write(const char *path, const ast_h5ad_table *t, ast_error *e);

#endif
