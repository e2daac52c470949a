/* Cells ordered by a key (a distance, a coordinate, a rank), for qsort.
 * Internal to core/data. */
#ifndef ALPHAST_DATA_KEYED_H
#define ALPHAST_DATA_KEYED_H

#include "data/data.h"

typedef struct ast_keyed {
    float key;
    int64_t cell;
} ast_keyed;

/* qsort's comparison: increasing key. */
int ast_cmp_keyed(const void *a, const void *b);

#endif
