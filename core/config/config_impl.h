/* Internals shared by the config sources: the tree, the schema and the
 * validator. Not part of the API (see alphast/config.h). */
#ifndef ALPHAST_CONFIG_IMPL_H
#define ALPHAST_CONFIG_IMPL_H

#include "config/config.h"

struct ast_cfg {
    char *name;         /* file name of the loaded config, for messages */
    ast_cfg_node *root; /* always a MAP */
};

/* File name of values given by ast_cfg_set and ast_cfg_override. */
#define CFG_OVERRIDE_FILE "override"

/* Where a parsed text sits in the override the user wrote: its first line
 * starts at column col0, and the spaces cfg_hydra_yaml put in ({a:1} ->
 * {a: 1}) are not the user's. */
typedef struct cfg_ins {
    size_t byte;   /* offset of the inserted space in the parsed text */
    int line, col; /* its 0-based line and column (in characters) there */
} cfg_ins;
typedef struct cfg_place {
    int col0;
    cfg_ins *ins;
    int n_ins;
} cfg_place;

/* ---- tree (config_tree.c) ------------------------------------------------ */

/* A detached node; `file` must outlive it (it is not copied). */
ast_cfg_node *cfg_node_new(ast_cfg_kind kind, const char *file, int line, int col);
/* Appends child to a MAP (key != NULL) or SEQ (key NULL) and sets the
 * paths of child and everything below it. */
void cfg_node_attach(ast_cfg_node *parent, const char *key, ast_cfg_node *child);
/* A deep copy, detached, with the same positions. */
ast_cfg_node *cfg_node_clone(const ast_cfg_node *n);
/* Puts `child` in the place of `old` (same key) and frees old. */
void cfg_node_replace(ast_cfg_node *old, ast_cfg_node *child);
/* Takes child out of its parent (its paths stay until it is attached again). */
void cfg_node_detach(ast_cfg_node *child);
void cfg_node_free(ast_cfg_node *n);
ast_cfg_node *cfg_child(const ast_cfg_node *map, const char *key);
/* YAML 1.1 null when unquoted: empty, ~ or null. */
int cfg_text_is_null(const char *text);
/* Parses one YAML document of any shape (empty text: an empty MAP, or null
 * for a value at a non-empty `path`, as KEY= gives) whose
 * root will sit at key path `path` ("" for a whole config). `place` maps
 * positions back to an override's text; NULL: the text is the file. */
ast_cfg_node *cfg_parse(const char *text, size_t len, const char *file, const char *path, const cfg_place *place,
                        ast_error *e);


/* ---- schema (config_schema.c) ------------------------------------------- */

typedef enum cfg_type {
    CFG_MAP,     /* a mapping of schema keys */
    CFG_INT,
    CFG_FLOAT,
    CFG_BOOL,
    CFG_STR,     /* any scalar text, or null */
    CFG_ENUM,    /* one of `choices` */
    CFG_ANY,     /* not checked (dead reference keys such as distributed.devices) */
    CFG_PLUGIN,  /* a plugin name, or {name: x, options...} */
    CFG_PLUGINS  /* a list of CFG_PLUGIN */
} cfg_type;

typedef enum cfg_bound { CFG_FREE, CFG_POSITIVE, CFG_NONNEG, CFG_PROB } cfg_bound;

typedef struct cfg_key {
    const char *path;
    cfg_type type;
    const char *def;     /* default as YAML text; NULL: none (absence means something) */
    const char *choices; /* CFG_ENUM: "a|b|c" */
    cfg_bound bound;
} cfg_key;

const cfg_key *cfg_schema_find(const char *path);
/* Names of the schema keys directly under `parent` ("" = top level). */
int cfg_schema_children(const char *parent, const char **names, int max);

/* ---- validation (config_validate.c) -------------------------------------- */

/* The whole tree below a MAP node whose path is a schema map (or the root). */
int cfg_validate_map(const ast_cfg_node *map, ast_error *e);
/* One node against its key (any type). */
int cfg_validate_node(const ast_cfg_node *n, const cfg_key *k, ast_error *e);
/* A plugin option's value: a single scalar. */
int cfg_validate_option(const ast_cfg_node *n, ast_error *e);
/* Unknown key `key` under schema map `parent` at (file, line, col). */
void cfg_fail_unknown(ast_error *e, const char *file, int line, int col, const char *parent,
                      const char *key);
/* How a node reads in a message: 'text', nothing (null), a mapping, a list. */
const char *cfg_describe(const ast_cfg_node *n, char *buf, size_t size);

/* ---- comparing values (config_compare.c) ---------------------------------- */

/* Is b the value a holds? Scalars compare as the type of a's schema key
 * (1e-3 is 0.001, yes is true), else as text; mappings by key, lists by
 * position. */
int cfg_same_value(const ast_cfg_node *a, const ast_cfg_node *b);
/* Is n (a leaf of key k) the key's default? */
int cfg_is_default(const ast_cfg_node *n, const cfg_key *k);

/* ---- Hydra's override grammar (config_hydra.c) ----------------------------- */

typedef enum cfg_op {
    CFG_OP_SET,    /* KEY=VALUE */
    CFG_OP_ADD,    /* +KEY=VALUE: the config must not write KEY yet */
    CFG_OP_FORCE,  /* ++KEY=VALUE: add or set */
    CFG_OP_DELETE  /* ~KEY, ~KEY=VALUE */
} cfg_op;

typedef struct cfg_override {
    cfg_op op;
    char *key;         /* the key path (malloc'd) */
    int key_col;       /* 1-based column of the key in the override */
    const char *value; /* into the override's text; NULL for ~KEY */
    int value_col;
} cfg_override;

/* Splits one override into prefix, key and value; refuses a value that is
 * a sweep (a,b  range()  choice()). 0, or -1 with e set (o->key freed). */
int cfg_override_parse(const char *text, cfg_override *o, ast_error *e);
/* The value as YAML (malloc'd): a space after each flow-mapping key's ':',
 * where Hydra's {a:1} has none and YAML would read the key "a:1"; the
 * insertions go to place (free place->ins). */
char *cfg_hydra_yaml(const char *value, cfg_place *place);
/* The length of s's first item: up to its first comma outside quotes and
 * brackets (all of s if it has none). */
size_t cfg_hydra_item(const char *s);
/* Is the value a sweep: several items, range(...) or choice(...)? */
int cfg_is_sweep(const char *value);
/* The columns (characters) of the first n bytes of s. */
int cfg_columns(const char *s, size_t n);
/* The first n bytes of s as a string (malloc'd). */
char *cfg_copy_n(const char *s, size_t n);

/* ---- editing the tree (config_edit.c) -------------------------------------- */

/* Applies a parsed override whose value (if any) is the YAML `yaml` placed
 * by `place`. The config is unchanged on failure. */
int cfg_edit(ast_cfg *cfg, const cfg_override *o, const char *yaml, const cfg_place *place, ast_error *e);

#endif
