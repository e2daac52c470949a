/* model/kabsch.h: the optimal rigid alignment of two point sets (Kabsch),
 * shared by the RMSD metric and the placements: the engine's ast_kabsch
 * and ast_center_rows3 (engine/kabsch.h, which the CPU kernels of the ops
 * aligned_mse and kabsch_align use too), and a whole placement moved onto
 * another. */
#ifndef ALPHAST_KABSCH_H
#define ALPHAST_KABSCH_H

#include "engine/kabsch.h"

/* p [n, 3] moved onto q [n, 3] by the best rotation or reflection and
 * translation over the rows with mask 1 (mask NULL: all), into out: a
 * placement defined up to a rigid motion, seen in q's frame. */
void ast_align_onto(int n, const float *p, const float *q, const float *mask, float *out);

#endif
