/* The parts of the held-out protocols (data_split.c) kept in files of
 * their own. Internal to core/data. */
#ifndef ALPHAST_DATA_SPLIT_H
#define ALPHAST_DATA_SPLIT_H

#include "data/data_keyed.h"

void split_push(ast_split *s, int64_t cell);

/* Blocks for a slice of n cells: enough that the smaller of the held-out
 * fractions gets about 5 blocks (a held-out part of one block is one
 * region, not a sample of the tissue), at most n. */
int64_t split_block_target(double val, double test, int64_t n);
/* Keys the n cells by the rank of their block in a shuffle (rng) of a
 * grid of squares (2-D) or cubes (3-D) of about `target` occupied blocks. */
void split_rank_blocks(const ast_dataset *d, ast_keyed *cells, int64_t n, int64_t target, ast_rng *rng);

/* Each cell's section [n_cells]: its slice, or with o->sections_from_z = K
 * its z-range of K of equal cell counts (one 3-D slice only). NULL with e
 * set when K cannot cut d. */
int *split_sections_of(const ast_dataset *d, const ast_split_opts *o, ast_error *e);

/* The user's split: o->key, an obs column of train / val / test. */
int split_by_key(const ast_dataset *d, const ast_split_opts *o, ast_split out[3], ast_error *e);

#endif
