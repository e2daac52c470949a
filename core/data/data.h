/* alphast/data.h: spatial transcriptomics datasets — reading AnnData
 * .h5ad and CSV/TSV, preprocessing (docs/model.md §8.2, fixed as issue 4 asks), and
 * splitting by space. */
#ifndef ALPHAST_DATA_H
#define ALPHAST_DATA_H

#include "engine/engine.h"

/* Functions returning int give 0 on success and -1 with the error set. */

typedef struct ast_data_opts {
    const char *position_key;  /* obsm key of the coordinates ("spatial") */
    const char *cell_type_key; /* obs column, or NULL */
    const char *slice_key;     /* obs column naming the slice, or NULL = one slice */
    int detect_sections;       /* with no slice_key: an obs column of sections on top of each other is an error */
    const char *coords_file;   /* CSV genes x cells layout: the x y z file */
    const char *label_column;  /* CSV cells x genes: a column of labels kept as an obs column, not a
                                  gene (data.split_key), or NULL */
    int genes_by_cells;        /* CSV: 1 if rows are genes (the STARmap layout) */
    int log_normalize;         /* library size 1e4 then log1p */
    int scale;                 /* per-gene z-score (ddof 1), clipped at +-clip */
    float clip;
    float z_spacing;           /* 2-D slices: z = slice index * z_spacing */
    const char *const *genes;  /* align to this gene list (missing -> 0), or NULL */
    int n_genes;
    const char *layer;         /* .h5ad: read layers/<layer> instead of X (scanpy's layer=), or NULL */
    int use_raw;               /* .h5ad: read raw/X and raw/var instead (scanpy's use_raw=True) */
    int positions_optional;    /* a file without coordinates is read with none (coord_dims 0, pos all 0)
                                  rather than refused: the cells `alphast-run predict` places */
    int expression_optional;   /* a file without expression (an .h5ad without the matrix, a CSV of ids
                                  and coordinates) is read with no genes rather than refused: the
                                  positions `alphast-run predict` generates expression at */
} ast_data_opts;

void ast_data_opts_default(ast_data_opts *o);

/* A [rows, cols] matrix as compressed sparse rows: row r holds the
 * values[indptr[r] .. indptr[r + 1]) in the columns indices[...], which
 * increase along the row. */
typedef struct ast_csr {
    int64_t *indptr;  /* [rows + 1], indptr[0] = 0, indptr[rows] = the number of values */
    int32_t *indices; /* [nnz] */
    float *values;    /* [nnz] */
} ast_csr;

/* One source obs column, kept so that results join back to the data
 * (sample --out x.h5ad writes it again). Strings and categoricals are
 * categories (as anndata stores them), numbers and booleans numbers,
 * with the type they were stored as, to be written back as such. */
enum { AST_OBS_NUMBER, AST_OBS_CATEGORY };
enum { AST_OBS_FLOATS, AST_OBS_INTS, AST_OBS_BOOLS };
typedef struct ast_obs_column {
    char *name;
    int kind;          /* AST_OBS_NUMBER or AST_OBS_CATEGORY */
    double *numbers;   /* [n_cells], NaN = missing (AST_OBS_NUMBER) */
    int stored;        /* AST_OBS_NUMBER: AST_OBS_FLOATS (also nullable ones), _INTS or _BOOLS */
    int *codes;        /* [n_cells], -1 = missing (AST_OBS_CATEGORY) */
    char **categories; /* [n_categories] */
    int n_categories;
    char **colors;     /* [n_categories] scanpy's uns/<name>_colors, written back; NULL for none */
} ast_obs_column;

/* Nothing of n_cells x n_genes is ever dense (a 100k-cell file would take
 * GBs): X stays sparse, and ast_data_row makes one cell's row dense. */
typedef struct ast_dataset {
    int64_t n_cells;
    int n_genes;
    ast_csr x;         /* [n_cells, n_genes]: as read, log-normalised by ast_data_preprocess */
    double *gene_mean; /* [n_slices, n_genes] per-slice z-score of ast_data_row, or NULL (no scaling) */
    double *gene_sd;   /* [n_slices, n_genes], each > 0 */
    float clip;        /* z-scores are clipped to +-clip */
    float *pos;        /* [n_cells, 3] */
    int *slice;        /* [n_cells] slice index */
    int n_slices;
    int *cell_type;    /* [n_cells], -1 unknown; NULL without a cell_type_key */
    char **genes;      /* [n_genes] */
    char **type_names; /* [n_types] */
    int n_types;
    int coord_dims;    /* 2 or 3 as read; 0 for none (ast_data_opts.positions_optional) */
    char *source;      /* the file it came from */
    char **cell_names; /* [n_cells] obs_names; NULL when the source has none */
    ast_obs_column *obs; /* [n_obs] the source's obs columns */
    int n_obs;
    ast_obs_column *var; /* [n_var] the source's var columns, a row per gene (aligned with genes) */
    int n_var;
} ast_dataset;

/* Raw counts and coordinates, validated (shapes, finite values, at least
 * one cell). Errors name the file, the HDF5 path or line, and the fix. */
int ast_data_read_h5ad(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e);
/* ast_data_read_h5ad runs this parse in a child process that is killed
 * after $ALPHAST_H5AD_TIMEOUT seconds (default 60; libhdf5 can loop
 * forever on a damaged file) and whose crash is an error, not ours; with
 * ALPHAST_H5AD_TIMEOUT=0 it calls this directly. Here, in the calling
 * process and unbounded: for the child, debuggers and fuzz targets. */
int ast_data_read_h5ad_direct(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e);
int ast_data_read_csv(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e);
/* By extension: .h5ad -> h5ad, anything else -> CSV/TSV (gzip allowed). */
int ast_data_read(const char *path, const ast_data_opts *o, ast_dataset *out, ast_error *e);
void ast_dataset_free(ast_dataset *d);
void ast_obs_column_free(ast_obs_column *c);

/* Gene alignment, library-size normalisation, log1p and per-gene scaling
 * per slice (docs/model.md §8.2); 2-D slices lifted to 3-D (z = slice * z_spacing);
 * positions centred per slice. The scaling is kept as gene_mean and
 * gene_sd and applied by ast_data_row, so X stays sparse. A matrix that is
 * not counts (negative or fractional values, as scanpy leaves X) is
 * reported and not normalised again. */
int ast_data_preprocess(ast_dataset *d, const ast_data_opts *o, ast_error *e);

/* Cell `cell`'s expression as the model sees it, into out [n_genes]: its
 * row of X, z-scored with its slice's gene_mean and gene_sd and clipped
 * when the data were scaled (zeros included). Before preprocessing: the
 * row as read. */
void ast_data_row(const ast_dataset *d, int64_t cell, float *out);

/* ast_data_read + ast_data_preprocess through a cache in cache_dir (NULL:
 * none): the result is saved there as safetensors under a hash of the
 * files' path, size and mtime and of every option, and later loads of the
 * same read it instead of parsing. A damaged cache is ignored with a
 * warning; failing to write one only warns. Then ast_data_check_sections. */
int ast_data_load(const char *path, const ast_data_opts *o, const char *cache_dir, ast_dataset *d, ast_error *e);

/* With no o->slice_key (and o->detect_sections on): an obs column of 2 to
 * 16 values whose groups lie on top of each other, as sections each in
 * coordinates of its own do, is an error naming it and data.slice_key,
 * since as one tissue the sections would overlap. 0, or -1 with e set. */
int ast_data_check_sections(const ast_dataset *d, const ast_data_opts *o, ast_error *e);
/* $XDG_CACHE_HOME/alphast, else $HOME/.cache/alphast, into buf; NULL without either. */
const char *ast_data_default_cache_dir(char *buf, size_t n);


/* ---- splits and sets ---------------------------------------------------- */

enum { AST_SPLIT_TRAIN, AST_SPLIT_VAL, AST_SPLIT_TEST };

typedef struct ast_split {
    int64_t *cells;
    int64_t n;
} ast_split;

/* The held-out protocol: how cells are dealt to train / val / test
 * (docs/evaluation.md, Protocol). Cells drawn at random share their
 * neighbours with the training cells (interpolation); slabs, blocks and
 * sections hold out regions (extrapolation): which one decides which
 * method wins, so every result names it. */
typedef enum ast_split_kind {
    AST_SPLIT_AUTO,     /* sections with 3 or more sections, else slab */
    AST_SPLIT_SLAB,     /* each slice cut along its longest axis: train, val, test slabs */
    AST_SPLIT_BLOCKS,   /* each slice a grid of squares / cubes dealt by a seeded shuffle */
    AST_SPLIT_RANDOM,   /* cells of each slice dealt at random */
    AST_SPLIT_SECTIONS, /* whole sections held out, the last ones in order */
    AST_SPLIT_KEY,      /* the obs column `key` says train, val or test per cell */
} ast_split_kind;

typedef struct ast_split_opts {
    ast_split_kind kind;
    double val, test;    /* fractions of each slice's cells, or of the sections */
    uint64_t seed;       /* blocks and random: the deal (data.split_seed) */
    const char *key;     /* key: the obs column */
    int sections_from_z; /* K > 0: the sections of one 3-D slice are K z-ranges of equal cell counts */
} ast_split_opts;

const char *ast_split_kind_name(ast_split_kind k);
int ast_split_kind_parse(const char *s, ast_split_kind *out); /* 0, or -1 for an unknown name */
/* The protocol o->kind stands for on d: auto resolved, others as given. */
ast_split_kind ast_split_resolve(const ast_dataset *d, const ast_split_opts *o);
/* Deals d's cells to out[AST_SPLIT_TRAIN / VAL / TEST] by o. Errors name
 * the file, the key and the fix. */
int ast_data_split_by(const ast_dataset *d, const ast_split_opts *o, ast_split out[3], ast_error *e);
/* ast_data_split_by with the auto protocol. */
int ast_data_split(const ast_dataset *d, double val_frac, double test_frac, ast_split out[3], ast_error *e);
void ast_split_free(ast_split s[3]);

typedef struct ast_set_sampler {
    const ast_dataset *d;
    const ast_split *split;
    int set_size;       /* N */
    float pos_scale;    /* positions are divided by it (ast_data_position_scale) */
    int rotate;         /* random 3-D rotation per set */
    float expr_dropout; /* zero each expression entry with this probability */
} ast_set_sampler;

/* The N of sets of data.set_size `set_size`: itself, or for 0 (whole-slice
 * sets) the most cells any one slice has in the split, at most `cap`
 * (evaluation.max_set_size, the largest set evaluation places): the sets of
 * a slice larger than that are random spatial regions of `cap` cells of it
 * (ast_make_set), so training sees sets of the size it is scored on. */
int ast_data_max_set_size(const ast_dataset *d, const ast_split *s, int set_size, int cap);

/* A dataset-wide length unit: the median RMS radius of centred
 * neighbourhood sets of `set_size` cells of the split (whole slices, or
 * regions of the capped size, when set_size comes from
 * ast_data_max_set_size for data.set_size 0), so set coordinates are O(1)
 * like the unit-variance diffusion noise. */
float ast_data_position_scale(const ast_dataset *d, const ast_split *s, int set_size, uint64_t seed);

/* The set of the `centre` cell: it and its N-1 nearest cells of the same
 * slice and split; positions centred on the set and scaled. Sets of a
 * split smaller than N are padded (mask 0). With N from
 * ast_data_max_set_size(d, s, 0, cap) this is the centre's whole slice, or
 * for a slice above cap the region of cap cells around the centre. */
void ast_make_set(const ast_set_sampler *s, int64_t centre, ast_rng *rng, float *expr, float *pos, float *mask);
/* The dataset indices of the cells ast_make_set puts in the set of
 * `centre`, in set order (room for N); returns their number. */
int ast_set_cells(const ast_set_sampler *s, int64_t centre, int64_t *cells);
/* B sets around random centres of the split, filled in parallel. */
void ast_sample_sets(const ast_set_sampler *s, ast_rng *rng, int B, float *expr, float *pos, float *mask);
/* The same draws, but the expression only of sets lo..hi-1 (a rank's share
 * of the batch); every set's positions and mask are filled, and the stream
 * ends where ast_sample_sets leaves it. */
void ast_sample_sets_of(const ast_set_sampler *s, ast_rng *rng, int B, int lo, int hi, float *expr, float *pos,
                        float *mask);

#endif
