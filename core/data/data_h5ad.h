/* The .h5ad reader's internals, shared by its files: checked reads of
 * datasets and attributes (data_h5ad_io.c), dataframes and their columns
 * (data_h5ad_frame.c) and matrices (data_h5ad_matrix.c). Not installed. */
#ifndef ALPHAST_DATA_H5AD_H
#define ALPHAST_DATA_H5AD_H

#include <hdf5.h>

#include "base/strlist.h"
#include "data/data.h"

/* The usual cause of a file that is valid HDF5 but not valid AnnData. */
#define DAMAGED "(damaged or not written by anndata?)"

/* Room for an HDF5 path inside the file (obs/<column>/categories). */
#define H5AD_PATH 600

typedef struct h5ad {
    hid_t file;
    const char *path;
    ast_error *e;
} h5ad;

/* A dataset's extent as read from the file, already checked to be
 * addressable: n = the product of the dims, which fits in int64_t. */
typedef struct extent {
    int ndim;
    int64_t dims[2];
    int64_t n;
} extent;

/* Registers the LZF filter (h5py's compression='lzf', HDF5 filter 32000;
 * data_lzf.c) before a file is opened. */
void ast_data_register_lzf(void);

/* ---- data_h5ad_io.c ---------------------------------------------------------- */

/* rows x cols as an element count, or -1 if negative or past int64_t. */
int64_t h5ad_product(int64_t rows, int64_t cols);
/* 1 if n elements of `size` bytes fit in the machine's memory, else 0
 * with the error set, naming `what`. */
int h5ad_affordable(h5ad *h, const char *what, int64_t n, size_t size);
/* Zeroed room for n elements of `size` bytes, or NULL with the error set
 * (h5ad_affordable's refusal, or out of memory). */
void *h5ad_alloc(h5ad *h, const char *what, int64_t n, size_t size);

/* group/name into out (H5AD_PATH bytes; a longer path is cut, and then
 * names nothing in the file). */
void h5ad_join(char *out, const char *group, const char *name);
/* 1 if the object at `name` (a path from the root) exists. */
int h5ad_exists(h5ad *h, const char *name);
/* The object's type (H5O_TYPE_GROUP, H5O_TYPE_DATASET), or
 * H5O_TYPE_UNKNOWN with the error set: missing (naming the missing
 * part, `want` saying what belongs there), unopenable, or of another
 * kind (a named datatype). */
H5O_type_t h5ad_object_type(h5ad *h, const char *name, const char *want);
/* Appends the names of group `key`'s members, in name order (none when
 * it is missing or cannot be listed). */
void h5ad_members(h5ad *h, const char *key, ast_strlist *out);

/* Opens dataset `name` and checks that it has exactly `ndim` dimensions,
 * `want` saying what it should hold; -1 with the error set. */
hid_t h5ad_open_dataset(h5ad *h, const char *name, int ndim, const char *want, extent *x);
/* Reads a whole `ndim`-D numeric dataset converted to `memtype`. */
void *h5ad_read_numeric(h5ad *h, const char *name, int ndim, const char *want, hid_t memtype, extent *x);
/* Reads rows [row0, row0 + rows) of an open 2-D numeric dataset as floats. */
int h5ad_read_rows(h5ad *h, hid_t d, const char *name, const extent *x, int64_t row0, int64_t rows, float *out);
/* Reads a 1-D string dataset (variable or fixed length) into *n strings. */
char **h5ad_read_strings(h5ad *h, const char *name, const char *want, int64_t *n);
/* The error for a failed H5Dread of `name` (reading its `what`: numbers,
 * strings): a compression filter this libhdf5 lacks, else damage. */
void h5ad_read_failed(h5ad *h, hid_t d, const char *name, const char *what);
void h5ad_free_strings(char **s, int64_t n);

/* String attribute `attr` of object `name` into buf ("" when absent); -1
 * with the error set when it is not one string. */
int h5ad_string_attr(h5ad *h, const char *name, const char *attr, char *buf, size_t n);
/* "encoding-type" of object `name` into buf ("" when absent). */
int h5ad_encoding(h5ad *h, const char *name, char *buf, size_t n);
/* A 1-D string array attribute (a dataframe's column-order) into *n
 * strings; an absent or empty one (h5py writes [] as float64) is none. */
char **h5ad_string_array_attr(h5ad *h, const char *name, const char *attr, int *n);
/* Attribute `attr` of object `name`: two sizes >= 0 whose product is
 * addressable (a matrix's "shape"). */
int h5ad_shape_attr(h5ad *h, const char *name, const char *attr, int64_t shape[2]);

/* ---- data_h5ad_frame.c ------------------------------------------------------- */

/* A dataframe group (obs, var, raw/var, an obsm DataFrame): its index
 * dataset, named by its "_index" attribute, and its columns in order. */
typedef struct h5ad_frame {
    char key[H5AD_PATH];
    char index[H5AD_PATH]; /* the index dataset's path */
    int named_index;       /* named by an "_index" attribute (else the default _index) */
    char **columns;
    int n_columns;
} h5ad_frame;

int h5ad_frame_open(h5ad *h, const char *key, h5ad_frame *f);
void h5ad_frame_close(h5ad_frame *f);
/* The index as *n strings: a string dataset as it is (the caller checks
 * *n), anything else read as a column of n_rows values. */
char **h5ad_frame_index(h5ad *h, const h5ad_frame *f, int64_t n_rows, int64_t *n);
/* 1 if `path` is a dataset of strings (and not an anndata 0.7
 * categorical, whose strings are codes' categories), else 0. */
int h5ad_string_dataset(h5ad *h, const char *path);
/* Column `name` of n_rows values: categorical (anndata >= 0.8 groups,
 * 0.7 codes with a reference to __categories/<name>) and strings
 * (nullable ones too) as categories, numbers, booleans and nullable numbers as numbers. 1 on
 * success, 0 for an encoding alphast does not read (out->kind -1), -1
 * with the error set. */
int h5ad_frame_column(h5ad *h, const h5ad_frame *f, const char *name, int64_t n_rows, ast_obs_column *out);

/* ---- data_h5ad_matrix.c ------------------------------------------------------ */

/* The [cells, genes] matrix at `key` (X, layers/<name>, raw/X): a dense
 * dataset, or a CSR or CSC group (anndata's encoding-type, or the
 * h5sparse_format of anndata 0.7.0), as canonical CSR: sorted columns,
 * duplicates summed (as scipy does). */
int h5ad_read_matrix(h5ad *h, const char *key, ast_csr *m, int64_t *cells, int64_t *genes);

#endif
