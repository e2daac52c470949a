/* Whether two values are the same value of a key, as the schema types it:
 * what ~KEY=VALUE and the check of unsupported keys ask. */
#include <string.h>

#include "config_impl.h"

/* Two scalar texts as values of key k (NULL: plain text). */
static int same_scalar(const char *a, const char *b, const cfg_key *k)
{
    double x, y;
    int p, q;
    if (k && (k->type == CFG_INT || k->type == CFG_FLOAT) && !ast_yaml_float(a, &x) && !ast_yaml_float(b, &y))
        return x == y;
    if (k && k->type == CFG_BOOL && !ast_yaml_bool(a, &p) && !ast_yaml_bool(b, &q)) return p == q;
    return !strcmp(a, b);
}

int cfg_same_value(const ast_cfg_node *a, const ast_cfg_node *b)
{
    if (a->kind != b->kind) return 0;
    if (a->kind == AST_CFG_SCALAR) return same_scalar(a->value, b->value, cfg_schema_find(a->path));
    if (a->n_items != b->n_items) return 0;
    for (int i = 0; i < a->n_items; i++) {
        const ast_cfg_node *other = a->kind == AST_CFG_MAP ? cfg_child(b, a->items[i]->key) : b->items[i];
        if (!other || !cfg_same_value(a->items[i], other)) return 0;
    }
    return 1;
}

int cfg_is_default(const ast_cfg_node *n, const cfg_key *k)
{
    if (!k->def) return 0;
    if (n->kind == AST_CFG_NULL) return cfg_text_is_null(k->def);
    return n->kind == AST_CFG_SCALAR && !cfg_text_is_null(k->def) && same_scalar(n->value, k->def, k);
}
