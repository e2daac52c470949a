/* A dataset as named flat arrays ("parts"): what the .h5ad reader child
 * sends its parent (data_h5ad_child.c) and what the preprocessing cache
 * stores (data_cache.c, as safetensors tensors), so that both carry the
 * same fields and one function checks what comes back. Internal to
 * core/data. */
#ifndef ALPHAST_DATA_PACK_H
#define ALPHAST_DATA_PACK_H

#include "data/data.h"
#include "io/safetensors.h"

/* Names: "dims", "expr", "obs.3.codes", ... */
#define AST_PART_NAME 32

typedef struct ast_part {
    char name[AST_PART_NAME];
    ast_st_dtype dtype; /* AST_ST_I64, I32, F32, F64 or U8 (strings, each with its NUL) */
    int64_t n;          /* elements */
    void *data;
    int owned;          /* data is the parts' to free (else it points into a dataset or a file) */
} ast_part;

typedef struct ast_parts {
    ast_part *v;
    int n, cap;
} ast_parts;

/* Appends a part; `owned` says whether ast_parts_free frees data. */
void ast_parts_add(ast_parts *p, const char *name, ast_st_dtype dtype, int64_t n, void *data, int owned);
const ast_part *ast_parts_find(const ast_parts *p, const char *name);
void ast_parts_free(ast_parts *p);

/* The parts of d: views of its arrays, with its names joined into owned
 * blocks. Valid while d is. */
void ast_data_pack(const ast_dataset *d, ast_parts *p);
/* A dataset from parts, every size and index checked against the others
 * (they come from another process or from a file); owned arrays are
 * taken over (their parts no longer own them), others copied. -1 with
 * why in e (d left empty). `from` names the source in errors. */
int ast_data_unpack(ast_parts *p, const char *from, ast_dataset *d, ast_error *e);

#endif
