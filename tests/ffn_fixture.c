#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ffn_fixture.h"

static const ast_plugin_desc *load_desc(ffn_layer *l, const char *file)
{
    const char *build = getenv("ALPHAST_BUILD_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/plugins/ffn/%s", build ? build : ALPHAST_BUILD_DIR, file);
    cr_assert_eq(lt_dlinit(), 0, "lt_dlinit: %s", lt_dlerror());
    l->dl = lt_dlopenext(path);
    cr_assert_not_null(l->dl, "cannot load %s: %s", path, lt_dlerror());
    const ast_plugin_desc *(*entry)(const ast_host *) =
        (const ast_plugin_desc *(*)(const ast_host *))lt_dlsym(l->dl, "alphast_plugin_entry");
    cr_assert_not_null(entry, "%s has no alphast_plugin_entry", path);
    const ast_plugin_desc *d = entry(ast_host_table()); /* as the loader does: plugin_api.h keeps the table */
    cr_assert_eq(d->abi_major, AST_ABI_MAJOR);
    cr_assert_eq(d->kind, AST_KIND_FFN);
    cr_assert_leq(d->n_options, FFN_MAX_OPTS);
    return d;
}

/* Option text -> value, as the config loader would give it. */
static ast_optval parse_value(const ast_option_spec *o, const char *text)
{
    ast_optval v = {.s = text};
    switch (o->type) {
    case AST_OPT_BOOL: v.i = !strcmp(text, "true"); break;
    case AST_OPT_INT: v.i = strtoll(text, NULL, 10); break;
    case AST_OPT_FLOAT: v.f = strtod(text, NULL); break;
    case AST_OPT_ENUM: {
        size_t len = strlen(text);
        const char *p = o->choices;
        v.i = -1;
        for (int idx = 0; p && *p; idx++) {
            const char *bar = strchr(p, '|');
            size_t n = bar ? (size_t)(bar - p) : strlen(p);
            if (n == len && !strncmp(p, text, n)) v.i = idx;
            p = bar ? bar + 1 : p + n;
        }
        cr_assert_geq(v.i, 0, "option %s: %s is not one of %s", o->name, text, o->choices);
        break;
    }
    case AST_OPT_STRING: break;
    }
    v.f = o->type == AST_OPT_FLOAT ? v.f : (double)v.i;
    return v;
}

static void fill_options(ffn_layer *l, const char *opts)
{
    const ast_plugin_desc *d = l->desc;
    for (int i = 0; i < d->n_options; i++) snprintf(l->text[i], sizeof l->text[i], "%s", d->options[i].def);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", opts ? opts : "");
    for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        cr_assert_not_null(eq, "option override %s is not key=value", kv);
        *eq = '\0';
        int found = 0;
        for (int i = 0; i < d->n_options; i++)
            if (!strcmp(d->options[i].name, kv)) {
                snprintf(l->text[i], sizeof l->text[i], "%s", eq + 1);
                found = 1;
            }
        cr_assert(found, "plugin %s has no option %s", d->name, kv);
    }
    for (int i = 0; i < d->n_options; i++) l->opts[i] = parse_value(&d->options[i], l->text[i]);
}

int ffn_layer_open(ffn_layer *l, const char *file, const ast_layer_dims *dims, const char *opts, uint64_t seed)
{
    memset(l, 0, sizeof *l);
    l->desc = load_desc(l, file);
    l->dims = *dims;
    fill_options(l, opts);
    l->params = ast_params_new(seed);
    ast_create_args a = {.host = ast_host_table(), .scope = ast_scope_new(l->params, FFN_SCOPE),
                         .dims = &l->dims, .opts = l->opts};
    l->self = l->desc->create(&a, l->err, sizeof l->err);
    return l->self != NULL;
}

void ffn_layer_close(ffn_layer *l)
{
    ast_plugin_destroy(l->desc, l->self);
    ast_params_free(l->params);
    lt_dlclose(l->dl);
    lt_dlexit();
}

ast_tensor *ffn_forward(ffn_layer *l, ast_ctx *c, ast_tensor *x, ast_tensor *mask, ast_tensor *time)
{
    ast_fwd_args a = {.mask = mask, .time = time, .layer = l->dims.layer};
    return l->desc->forward(l->self, c, x, &a);
}

ast_tensor *ffn_param(const ffn_layer *l, const char *name)
{
    char full[512];
    snprintf(full, sizeof full, FFN_SCOPE ".%s", name);
    ast_tensor *t = ast_params_find(l->params, full);
    cr_assert_not_null(t, "no parameter %s", full);
    return t;
}

const ast_stat *ffn_stat(ast_ctx *c, const char *name)
{
    const ast_stat *s = ast_ctx_stats(c);
    for (int i = ast_ctx_n_stats(c) - 1; i >= 0; i--)
        if (!strcmp(s[i].name, name)) return &s[i];
    cr_assert_fail("statistic %s was not published", name);
    return NULL;
}

ast_tensor *ffn_loss(ast_ctx *c, const char *name)
{
    for (int i = 0; i < ast_ctx_n_losses(c); i++)
        if (!strcmp(ast_ctx_loss_name(c, i), name)) return ast_ctx_loss(c, i);
    return NULL;
}
