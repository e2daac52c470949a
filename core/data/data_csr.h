/* Compressed sparse rows (ast_csr, alphast/data.h): what the readers build
 * and the dataset keeps. Internal to core/data. */
#ifndef ALPHAST_DATA_CSR_H
#define ALPHAST_DATA_CSR_H

#include "data/data.h"

static inline int64_t ast_csr_nnz(const ast_csr *m, int64_t rows) { return m->indptr ? m->indptr[rows] : 0; }

void ast_csr_free(ast_csr *m);
/* Sorts every row's columns and sums repeated columns (as scipy does), in
 * place. */
void ast_csr_canonicalize(ast_csr *m, int64_t rows);
/* The CSR form of a CSC matrix of `rows` rows and `cols` columns (its
 * indptr has cols + 1 entries, its indices are rows); columns come out
 * sorted. The CSC arrays are freed. */
void ast_csr_from_csc(ast_csr *csc, int64_t rows, int64_t cols, ast_csr *out);

/* A growing CSR, filled a row at a time from dense rows (dense X, text
 * tables); start from all zeros. */
typedef struct ast_csr_builder {
    ast_csr m;
    int64_t rows, cap, row_cap;
} ast_csr_builder;

/* Appends a dense row of `cols` values, keeping the non-zero ones. */
void ast_csr_append_dense(ast_csr_builder *b, const float *row, int cols);

#endif
