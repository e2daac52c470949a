/* alphast/eval_sets.h: the cells a held-out evaluation places, grouped into
 * sets. The default protocol places every cell of a held-out region (a
 * slice's part of the split) at once, as LUNA does; a region larger than
 * one set is split by expression alone (balanced k-means), so which cells
 * share a set never depends on their true coordinates. The old protocol,
 * a centre cell and its nearest cells by true position, stays available
 * under the name of what it is: oracle neighbourhoods. */
#ifndef ALPHAST_EVAL_SETS_H
#define ALPHAST_EVAL_SETS_H

#include "data/data.h"

typedef enum ast_eval_protocol { AST_EVAL_REGION, AST_EVAL_ORACLE } ast_eval_protocol;

const char *ast_eval_protocol_name(ast_eval_protocol p);
int ast_eval_protocol_parse(const char *s, ast_eval_protocol *out); /* 0, or -1 if unknown */

typedef struct ast_eval_sets {
    int B, N, G;
    float *expr;    /* [B, N, G] */
    float *pos;     /* [B, N, 3] true positions, centred per set, in the sampler's units */
    float *mask;    /* [B, N] */
    int64_t *cells; /* [B, N] dataset indices; -1 on padding */
    int *slice;     /* [B] the slice every cell of the set comes from */
} ast_eval_sets;

/* Every cell of s->split, one set per slice, each slice's cells split into
 * ceil(n / max_set_size) sets of near-equal size by balanced k-means on
 * expression (k-means++ seeded from `seed`). N is the largest set. */
void ast_eval_sets_region(const ast_set_sampler *s, int max_set_size, uint64_t seed, ast_eval_sets *out);
/* The region sets made to overlap, so that `alphast-run predict` can
 * stitch them into one frame per slice (eval/stitch.h): a slice larger
 * than one set gets `landmarks` cells (< max_set_size) drawn at random from
 * `seed`, which are in every one of its sets, and the rest split as above
 * into sets of at most max_set_size - landmarks others. A slice that fits
 * in one set is one set, as above; with landmarks 0 this is
 * ast_eval_sets_region. */
void ast_eval_sets_landmarks(const ast_set_sampler *s, int max_set_size, int landmarks, uint64_t seed,
                             ast_eval_sets *out);
/* Sets of cells that have positions and no expression to go by (what
 * `alphast-run predict` generates expression for): as
 * ast_eval_sets_region, each slice split by balanced k-means on position
 * instead, so that a set is a compact patch of its slice. */
void ast_eval_sets_by_position(const ast_set_sampler *s, int max_set_size, uint64_t seed, ast_eval_sets *out);
/* `count` sets of s->set_size cells: a centre drawn from `seed` and its
 * nearest cells by TRUE position (what a user placing dissociated cells
 * does not have). */
void ast_eval_sets_oracle(const ast_set_sampler *s, int count, uint64_t seed, ast_eval_sets *out);
void ast_eval_sets_free(ast_eval_sets *e);

/* Balanced k-means: assigns n rows of x [n, G] to k clusters of at most
 * ceil(n / k) rows each (greedy by distance to the centroids, 25 Lloyd
 * rounds), into label [n]. Deterministic for a seed. */
void ast_balanced_kmeans(const float *x, int n, int G, int k, uint64_t seed, int *label);

#endif
