/* alphast/h5ad_write.h: writing cells as an AnnData .h5ad file (anndata >=
 * 0.8 encodings) that anndata and ast_data_read_h5ad read back. */
#ifndef ALPHAST_H5AD_WRITE_H
#define ALPHAST_H5AD_WRITE_H

#include "engine/engine.h"

enum { AST_H5AD_MAX_OBSM = 4 };

/* An obs column as anndata stores it: integers, numbers (NaN = missing)
 * or a categorical (codes into categories, -1 = missing). */
typedef enum ast_h5ad_kind { AST_H5AD_INT, AST_H5AD_NUMBER, AST_H5AD_CATEGORY, AST_H5AD_BOOL } ast_h5ad_kind;

typedef struct ast_h5ad_column {
    const char *name;
    ast_h5ad_kind kind;
    const int64_t *ints;           /* [n_cells] (AST_H5AD_INT, and 0/1 for AST_H5AD_BOOL) */
    const double *numbers;         /* [n_cells] */
    const int *codes;              /* [n_cells] */
    const char *const *categories; /* [n_categories] */
    int n_categories;
    const char *const *colors;     /* [n_categories] written as uns/<name>_colors; NULL: none */
} ast_h5ad_column;

/* obsm/<name>: [n_cells, cols] float32. */
typedef struct ast_h5ad_matrix {
    const char *name;
    const float *data;
    int cols;
} ast_h5ad_matrix;

typedef struct ast_h5ad_table {
    int64_t n_cells;
    int n_genes;
    const float *X;                  /* [n_cells, n_genes], dense */
    const char *const *genes;        /* var/_index */
    const char *const *cells;        /* obs/_index (obs_names) */
    int n_obsm;
    ast_h5ad_matrix obsm[AST_H5AD_MAX_OBSM];
    int n_obs;
    const ast_h5ad_column *obs;      /* [n_obs], in column order */
    int n_var;
    const ast_h5ad_column *var;      /* [n_var] var columns, a row per gene */
    const char *uns_group;           /* uns/<uns_group>/<key> = value, strings; NULL: uns is empty */
    const char *const *uns;          /* key, value, ..., NULL */
} ast_h5ad_table;

/* Writes the table to path (through a temporary file renamed over it).
 * 0, or -1 with e set. */
int ast_h5ad_write(const char *path, const ast_h5ad_table *t, ast_error *e);

#endif
