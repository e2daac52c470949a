/* What `alphast-run sample` writes: the generated cells as CSV or as
 * AnnData joined back to the source data (its obs names and columns),
 * with the run's provenance in uns. Functions return 0, or -1 with e set. */
#ifndef ALPHAST_CLI_SAMPLE_WRITE_H
#define ALPHAST_CLI_SAMPLE_WRITE_H

#include "data/data.h"

/* The generated cells of a split, in output order. Positions are per set,
 * [n, 3]; of 2-D data (d->coord_dims 2) x and y are written. */
typedef struct sample_cells {
    int64_t n;
    int G, sets;
    int64_t *cell, *set; /* each cell's row in the dataset, and its set */
    float *expr;         /* [n, G] */
    float *pos, *pos_true; /* pos_true NULL: none (predict's cells) */
    float *pos_aligned;    /* pos moved onto pos_true per set (Kabsch), or NULL */
    const char *pos_key;   /* obsm key of pos; NULL: spatial */
} sample_cells;

/* CSV: cell,set,x,y[,z],x_true,y_true[,z_true], then one column per gene
 * if with_expr. path "-" is stdout. */
int sample_write_csv(const char *path, const sample_cells *g, const ast_dataset *d, int with_expr, ast_error *e);

/* .h5ad: X the expression, obs_names the source's (else the row numbers),
 * obs the source's columns then cell and set (alphast_cell / alphast_set
 * where the source has those names; every name one HDF5 can hold and no
 * other column has: '/' as '_', then _2, _3, ... for a name taken),
 * obsm spatial (g->pos_key) and spatial_true (if g->pos_true),
 * spatial_aligned (if g->pos_aligned), and
 * uns/alphast the strings of `provenance` (key, value, ..., NULL). */
int sample_write_h5ad(const char *path, const sample_cells *g, const ast_dataset *d, const char *const *provenance,
                      ast_error *e);

/* "alphast-run" and argv[0..argc) as one line a shell reads back to the
 * same words; free() it. */
char *sample_command_line(int argc, char **argv);

#endif
