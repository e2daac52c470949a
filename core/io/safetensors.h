/* alphast/safetensors.h: reading and writing safetensors files (weights,
 * golden inputs/outputs, checkpoints) and saving/loading a parameter store.
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...,
 * "__metadata__": {"key": "value"}}, then the data buffer; offsets are
 * relative to the buffer. Every error is one line "FILE: problem; hint". */
#ifndef ALPHAST_SAFETENSORS_H
#define ALPHAST_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "engine/engine.h"

/* Most dims a stored tensor may have (ast_tensor itself has AST_MAX_DIMS). */
#define AST_ST_MAX_DIMS 8

typedef enum ast_st_dtype {
    AST_ST_BOOL, AST_ST_U8, AST_ST_I8, AST_ST_I16, AST_ST_U16, AST_ST_F16, AST_ST_BF16,
    AST_ST_I32, AST_ST_U32, AST_ST_F32, AST_ST_F64, AST_ST_I64, AST_ST_U64
} ast_st_dtype;

const char *ast_st_dtype_name(ast_st_dtype t); /* "F32" */
size_t ast_st_dtype_size(ast_st_dtype t);      /* bytes per element */
/* "F32" -> AST_ST_F32; 0, or -1 for a name safetensors does not define. */
int ast_st_dtype_parse(const char *name, ast_st_dtype *out);
/* "[64, 32]" into buf, for messages. */
const char *ast_st_shape_str(int ndim, const int64_t *shape, char *buf, size_t n);

/* ---- reading ------------------------------------------------------------- */

typedef struct ast_st_file ast_st_file;

/* Reads the whole file and validates its header: length within the file,
 * a JSON object, every entry's dtype/shape/data_offsets consistent, entries
 * tiling the buffer exactly (no overlap, no hole), no duplicate names,
 * __metadata__ string -> string. NULL with e set on failure. */
ast_st_file *ast_st_open(const char *path, ast_error *e);
void ast_st_close(ast_st_file *f);
const char *ast_st_path(const ast_st_file *f);

/* Tensors in header order; ast_st_find returns the index or -1. */
int ast_st_count(const ast_st_file *f);
const char *ast_st_name(const ast_st_file *f, int i);
int ast_st_find(const ast_st_file *f, const char *name);
ast_st_dtype ast_st_dtype_of(const ast_st_file *f, int i);
int ast_st_ndim(const ast_st_file *f, int i);
const int64_t *ast_st_shape(const ast_st_file *f, int i);
int64_t ast_st_numel(const ast_st_file *f, int i);
/* Raw little-endian bytes (not necessarily aligned) and their count. */
const void *ast_st_data(const ast_st_file *f, int i);
size_t ast_st_nbytes(const ast_st_file *f, int i);

/* Copies tensor `name` into out (numel floats), converting F32, F64, F16,
 * BF16, I64 and I32. When shape is not NULL the stored shape must equal
 * shape[0..ndim). Every value must be finite (the error names the first bad
 * index). Returns 0 or -1 with e set. */
int ast_st_read_f32(const ast_st_file *f, const char *name, int ndim, const int64_t *shape, float *out,
                    ast_error *e);
/* The same for integers: I64, I32, U8 and BOOL into int64_t. */
int ast_st_read_i64(const ast_st_file *f, const char *name, int ndim, const int64_t *shape, int64_t *out,
                    ast_error *e);

/* __metadata__: the value of key or NULL; and all pairs in header order. */
const char *ast_st_metadata(const ast_st_file *f, const char *key);
int ast_st_metadata_count(const ast_st_file *f);
const char *ast_st_metadata_key(const ast_st_file *f, int i);
const char *ast_st_metadata_value(const ast_st_file *f, int i);

/* ---- writing ------------------------------------------------------------- */

/* Collects tensors and metadata, then writes them atomically. The layout is
 * that of the golden exports: tensors in the order added, both in the JSON
 * and in the buffer; compact JSON with "__metadata__" last (omitted when
 * empty); header padded with spaces to a multiple of 8 bytes. */
typedef struct ast_st_writer ast_st_writer;

ast_st_writer *ast_st_writer_new(void);
void ast_st_writer_free(ast_st_writer *w);
/* `data` (numel little-endian elements of dtype, e.g. float for F32,
 * int64_t for I64) is not copied: keep it alive until ast_st_writer_write.
 * Names must be unique. */
void ast_st_writer_add(ast_st_writer *w, const char *name, ast_st_dtype dtype, int ndim, const int64_t *shape,
                       const void *data);
/* Copied; setting a key again replaces its value. */
void ast_st_writer_metadata(ast_st_writer *w, const char *key, const char *value);
int ast_st_writer_write(const ast_st_writer *w, const char *path, ast_error *e);

/* ---- parameter stores ----------------------------------------------------- */

/* Every parameter as F32 under its state_dict name, in registration order,
 * then every buffer (host->buffer: plugin state that is saved but not
 * trained) under its full name. metadata: NULL or {"key", "value", ..., NULL}. */
int ast_params_save(const ast_params *p, const char *path, const char *const *metadata, ast_error *e);
/* A host copy of what ast_params_save writes, the parameters (read from
 * their backend's memory) then the buffers, one after the other in that
 * order, to add to a writer (which keeps pointers, not copies); free() it. */
float *ast_params_host_copy(const ast_params *p);

/* ast_params_load's flags. */
enum {
    AST_LOAD_STRICT = 1, /* the file may hold no tensor that is not a parameter or buffer of the model */
    AST_LOAD_BUFFERS = 2 /* every buffer must be in the file too (a checkpoint to resume from) */
};

/* A PyTorch Lightning checkpoint's state_dict names the model's parameters
 * "model.<name>": a tensor missing under its own name is looked up there. */
#define AST_LIGHTNING_PREFIX "model."

/* Every parameter must be in the file with its exact shape and finite
 * values. A buffer in the file is loaded (same checks); one the file lacks
 * (weights from the PyTorch reference or an older alphast) is set to zero,
 * its initial value, unless AST_LOAD_BUFFERS asks for it. flags: 0 or
 * AST_LOAD_* or'ed (1 is AST_LOAD_STRICT). On failure nothing is changed
 * and e lists the first missing/unexpected names or the shape mismatch. */
int ast_params_load(ast_params *p, const char *path, int flags, ast_error *e);
/* The same from an open file, where only the first n_required parameters
 * must be in it: later ones (registered after the model, such as a
 * training run's mask tokens) are loaded when the file has them and keep
 * their values when it does not. ast_params_load requires them all. */
int ast_params_load_from(ast_params *p, const ast_st_file *f, int flags, int n_required, ast_error *e);

/* ---- what alphast's weights and checkpoints say about themselves --------- */

/* __metadata__ keys of best.safetensors and checkpoint.safetensors. */
#define AST_META_VERSION "alphast_version" /* the version of alphast that wrote it */
#define AST_META_GENES "genes"             /* the model's genes in input order, a JSON array of strings */
#define AST_META_CONFIG "config"           /* the run's resolved config.yaml */

/* names[0..n) as a JSON array of strings; free() it. */
char *ast_st_names_json(const char *const *names, int n);
/* 0 if f has a gene list equal to genes[0..n) in order, or none and no
 * alphast version (a PyTorch state_dict: with a warning that the genes go
 * unchecked); else -1 with e naming the file, the first gene that differs
 * (or the missing list) and the fix. */
int ast_st_check_genes(const ast_st_file *f, const char *const *genes, int n, ast_error *e);

#endif
