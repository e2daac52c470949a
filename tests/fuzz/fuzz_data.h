/* What every dataset a reader accepts must satisfy, for the CSV and .h5ad
 * targets: cells and genes, 2 or 3 coordinate dimensions, finite values,
 * named genes. A target checks what only its format has on top. */
#ifndef ALPHAST_FUZZ_DATA_H
#define ALPHAST_FUZZ_DATA_H

#include <math.h>

#include "data/data.h"
#include "fuzz.h"

static inline void fuzz_check_dataset(const ast_dataset *d, const char *when)
{
    FUZZ_CHECK(d->n_cells >= 1, "%s: accepted with %lld cells", when, (long long)d->n_cells);
    FUZZ_CHECK(d->n_genes >= 1, "%s: accepted with %d genes", when, d->n_genes);
    FUZZ_CHECK(d->coord_dims == 2 || d->coord_dims == 3, "%s: coord_dims %d", when, d->coord_dims);
    for (int64_t c = 0; c < d->n_cells; c++)
        for (int64_t k = d->x.indptr[c]; k < d->x.indptr[c + 1]; k++)
            FUZZ_CHECK(d->x.indices[k] >= 0 && d->x.indices[k] < d->n_genes && isfinite(d->x.values[k]),
                       "%s: expression [%lld, %d] is %g", when, (long long)c, d->x.indices[k], d->x.values[k]);
    for (int64_t i = 0; i < d->n_cells * 3; i++)
        FUZZ_CHECK(isfinite(d->pos[i]), "%s: coordinate [%lld, %lld] is %g", when, (long long)(i / 3),
                   (long long)(i % 3), d->pos[i]);
    for (int g = 0; g < d->n_genes; g++) FUZZ_CHECK(d->genes[g], "%s: gene %d has no name", when, g);
}

#endif
