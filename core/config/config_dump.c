/* Writes a config tree back as YAML through libyaml's emitter, so that
 * quoting is always right and the output reloads to the same values. */
#include <stdlib.h>
#include <yaml.h>

#include "config_impl.h"

static int emit(yaml_emitter_t *em, yaml_event_t *ev) { return yaml_emitter_emit(em, ev) ? 0 : -1; }

static int emit_scalar(yaml_emitter_t *em, const char *text, int force_quotes)
{
    yaml_event_t ev;
    yaml_scalar_style_t style = force_quotes ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE;
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, -1, 1, 1, style);
    return emit(em, &ev);
}

static int emit_node(yaml_emitter_t *em, const ast_cfg_node *n)
{
    yaml_event_t ev;
    switch (n->kind) {
    case AST_CFG_NULL: return emit_scalar(em, "null", 0);
    case AST_CFG_SCALAR: return emit_scalar(em, n->value, cfg_text_is_null(n->value)) /* keep it a string */;
    case AST_CFG_MAP:
        yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE);
        break;
    case AST_CFG_SEQ:
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE);
        break;
    }
    if (emit(em, &ev) < 0) return -1;
    for (int i = 0; i < n->n_items; i++) {
        if (n->kind == AST_CFG_MAP && emit_scalar(em, n->items[i]->key, 0) < 0) return -1;
        if (emit_node(em, n->items[i]) < 0) return -1;
    }
    if (n->kind == AST_CFG_MAP)
        yaml_mapping_end_event_initialize(&ev);
    else
        yaml_sequence_end_event_initialize(&ev);
    return emit(em, &ev);
}

static int emit_document(yaml_emitter_t *em, const ast_cfg_node *root)
{
    yaml_event_t ev;
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    if (emit(em, &ev) < 0) return -1;
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    if (emit(em, &ev) < 0 || emit_node(em, root) < 0) return -1;
    yaml_document_end_event_initialize(&ev, 1);
    if (emit(em, &ev) < 0) return -1;
    yaml_stream_end_event_initialize(&ev);
    return emit(em, &ev);
}

int ast_cfg_dump(const ast_cfg *cfg, FILE *out, ast_error *e)
{
    yaml_emitter_t em;
    AST_ASSERT(yaml_emitter_initialize(&em), "libyaml emitter initialisation failed");
    yaml_emitter_set_output_file(&em, out);
    yaml_emitter_set_unicode(&em, 1);
    int rc = emit_document(&em, cfg->root);
    if (rc < 0)
        ast_error_set(e, "%s: cannot write the config: %s; check the output file and disk space", cfg->name,
                      em.problem ? em.problem : "write error");
    yaml_emitter_delete(&em);
    return rc;
}

char *ast_cfg_dump_string(const ast_cfg *cfg, ast_error *e)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = ast_cfg_dump(cfg, f, e);
    fclose(f);
    if (rc < 0) free(text);
    return rc < 0 ? NULL : text;
}
