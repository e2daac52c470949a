/* Sparse row routing for mixture-of-experts: gather the tokens an expert
 * receives, then scatter its outputs back, weighted by the router. Shapes,
 * index checks, outputs and tape nodes; the kernels are the backends'
 * (ops/ops_routing.c, cuda/ops_routing.cu). The index arrays are the
 * caller's host arena memory and are read again by the backward, never
 * copied here (a device's kernel copies them to its memory). */
#include "engine/kernels.h"

static void check_indices(const int32_t *idx, int64_t n, int64_t rows, const char *op)
{
    for (int64_t i = 0; i < n; i++)
        AST_ASSERT(idx[i] >= 0 && idx[i] < rows, "%s: index %d at %lld outside [0, %lld)", op, idx[i], (long long)i,
                   (long long)rows);
}

/* saved: idx; iarg[0] = n. */
ast_tensor *ast_gather_rows(ast_ctx *c, ast_tensor *x, const int32_t *idx, int64_t n)
{
    check_indices(idx, n, ast_rows(x), "gather_rows");
    return ast_op_run(c, AST_OP_gather_rows, &(ast_node){.out = ast_empty(c, 2, (int64_t[]){n, ast_cols(x)}),
                                                          .in = {x}, .n_in = 1, .saved = (void *)idx, .iarg = {n}});
}

/* saved: idx. */
ast_tensor *ast_scatter_add_rows(ast_ctx *c, ast_tensor *src, const int32_t *idx, ast_tensor *w, int64_t rows)
{
    char s[64];
    int64_t n = ast_rows(src);
    AST_ASSERT(!w || w->size == n, "scatter_add_rows: weights %s for %lld source rows",
               w ? ast_shape_str(w, s, sizeof s) : "", (long long)n);
    check_indices(idx, n, rows, "scatter_add_rows");
    return ast_op_run(c, AST_OP_scatter_add_rows, &(ast_node){.out = ast_empty(c, 2, (int64_t[]){rows, ast_cols(src)}),
                                                               .in = {src, w}, .n_in = 2, .saved = (void *)idx});
}
