/* alphast/config.h: the run configuration (docs/model.md §9.4): a YAML file read with
 * libyaml into a tree of nodes that remember where they were written,
 * checked against the schema of every known key, with typed getters,
 * Hydra-style overrides, a YAML dump and the model's sizes and plugins.
 *
 * Layout: the reference config.yaml (every key of docs/model.md §9.4, model blocks
 * at the top level) plus alphast's own keys:
 *   attention: gated                       # a plugin name, or
 *   attention: {name: gated, gate_type: headwise}   # name + plugin options
 *   ffn:       moe | {name: moe, num_experts: 4, top_k: 2}
 *   monitors:  [grad_norm, {name: moe_balance, every: 10}]
 *   TransformerLayer_setting.honour_mask: true
 * Plugin options are not known to the schema; they pass through as
 * ast_optsrc and the plugin loader checks them against the plugin's table.
 *
 * Every error is one line "FILE:LINE:COL: KEY.PATH: message; fix", e.g.
 *   run.yaml:12:3: training.learnig_rate: unknown key; did you mean 'learning_rate'?
 *
 * Values follow YAML 1.1 as the reference's PyYAML read them, but typed by
 * the schema rather than by their spelling: a float key takes 1e-4 (a
 * string to PyYAML) as well as 0.0001 and 3; an int key rejects 1.5; a bool
 * key takes true/false, yes/no, on/off. Quoting does not change the type. */
#ifndef ALPHAST_CONFIG_H
#define ALPHAST_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "base/base.h"
#include "base/text.h"

#define AST_MAX_PLUGIN_OPTS 32

/* One option as the config wrote it: key, value as YAML text, and where
 * ("config.yaml:12:5"), so errors can point at the line. */
typedef struct ast_optsrc {
    const char *key;
    const char *value;
    const char *where;
} ast_optsrc;

typedef enum ast_cfg_kind { AST_CFG_NULL, AST_CFG_SCALAR, AST_CFG_MAP, AST_CFG_SEQ } ast_cfg_kind;

/* One node of the tree, read-only for users (the config owns it). */
typedef struct ast_cfg_node {
    ast_cfg_kind kind;
    const char *key;   /* its key in the parent mapping; NULL for list items and the root */
    const char *path;  /* "training.scheduler.type", "monitors[1].name"; "" for the root */
    const char *value; /* scalar text as written (quotes removed); NULL unless SCALAR */
    const char *where; /* "file:line:col" of the value (1-based) */
    const char *file;
    int line, col;         /* of the value */
    int key_line, key_col; /* of the key (= line, col for list items) */
    struct ast_cfg_node *parent;
    struct ast_cfg_node **items; /* MAP: values in file order (each has its key); SEQ: items */
    int n_items;
} ast_cfg_node;

typedef struct ast_cfg ast_cfg;

/* Parse and validate; NULL with e set on any error (the file cannot be
 * read, malformed YAML, the top level is not a mapping, duplicate key,
 * unknown key, wrong type, value not among an enum's choices, YAML alias).
 * `name` is the file name used in messages. */
ast_cfg *ast_cfg_load_file(const char *path, ast_error *e);
ast_cfg *ast_cfg_load_string(const char *text, const char *name, ast_error *e);
void ast_cfg_free(ast_cfg *cfg);

/* Sets KEY.PATH to a YAML value ("1e-3", "gated", "{name: moe, top_k: 1}",
 * "[grad_norm]"), creating missing mappings on the way and checking the key
 * and value against the schema (errors are located at "override:LINE:COL"
 * of the value text). A mapping merges into the mapping already there
 * (Hydra), except that one naming another plugin replaces the plugin.
 * Setting an option under a plugin given by name alone
 * (attention.gate_type=headwise on `attention: gated`) turns it into
 * {name: gated, gate_type: headwise}. 0 on success, -1 with e set. The
 * config is unchanged on failure. */
int ast_cfg_set(ast_cfg *cfg, const char *path, const char *yaml_value, ast_error *e);
/* One command-line override in Hydra's grammar (docs/config.md):
 *   KEY=VALUE    ast_cfg_set: every key the schema knows exists, at its
 *                default if the config does not write it
 *   +KEY=VALUE   adds a key the config does not write (or writes as null)
 *   ++KEY=VALUE  adds or sets: the same as KEY=VALUE
 *   ~KEY         deletes a key the config writes: back to its default
 *   ~KEY=VALUE   the same, only if it holds VALUE
 * VALUE is YAML with Hydra's {a:1} for {a: 1}. Several values (a,b,
 * range(...), choice(...)) are a sweep, refused here (ast_cfg_sweep_parse).
 * Errors are located at "override:1:COL", COL counted in this text. */
int ast_cfg_override(ast_cfg *cfg, const char *override, ast_error *e);

/* A sweep override as `alphast-run sweep -m` and alphast.grid take it:
 * KEY=V1,V2,... (split at commas outside quotes and brackets, blanks
 * trimmed), KEY=range(START, STOP[, STEP]) (STOP excluded, as in Python)
 * or KEY=choice(V1, V2, ...). One value is a sweep of one; ~KEY (a
 * deletion) has none. `key` keeps its prefix (+, ++, ~). */
typedef struct ast_cfg_sweep {
    char *key;
    char **values;
    int n;
} ast_cfg_sweep;
int ast_cfg_sweep_parse(const char *override, ast_cfg_sweep *out, ast_error *e);
void ast_cfg_sweep_free(ast_cfg_sweep *s);

/* Keys alphast accepts, so that the reference's config.yaml loads, but
 * does not implement in full: training.precision (float32 and bf16-mixed,
 * no float16), distributed.* (one process) and logging.* (TensorBoard or
 * none, besides metrics.jsonl).
 * A value other than the default (or 32 and bf16-mixed for precision, none
 * for the logger; whether this machine runs bf16 is ast_precision_from_cfg's
 * to say) is an error located at the value, saying
 * what is not supported and what to write instead. Train and sweep call
 * it before a run starts. 0, or -1 with e set. */
int ast_cfg_check_supported(const ast_cfg *cfg, ast_error *e);

/* The node at a dotted path, NULL if the config does not write it. */
const ast_cfg_node *ast_cfg_get(const ast_cfg *cfg, const char *path);

/* Typed values: the config's value, else the schema default. The path must
 * be a schema key of that type (else a programming error aborts). str
 * serves string and enum keys and returns NULL for null/no default. */
int64_t ast_cfg_int(const ast_cfg *cfg, const char *path);
double ast_cfg_float(const ast_cfg *cfg, const char *path);
int ast_cfg_bool(const ast_cfg *cfg, const char *path);
const char *ast_cfg_str(const ast_cfg *cfg, const char *path);

/* Writes the config as it stands (file + overrides, in file order) as YAML,
 * loadable again with the same values. 0 on success, -1 with e set. */
int ast_cfg_dump(const ast_cfg *cfg, FILE *out, ast_error *e);
/* The same YAML as a malloc'd string (the run's config.yaml, the sweep's
 * run ids); NULL with e set on failure. */
char *ast_cfg_dump_string(const ast_cfg *cfg, ast_error *e);

/* "FILE:LINE:COL: PATH: " + message, the path left out when empty. */
void ast_cfg_fail(ast_error *e, const char *file, int line, int col, const char *path, const char *fmt, ...)
    AST_PRINTF(6, 7);

/* How deep a config may nest (the root mapping is level 1, a key path's
 * levels count for an override's value). The schema is about 4 levels deep
 * and plugin options one or two more; the limit keeps the recursive
 * parser, validator and dumper far from the end of the C stack. */
#define AST_CFG_MAX_DEPTH 64

/* The offset of the first byte of s[0..n) that is not valid UTF-8 or is a
 * control character (tab included), or -1 when every byte is fine: keys and
 * names that do not come through libyaml (overrides, sweep scripts) are
 * checked with it. */
long ast_cfg_bad_text(const char *s, size_t n);
/* 1 if s is UTF-8 text, control characters allowed (anndata keeps an obs
 * name "a\tb"): what an .h5ad string must be for anndata to decode it. */
int ast_utf8_text(const char *s);
/* s for a message: bytes outside printable ASCII and valid UTF-8 appear
 * as \xNN; truncated to size (with "..."). */
void ast_cfg_escape(const char *s, char *out, size_t size);

/* The name messages use for the config (its file name). */
const char *ast_cfg_name(const ast_cfg *cfg);
/* The schema default of a key as YAML text; NULL if it has none. */
const char *ast_cfg_default(const char *path);

/* A plugin as the config names it: `name` or {name: x, options...}. */
typedef struct ast_cfg_plugin {
    const char *name;
    const char *where; /* of the name */
    ast_optsrc opts[AST_MAX_PLUGIN_OPTS];
    int n_opts;
} ast_cfg_plugin;

/* The plugin written at a validated node: `attention`, `ffn`, or one item
 * of `monitors` (ast_cfg_get(cfg, "monitors")->items[i]). Strings point
 * into the config. */
void ast_cfg_plugin_of(const ast_cfg_node *n, ast_cfg_plugin *out);


#endif
