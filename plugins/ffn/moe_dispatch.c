/* Sparse dispatch without a per-token loop through the network (the
 * OpenBLAS recipe of PRIOR_ART §4): counting-sort the (token, expert)
 * assignments by expert, gather the tokens into blocks by expert, run
 * every expert on its block in one grouped GEMM per layer, and add the
 * results back weighted by the routing weights. */
#include "moe.h"

/* Stable counting sort of n candidate assignments by expert; an expert
 * keeps at most `capacity` of them, in candidate order, and the rest are
 * counted in r->dropped. r->load counts the candidates per expert. */
void moe_sort_pairs(ast_ctx *c, int n_experts, const int32_t *expert, const int32_t *token, const int32_t *weight,
                    int64_t n, int64_t capacity, moe_routing *r)
{
    unsigned char *keep = ast_alloc(c, (size_t)n);
    int64_t *cursor = ast_alloc(c, (size_t)(n_experts + 1) * sizeof *cursor);
    r->offset = ast_alloc(c, (size_t)(n_experts + 1) * sizeof *r->offset);
    r->load = ast_alloc(c, (size_t)n_experts * sizeof *r->load);
    r->dropped = 0;
    for (int64_t i = 0; i < n; i++) {
        int e = expert[i];
        r->load[e] += 1.0f;
        keep[i] = r->offset[e + 1] < capacity;
        r->offset[e + 1] += keep[i];
        r->dropped += !keep[i];
    }
    for (int e = 0; e < n_experts; e++) r->offset[e + 1] += r->offset[e];
    r->n_pairs = r->offset[n_experts];
    for (int e = 0; e < n_experts; e++) cursor[e] = r->offset[e];
    r->token = ast_alloc(c, (size_t)r->n_pairs * sizeof *r->token);
    r->weight = ast_alloc(c, (size_t)r->n_pairs * sizeof *r->weight);
    for (int64_t i = 0; i < n; i++) {
        if (!keep[i]) continue;
        int64_t p = cursor[expert[i]]++;
        r->token[p] = token[i];
        r->weight[p] = weight[i];
    }
}

/* sum over kept assignments (t, e) of w * Expert_e(x_t), as [Tv, E]; tokens
 * with no kept assignment get zeros (the layer's residual carries them).
 * The assignments' rows are gathered once, already sorted by expert, run
 * through every expert at once (moe_experts_forward) and combined into the
 * one output (moe_combine.c), so the work follows the assignments, not
 * experts x tokens, and the number of ops does not grow with the experts.
 * The gather, the grouped GEMMs and the combine run on the backend; only
 * the index arrays of the routing are host memory. */
ast_tensor *moe_dispatch(const moe *m, ast_ctx *c, const moe_tokens *tk, const moe_routing *r)
{
    ast_tensor *x = ast_gather_rows(c, tk->x, r->token, r->n_pairs);
    return m->combine(c, tk->n, moe_experts_forward(m, c, x, r->offset), r->weights, r->token, r->weight);
}
