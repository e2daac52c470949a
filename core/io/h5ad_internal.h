/* What the .h5ad writer's files share (h5ad_write.c, h5ad_frame.c): HDF5
 * objects with anndata's encoding attributes. Each returns 0, or -1 on an
 * HDF5 failure (reported once, by ast_h5ad_write). Not a public interface. */
#ifndef ALPHAST_H5AD_INTERNAL_H
#define ALPHAST_H5AD_INTERNAL_H

#include <hdf5.h>

#include "io/h5ad_write.h"

/* A 1-D attribute of n UTF-8 strings, or a scalar one (n < 0). */
int h5w_attr_strings(hid_t obj, const char *name, const char *const *v, int n);
int h5w_attr_str(hid_t obj, const char *name, const char *value);
/* The "encoding-type" and "encoding-version" attributes anndata reads by. */
int h5w_encoding(hid_t obj, const char *type, const char *version);
/* A dataset of `rank` dims (0: a scalar) with its encoding type, version 0.2.0. */
int h5w_dataset(hid_t loc, const char *name, hid_t type, int rank, const hsize_t *dims, const void *data,
                const char *enc);
/* A string-array of n UTF-8 strings. */
int h5w_strings(hid_t loc, const char *name, const char *const *v, int64_t n);

/* obs (with its columns) and var as dataframes. */
int h5w_obs(hid_t file, const ast_h5ad_table *t);
int h5w_var(hid_t file, const ast_h5ad_table *t);

#endif
