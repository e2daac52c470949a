#include <criterion/criterion.h>
#include <ltdl.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_fixture.h"

const ast_plugin_desc *pf_load(const char *area, const char *file)
{
    cr_assert_eq(lt_dlinit(), 0, "lt_dlinit: %s", lt_dlerror());
    const char *dir = getenv("ALPHAST_BUILD_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/plugins/%s/%s", dir ? dir : ALPHAST_BUILD_DIR, area, file);
    lt_dlhandle h = lt_dlopenext(path);
    cr_assert_not_null(h, "cannot load %s: %s", path, lt_dlerror());
    const ast_plugin_desc *(*entry)(void) = (const ast_plugin_desc *(*)(void))lt_dlsym(h, "alphast_plugin_entry");
    cr_assert_not_null(entry, "%s has no alphast_plugin_entry", path);
    const ast_plugin_desc *d = entry();
    cr_assert_eq(d->abi_major, AST_ABI_MAJOR, "%s: ABI %u", path, d->abi_major);
    return d;
}

/* Index of `value` in an enum's "a|b|c" choices, or -1. */
static int choice_index(const char *choices, const char *value)
{
    size_t n = strlen(value);
    const char *p = choices;
    for (int i = 0; p; i++) {
        if (!strncmp(p, value, n) && (p[n] == '|' || !p[n])) return i;
        p = strchr(p, '|');
        if (p) p++;
    }
    return -1;
}

static ast_optval parse_option(const ast_option_spec *o, const char *text)
{
    ast_optval v = {.s = text};
    switch (o->type) {
    case AST_OPT_BOOL: v.i = !strcmp(text, "true"); break;
    case AST_OPT_ENUM:
        v.i = choice_index(o->choices, text);
        cr_assert_geq(v.i, 0, "option %s: %s is not one of %s", o->name, text, o->choices);
        break;
    default: v.i = strtoll(text, NULL, 10); break;
    }
    v.f = o->type == AST_OPT_FLOAT ? strtod(text, NULL) : (double)v.i;
    return v;
}

/* The option's text: an override "name=value" if given, else the default. */
static const char *option_text(const ast_option_spec *o, const char *const *overrides, int n)
{
    size_t len = strlen(o->name);
    for (int i = 0; i < n; i++)
        if (!strncmp(overrides[i], o->name, len) && overrides[i][len] == '=') return overrides[i] + len + 1;
    return o->def;
}

pf_instance pf_create(const ast_plugin_desc *d, const char *prefix, const ast_layer_dims *dims, uint64_t seed,
                      const char *const *overrides, int n_overrides)
{
    pf_instance pi = {.desc = d, .params = ast_params_new(seed), .dims = *dims};
    ast_optval opts[32];
    cr_assert_leq(d->n_options, 32);
    for (int i = 0; i < d->n_options; i++)
        opts[i] = parse_option(&d->options[i], option_text(&d->options[i], overrides, n_overrides));
    char err[512] = "";
    ast_create_args a = {ast_host_table(), ast_scope_new(pi.params, prefix), &pi.dims, opts};
    pi.self = d->create(&a, err, sizeof err);
    cr_assert_not_null(pi.self, "create %s: %s", d->name, err);
    return pi;
}

void pf_destroy(pf_instance *pi)
{
    pi->desc->destroy(pi->self);
    ast_params_free(pi->params);
}

ast_tensor *pf_forward(const pf_instance *pi, ast_ctx *c, ast_tensor *x, ast_tensor *mask)
{
    ast_fwd_args a = {.mask = mask, .layer = pi->dims.layer};
    return pi->desc->forward(pi->self, c, x, &a);
}

ast_tensor *pf_const(int ndim, const int64_t *shape, const float *data)
{
    ast_tensor *t = calloc(1, sizeof *t);
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->size = ast_shape_size(ndim, shape);
    t->data = calloc((size_t)t->size, sizeof(float));
    if (data) memcpy(t->data, data, (size_t)t->size * sizeof(float));
    return t;
}

void pf_const_free(ast_tensor *t)
{
    if (!t) return;
    free(t->data);
    free(t);
}

typedef struct gc_plugin {
    const pf_instance *pi;
    ast_tensor *mask;
    int training;
} gc_plugin;

static ast_tensor *gc_plugin_forward(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const gc_plugin *g = ud;
    ast_ctx_set_training(c, g->training);
    return pf_forward(g->pi, c, in[0], g->mask);
}

gc_result pf_gradcheck(const pf_instance *pi, ast_tensor *x, ast_tensor *mask, int training, float h,
                       double floor)
{
    int n = ast_params_count(pi->params);
    ast_tensor **in = malloc((size_t)(n + 1) * sizeof *in);
    in[0] = x;
    for (int i = 0; i < n; i++) in[i + 1] = ast_params_at(pi->params, i);
    gc_plugin g = {pi, mask, training};
    gc_result r = gc_check(gc_plugin_forward, in, n + 1, &g, h, floor);
    free(in);
    return r;
}
