/* What each config is: the settings of its runs' config.yaml that set it
 * apart from the other configs. The sweep's overrides are not on disk, and
 * would not say enough if they were (a config may differ from another by
 * what the base file sets); the resolved configs do. A setting counts when
 * every run of the config has it (so not the seed) and some other config
 * does not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "report_internal.h"

static int all_scalars(const ast_cfg_node *n)
{
    for (int i = 0; i < n->n_items; i++)
        if (n->items[i]->kind != AST_CFG_SCALAR) return 0;
    return 1;
}

/* A plugin's {name: gated, ...} reads as "attention=gated", as its override does. */
static const char *shown_path(const ast_cfg_node *n)
{
    int plugin_name = n->key && !strcmp(n->key, "name") && n->parent && n->parent->path[0];
    return plugin_name ? n->parent->path : n->path;
}

static void leaves(const ast_cfg_node *n, ast_strlist *out)
{
    char buf[1024];
    if (n->kind == AST_CFG_SCALAR || n->kind == AST_CFG_NULL) {
        snprintf(buf, sizeof buf, "%s=%s", shown_path(n), n->kind == AST_CFG_SCALAR ? n->value : "null");
        ast_strlist_push(out, buf);
        return;
    }
    if (n->kind == AST_CFG_SEQ && all_scalars(n)) { /* a list of names: one setting */
        int used = snprintf(buf, sizeof buf, "%s=[", n->path);
        for (int i = 0; i < n->n_items && used < (int)sizeof buf; i++)
            used += snprintf(buf + used, sizeof buf - (size_t)used, "%s%s", i ? ", " : "", n->items[i]->value);
        if (used < (int)sizeof buf - 1) strcat(buf, "]");
        ast_strlist_push(out, buf);
        return;
    }
    for (int i = 0; i < n->n_items; i++) leaves(n->items[i], out);
}

void rp_read_settings(const char *path, ast_strlist *out)
{
    ast_error e = {""};
    ast_cfg *cfg = ast_cfg_load_file(path, &e);
    if (!cfg) return;
    leaves(ast_cfg_get(cfg, ""), out);
    ast_cfg_free(cfg);
}

int rp_common_settings(const rp_sweep *s, const int *runs, int n, ast_strlist *out)
{
    const ast_strlist *first = NULL;
    for (int i = 0; i < n && !first; i++)
        if (s->runs[runs[i]].settings.n) first = &s->runs[runs[i]].settings;
    if (!first) return 0;
    for (int k = 0; k < first->n; k++) {
        int everywhere = 1;
        for (int i = 0; i < n && everywhere; i++) {
            const ast_strlist *l = &s->runs[runs[i]].settings;
            everywhere = !l->n || ast_strlist_find(l, first->v[k]) >= 0;
        }
        if (everywhere) ast_strlist_push(out, first->v[k]);
    }
    return 1;
}

/* The settings every run of config c that has a config.yaml shares. */
static int common_settings(const rp_sweep *s, int c, ast_strlist *out)
{
    return rp_common_settings(s, s->configs[c].runs, s->configs[c].n_runs, out);
}

int rp_config_settings(const rp_sweep *s, int c, ast_strlist *out)
{
    ast_strlist mine = {0};
    if (!common_settings(s, c, &mine)) return 0;
    int *shared = ast_xmalloc((size_t)(mine.n + 1) * sizeof *shared);
    for (int k = 0; k < mine.n; k++) shared[k] = 1;
    for (int o = 0; o < s->n_configs; o++) {
        ast_strlist theirs = {0};
        if (o != c && common_settings(s, o, &theirs))
            for (int k = 0; k < mine.n; k++) shared[k] &= ast_strlist_find(&theirs, mine.v[k]) >= 0;
        ast_strlist_free(&theirs);
    }
    for (int k = 0; k < mine.n; k++)
        if (!shared[k]) ast_strlist_push(out, mine.v[k]);
    free(shared);
    ast_strlist_free(&mine);
    return 1;
}
