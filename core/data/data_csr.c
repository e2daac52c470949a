/* Compressed sparse rows: building them from dense rows or CSC, and the
 * canonical form every reader hands on (sorted columns, no repeats), which
 * the rest of the data layer relies on. */
#include <stdlib.h>
#include <string.h>

#include "data/data_csr.h"

void ast_csr_free(ast_csr *m)
{
    free(m->indptr), free(m->indices), free(m->values);
    memset(m, 0, sizeof *m);
}

typedef struct entry {
    int32_t col;
    float value;
} entry;

static int cmp_entry(const void *a, const void *b)
{
    int32_t x = ((const entry *)a)->col, y = ((const entry *)b)->col;
    return (x > y) - (x < y);
}

static int row_sorted(const ast_csr *m, int64_t start, int64_t end)
{
    for (int64_t k = start + 1; k < end; k++)
        if (m->indices[k] <= m->indices[k - 1]) return 0;
    return 1;
}

/* Sorts values[start, end) by column (stable: repeats keep their order). */
static void sort_row(ast_csr *m, int64_t start, int64_t end, entry **tmp, int64_t *cap)
{
    int64_t n = end - start;
    if (n > *cap) *tmp = ast_xrealloc(*tmp, (size_t)(*cap = n) * sizeof **tmp);
    for (int64_t k = 0; k < n; k++) (*tmp)[k] = (entry){m->indices[start + k], m->values[start + k]};
    qsort(*tmp, (size_t)n, sizeof **tmp, cmp_entry);
    for (int64_t k = 0; k < n; k++) m->indices[start + k] = (*tmp)[k].col, m->values[start + k] = (*tmp)[k].value;
}

void ast_csr_canonicalize(ast_csr *m, int64_t rows)
{
    entry *tmp = NULL;
    int64_t cap = 0, w = 0, start = m->indptr[0];
    for (int64_t r = 0; r < rows; r++) {
        int64_t end = m->indptr[r + 1];
        if (!row_sorted(m, start, end)) sort_row(m, start, end, &tmp, &cap);
        m->indptr[r] = w;
        for (int64_t k = start; k < end; k++) {
            if (w > m->indptr[r] && m->indices[w - 1] == m->indices[k]) {
                m->values[w - 1] += m->values[k];
            } else {
                m->indices[w] = m->indices[k], m->values[w] = m->values[k];
                w++;
            }
        }
        start = end;
    }
    m->indptr[rows] = w;
    free(tmp);
}

void ast_csr_from_csc(ast_csr *csc, int64_t rows, int64_t cols, ast_csr *out)
{
    int64_t nnz = csc->indptr[cols];
    out->indptr = ast_xcalloc((size_t)rows + 1, sizeof *out->indptr);
    out->indices = ast_xmalloc((size_t)(nnz ? nnz : 1) * sizeof *out->indices);
    out->values = ast_xmalloc((size_t)(nnz ? nnz : 1) * sizeof *out->values);
    for (int64_t k = 0; k < nnz; k++) out->indptr[csc->indices[k] + 1]++;
    for (int64_t r = 0; r < rows; r++) out->indptr[r + 1] += out->indptr[r];
    int64_t *next = ast_xmalloc((size_t)(rows ? rows : 1) * sizeof *next);
    memcpy(next, out->indptr, (size_t)rows * sizeof *next);
    for (int64_t c = 0; c < cols; c++) /* columns in order: every row comes out sorted */
        for (int64_t k = csc->indptr[c]; k < csc->indptr[c + 1]; k++) {
            int64_t at = next[csc->indices[k]]++;
            out->indices[at] = (int32_t)c, out->values[at] = csc->values[k];
        }
    free(next);
    ast_csr_free(csc);
}

void ast_csr_append_dense(ast_csr_builder *b, const float *row, int cols)
{
    if (b->rows + 2 > b->row_cap) {
        b->m.indptr = ast_xrealloc(b->m.indptr, (size_t)(b->row_cap = (b->rows + 2) * 2) * sizeof *b->m.indptr);
        b->m.indptr[0] = 0;
    }
    int64_t nnz = b->m.indptr[b->rows];
    if (nnz + cols > b->cap) {
        b->cap = (nnz + cols) * 2;
        b->m.indices = ast_xrealloc(b->m.indices, (size_t)b->cap * sizeof *b->m.indices);
        b->m.values = ast_xrealloc(b->m.values, (size_t)b->cap * sizeof *b->m.values);
    }
    for (int g = 0; g < cols; g++)
        if (row[g] != 0.0f) b->m.indices[nnz] = g, b->m.values[nnz++] = row[g];
    b->m.indptr[++b->rows] = nnz;
}
