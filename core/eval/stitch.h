/* alphast/stitch.h: one frame per slice from overlapping sets, for cells
 * placed a set at a time (`alphast-run predict`): each set's placement is
 * its own, defined up to rotation, reflection and translation. */
#ifndef ALPHAST_STITCH_H
#define ALPHAST_STITCH_H

#include "eval/eval_sets.h"

/* The sets in order: each is moved (rotated or reflected, and translated;
 * never scaled) onto the mean position its cells already have, by Kabsch
 * on the cells it shares with the sets before it, and then added; a set
 * that shares fewer than 3 cells (the first of each slice) keeps the
 * frame it was generated in. Each cell ends at the mean of its
 * placements. pos [B, N, 3] the sets' positions; out [n_cells, 3], rows
 * of cells in no set 0. Returns the number of sets after the first of
 * their slice that shared fewer than 3 cells: left unaligned. */
int ast_stitch_sets(const ast_eval_sets *s, const float *pos, int64_t n_cells, float *out);

#endif
