/* Writes a config tree back as YAML through libyaml's emitter, so that
 * quoting is always right and the output reloads to the same values.
 *
 * Every yaml_*_event_initialize is checked: libyaml leaves the event
 * untouched when it refuses one (a scalar that is not UTF-8), and emitting
 * that stale event again freed its strings twice. */
#include <stdlib.h>
#include <yaml.h>

#include "config_impl.h"

typedef struct dumper {
    yaml_emitter_t em;
    const ast_cfg_node *bad; /* the node whose text libyaml refused */
    int bad_key;             /* 1: its key, 0: its value */
} dumper;

/* `initialized` is the initializer's result: an event it refused is never
 * emitted (nor freed: it owns nothing). */
static int emit(dumper *d, yaml_event_t *ev, int initialized)
{
    if (!initialized) return -1;
    return yaml_emitter_emit(&d->em, ev) ? 0 : -1; /* the emitter owns ev now, even on failure */
}

static int emit_scalar(dumper *d, const ast_cfg_node *n, const char *text, int force_quotes, int is_key)
{
    yaml_event_t ev;
    yaml_scalar_style_t style = force_quotes ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE;
    int ok = yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, -1, 1, 1, style);
    if (!ok) {
        d->bad = n;
        d->bad_key = is_key;
    }
    return emit(d, &ev, ok);
}

static int emit_node(dumper *d, const ast_cfg_node *n)
{
    yaml_event_t ev;
    int ok = 0;
    switch (n->kind) {
    case AST_CFG_NULL: return emit_scalar(d, n, "null", 0, 0);
    case AST_CFG_SCALAR: return emit_scalar(d, n, n->value, cfg_text_is_null(n->value), 0) /* keep it a string */;
    case AST_CFG_MAP: ok = yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE); break;
    case AST_CFG_SEQ: ok = yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE); break;
    }
    if (emit(d, &ev, ok) < 0) return -1;
    for (int i = 0; i < n->n_items; i++) {
        if (n->kind == AST_CFG_MAP && emit_scalar(d, n->items[i], n->items[i]->key, 0, 1) < 0) return -1;
        if (emit_node(d, n->items[i]) < 0) return -1;
    }
    ok = n->kind == AST_CFG_MAP ? yaml_mapping_end_event_initialize(&ev) : yaml_sequence_end_event_initialize(&ev);
    return emit(d, &ev, ok);
}

static int emit_document(dumper *d, const ast_cfg_node *root)
{
    yaml_event_t ev;
    if (emit(d, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING)) < 0) return -1;
    if (emit(d, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1)) < 0) return -1;
    if (emit_node(d, root) < 0) return -1;
    if (emit(d, &ev, yaml_document_end_event_initialize(&ev, 1)) < 0) return -1;
    return emit(d, &ev, yaml_stream_end_event_initialize(&ev));
}

/* Loading and overrides reject such text first; this keeps the dumper
 * safe and clear for a tree built any other way. */
static void fail_bad_text(const dumper *d, ast_error *e)
{
    const ast_cfg_node *n = d->bad;
    char path[512];
    ast_cfg_escape(n->path, path, sizeof path);
    ast_cfg_fail(e, n->file, d->bad_key ? n->key_line : n->line, d->bad_key ? n->key_col : n->col, path,
                 "the %s is not valid UTF-8 text, so the config cannot be written; write keys and values in UTF-8",
                 d->bad_key ? "key" : "value");
}

int ast_cfg_dump(const ast_cfg *cfg, FILE *out, ast_error *e)
{
    dumper d = {.bad = NULL};
    AST_ASSERT(yaml_emitter_initialize(&d.em), "libyaml emitter initialisation failed");
    yaml_emitter_set_output_file(&d.em, out);
    yaml_emitter_set_unicode(&d.em, 1);
    int rc = emit_document(&d, cfg->root);
    if (rc < 0 && d.bad)
        fail_bad_text(&d, e);
    else if (rc < 0)
        ast_error_set(e, "%s: cannot write the config: %s; check the output file and disk space", cfg->name,
                      d.em.problem ? d.em.problem : "write error");
    yaml_emitter_delete(&d.em);
    return rc;
}

char *ast_cfg_dump_string(const ast_cfg *cfg, ast_error *e)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    AST_ASSERT(f, "open_memstream failed: out of memory");
    int rc = ast_cfg_dump(cfg, f, e);
    fclose(f);
    if (rc < 0) free(text);
    return rc < 0 ? NULL : text;
}
