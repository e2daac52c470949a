/* Internals shared by the config sources: the tree, the schema and the
 * validator. Not part of the API (see alphast/config.h). */
#ifndef ALPHAST_CONFIG_IMPL_H
#define ALPHAST_CONFIG_IMPL_H

#include "config/config.h"

struct ast_cfg {
    char *name;         /* file name of the loaded config, for messages */
    ast_cfg_node *root; /* always a MAP */
};

/* File name of values given by ast_cfg_set. */
#define CFG_OVERRIDE_FILE "override"

/* ---- tree (config_tree.c) ------------------------------------------------ */

/* A detached node; `file` must outlive it (it is not copied). */
ast_cfg_node *cfg_node_new(ast_cfg_kind kind, const char *file, int line, int col);
/* Appends child to a MAP (key != NULL) or SEQ (key NULL) and sets the
 * paths of child and everything below it. */
void cfg_node_attach(ast_cfg_node *parent, const char *key, ast_cfg_node *child);
/* Puts `child` in the place of `old` (same key) and frees old. */
void cfg_node_replace(ast_cfg_node *old, ast_cfg_node *child);
/* Takes child out of its parent (its paths stay until it is attached again). */
void cfg_node_detach(ast_cfg_node *child);
void cfg_node_free(ast_cfg_node *n);
ast_cfg_node *cfg_child(const ast_cfg_node *map, const char *key);
/* YAML 1.1 null when unquoted: empty, ~ or null. */
int cfg_text_is_null(const char *text);
/* Parses one YAML document of any shape (empty text: an empty MAP) whose
 * root will sit at key path `path` ("" for a whole config). */
ast_cfg_node *cfg_parse(const char *text, size_t len, const char *file, const char *path, ast_error *e);


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

#endif
