/* model/prior.h: the structural prior of docs/model.md §2.12. Per set, a
 * training-free embedding of the set's own expression (Isomap through the
 * expression k-NN graph's geodesics, or classical MDS: model/expr_embed.h),
 * centred and scaled to the length unit of the set coordinates, which the
 * network takes as input channels and/or as the base of its position
 * prediction. Computed from expression only: it never sees positions. */
#ifndef ALPHAST_PRIOR_H
#define ALPHAST_PRIOR_H

#include <stdint.h>

typedef enum ast_prior_kind { AST_PRIOR_NONE, AST_PRIOR_ISOMAP, AST_PRIOR_MDS } ast_prior_kind;

const char *ast_prior_name(ast_prior_kind k);
int ast_prior_parse(const char *s, ast_prior_kind *out); /* 0, or -1 if unknown */

typedef struct ast_prior_config {
    ast_prior_kind kind;
    int dims;     /* 1..3 embedding axes, the rest 0 */
    int k;        /* the expression k-NN graph's neighbours (Isomap, geodesics) */
    int geodesic; /* also the graph's geodesic distances (the geodesic attention's) */
} ast_prior_config;

/* One set of N cells (G genes, mask [N] or NULL = all valid; padded rows
 * may sit anywhere). Unless kind is NONE, out [N, 3]: the embedding of the
 * valid rows of expr, centred on them and scaled to an RMS radius of 1,
 * the unit in which set positions are given (ast_data_position_scale).
 * With pc->geodesic, geo [N, N]: the geodesic distances between the valid
 * cells over their mean over distinct pairs (scale-free, so O(1) whatever
 * the expression's units). Padded rows (and columns) are 0 in both. */
void ast_prior_set(const ast_prior_config *pc, int N, int G, const float *expr, const float *mask, float *out,
                   float *geo);

/* The priors of recent sets, keyed by a hash of what they are computed
 * from (the config, the set's expression and mask): the sampler's steps
 * and repeated evaluation sets ask for the same set again and again. */
typedef struct ast_prior_cache ast_prior_cache;
ast_prior_cache *ast_prior_cache_new(int capacity);
void ast_prior_cache_free(ast_prior_cache *c);
/* Hits and misses so far (tests and the cost measurement read them). */
void ast_prior_cache_stats(const ast_prior_cache *c, int64_t *hits, int64_t *misses);

/* B sets at once, out [B, N, 3] and geo [B, N, N] as ast_prior_set
 * writes them (out unwritten when kind is NONE); cache may be NULL. The
 * sets the cache lacks are computed on the thread pool (engine.h's
 * ast_parallel_for), with the same results as one after another. */
void ast_prior_batch(ast_prior_cache *cache, const ast_prior_config *pc, int B, int N, int G, const float *expr,
                     const float *mask, float *out, float *geo);

#endif
