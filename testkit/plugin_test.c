/* The plugin test fixture (alphast/plugin_test.h): loads a plugin's shared
 * object, builds an instance over the core's host table and a parameter
 * store of its own, runs it and gradient-checks it. In-tree tests use it
 * through tests/plugin_fixture.h; libalphast-plugintest installs it for
 * plugins built out of tree. Descriptors and options go through the core
 * loader's own checks (core/plugin), so what passes here loads in
 * alphast-run. */
#include <ltdl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alphast/plugin_test.h"
#include "engine/backend.h"
#include "engine/engine.h"
#include "gradcheck.h"
#include "plugin/plugin_internal.h"

struct ast_test_plugin {
    ast_plugin plugin; /* filled as the core loader fills it */
    int ltdl;          /* lt_dlinit succeeded: lt_dlexit on unload */
};

/* What an instance keeps besides its public fields. */
typedef struct layer_priv {
    char *scope;
    char **text;     /* copies of the "key=value" options, split at '=' */
    int n_text;
    ast_optval *opts; /* what create saw, alive as long as the instance */
} layer_priv;

static void say(char *err, size_t n, const char *fmt, ...)
{
    if (!err || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

/* ---- loading ------------------------------------------------------------- */

void ast_test_unload(ast_test_plugin *tp)
{
    if (!tp) return;
    if (tp->plugin.handle) lt_dlclose(tp->plugin.handle);
    if (tp->ltdl) lt_dlexit();
    free(tp->plugin.name);
    free(tp->plugin.path);
    free(tp);
}

/* Opens the module at path with the core loader's own code, so what
 * passes here loads in alphast-run. */
static ast_test_plugin *open_plugin(const char *path, ast_plugin_kind kind, const char *name, char *err, size_t n)
{
    ast_test_plugin *tp = ast_xcalloc(1, sizeof *tp);
    ast_error e = {{0}};
    tp->plugin.kind = kind;
    tp->plugin.name = ast_xstrdup(name);
    if (!(tp->ltdl = !lt_dlinit())) say(err, n, "cannot initialise libltdl: %s", lt_dlerror());
    else if (ast_plugin_open(&tp->plugin, path, &e)) return tp;
    else say(err, n, "%s", e.msg);
    ast_test_unload(tp);
    return NULL;
}

ast_test_plugin *ast_test_load_named(const char *dir, ast_plugin_kind kind, const char *name, char *err, size_t n)
{
    if (kind < AST_KIND_ATTENTION || kind > AST_KIND_MONITOR) {
        say(err, n, "plugin kind %d is none of attention, ffn, monitor", (int)kind);
        return NULL;
    }
    if (!name || !ast_plugin_name_ok(name)) {
        say(err, n, "'%s' is not a valid plugin name (letters, digits, '_' and '-' only)", name ? name : "(null)");
        return NULL;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_%s", dir, ast_kind_prefix(kind), name);
    return open_plugin(path, kind, name, err, n);
}

ast_test_plugin *ast_test_load(const char *path, char *err, size_t n)
{
    /* The kind and name the file name promises: <prefix>_<name>[.la|.so]. */
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t len = strlen(base);
    for (const char *const *ext = (const char *const[]){".la", ".so", NULL}; *ext; ext++)
        if (len > strlen(*ext) && !strcmp(base + len - strlen(*ext), *ext)) len -= strlen(*ext);
    for (int k = AST_KIND_ATTENTION; k <= AST_KIND_MONITOR; k++) {
        const char *prefix = ast_kind_prefix((ast_plugin_kind)k);
        size_t lp = strlen(prefix);
        char name[AST_PLUGIN_NAME_MAX + 1];
        if (len <= lp + 1 || len - lp - 1 > AST_PLUGIN_NAME_MAX || strncmp(base, prefix, lp) || base[lp] != '_')
            continue;
        memcpy(name, base + lp + 1, len - lp - 1);
        name[len - lp - 1] = '\0';
        if (ast_plugin_name_ok(name)) return open_plugin(path, (ast_plugin_kind)k, name, err, n);
    }
    say(err, n, "%s: a plugin file is named attn_<name>, ffn_<name> or monitor_<name> (.so), or alphast-run "
        "cannot find it", path);
    return NULL;
}

const ast_plugin_desc *ast_test_desc(const ast_test_plugin *p) { return &p->plugin.desc; }
const char *ast_test_path(const ast_test_plugin *p) { return p->plugin.path; }

/* ---- instances ------------------------------------------------------------- */

static void priv_free(layer_priv *v)
{
    if (!v) return;
    for (int i = 0; i < v->n_text; i++) free(v->text[i]);
    free(v->text);
    free(v->opts);
    free(v->scope);
    free(v);
}

/* The option values: defaults, then the "key=value" texts, checked by the
 * loader's ast_plugin_options. The texts are copied into v, which the
 * values point into. */
static int options(const ast_plugin_desc *d, const char *const *given, int n_given, layer_priv *v, char *err,
                   size_t n)
{
    /* The loader reads a plugin's kind, name and descriptor only. */
    ast_plugin view = {.kind = d->kind, .name = (char *)d->name, .path = (char *)"the test", .desc = *d};
    ast_optsrc *src = ast_xcalloc((size_t)n_given + 1, sizeof *src);
    ast_error e = {""};
    int ok = 1;
    v->text = ast_xcalloc((size_t)n_given + 1, sizeof *v->text);
    v->opts = ast_xcalloc((size_t)d->n_options + 1, sizeof *v->opts);
    for (int i = 0; i < n_given && ok; i++) {
        const char *text = given ? given[i] : NULL;
        char *eq = text ? strchr(text, '=') : NULL;
        if (!(ok = eq && eq > text)) {
            say(err, n, "option '%s' is not key=value", text ? text : "(null)");
            break;
        }
        char *copy = v->text[v->n_text++] = ast_xstrdup(text);
        copy[eq - text] = '\0';
        src[i] = (ast_optsrc){.key = copy, .value = copy + (eq - text) + 1, .where = text};
    }
    if (ok && !(ok = ast_plugin_options(&view, src, n_given, v->opts, &e))) say(err, n, "%s", e.msg);
    if (ok && !(ok = !ast_plugin_check_backend(&view, ast_backend_cpu()->name, &e))) say(err, n, "%s", e.msg);
    free(src);
    return ok;
}

int ast_test_create(ast_test_layer *l, const ast_plugin_desc *d, const char *scope, const ast_layer_dims *dims,
                    uint64_t seed, const char *const *opts, int n_opts, char *err, size_t n)
{
    int layer = d->kind != AST_KIND_MONITOR;
    *l = (ast_test_layer){.desc = d, .dims = dims ? *dims : (ast_layer_dims){0}};
    if (layer && !dims) {
        say(err, n, "%s plugin '%s' needs layer dims", ast_kind_name(d->kind), d->name);
        return -1;
    }
    layer_priv *v = ast_xcalloc(1, sizeof *v);
    v->scope = ast_xstrdup(scope ? scope : "");
    if (!options(d, opts, n_opts, v, err, n)) {
        priv_free(v);
        return -1;
    }
    char why[512] = "";
    l->params = ast_params_new(seed);
    ast_create_args a = {.host = ast_host_table(), .scope = layer ? ast_scope_new(l->params, v->scope) : NULL,
                         .dims = layer ? &l->dims : NULL, .opts = v->opts, .backend = ast_backend_cpu()->name};
    if (!layer || ast_plugin_dims_ok(d, &l->dims, why, sizeof why)) l->self = d->create(&a, why, sizeof why);
    if (!l->self) {
        say(err, n, "%s plugin '%s' refused to create an instance: %s", ast_kind_name(d->kind), d->name,
            why[0] ? why : "no reason given");
        ast_params_free(l->params);
        priv_free(v);
        *l = (ast_test_layer){0};
        return -1;
    }
    l->priv = v;
    return 0;
}

void ast_test_destroy(ast_test_layer *l)
{
    if (!l->desc) return;
    ast_plugin_destroy(l->desc, l->self);
    ast_params_free(l->params);
    priv_free(l->priv);
    *l = (ast_test_layer){0};
}

int ast_test_n_params(const ast_test_layer *l) { return ast_params_count(l->params); }
ast_tensor *ast_test_param(const ast_test_layer *l, int i) { return ast_params_at(l->params, i); }

ast_tensor *ast_test_find(const ast_test_layer *l, const char *name)
{
    const layer_priv *v = l->priv;
    char full[1024];
    snprintf(full, sizeof full, "%s%s%s", v->scope, v->scope[0] ? "." : "", name);
    ast_tensor *t = ast_params_find(l->params, full);
    return t ? t : ast_params_find_buffer(l->params, full);
}

/* ---- running ----------------------------------------------------------------- */

ast_ctx *ast_test_ctx_new(uint64_t seed, int training)
{
    ast_ctx *c = ast_ctx_new(seed);
    ast_ctx_set_training(c, training);
    return c;
}

void ast_test_ctx_reset(ast_ctx *c) { ast_ctx_reset(c); }
void ast_test_ctx_free(ast_ctx *c) { ast_ctx_free(c); }

ast_tensor *ast_test_tensor(int ndim, const int64_t *shape, const float *data, int requires_grad)
{
    AST_ASSERT(ndim >= 1 && ndim <= AST_MAX_DIMS, "a tensor of %d dims", ndim);
    ast_tensor *t = ast_xcalloc(1, sizeof *t);
    t->ndim = ndim;
    memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->size = ast_shape_size(ndim, shape);
    t->data = ast_xcalloc((size_t)t->size, sizeof(float));
    if (data) memcpy(t->data, data, (size_t)t->size * sizeof(float));
    if (requires_grad) {
        t->grad = ast_xcalloc((size_t)t->size, sizeof(float));
        t->flags = AST_REQUIRES_GRAD;
    }
    return t;
}

void ast_test_fill_normal(ast_tensor *t, uint64_t seed, float scale)
{
    ast_rng r;
    ast_rng_seed(&r, seed);
    for (int64_t i = 0; i < t->size; i++) t->data[i] = scale * ast_rng_gauss(&r);
}

void ast_test_tensor_free(ast_tensor *t)
{
    if (!t) return;
    free(t->data);
    free(t->grad);
    free(t);
}

ast_tensor *ast_test_forward(const ast_test_layer *l, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    if (!l->desc->forward) return NULL;
    ast_fwd_args args = a ? *a : (ast_fwd_args){0};
    args.layer = l->dims.layer;
    return l->desc->forward(l->self, c, x, &args);
}

const ast_stat *ast_test_stat(const ast_ctx *c, const char *name, int layer)
{
    const ast_stat *s = ast_ctx_stats(c);
    for (int i = 0; i < ast_ctx_n_stats(c); i++)
        if (!strcmp(s[i].name, name) && s[i].layer == layer) return &s[i];
    return NULL;
}

/* ---- gradient check ------------------------------------------------------------- */

typedef struct gc_layer {
    const ast_test_layer *l;
    ast_tensor *x;
    const ast_fwd_args *a;
    int training;
} gc_layer;

/* gc_check perturbs the checked tensors in place, so the forward arguments
 * (positions, time) are the ones it perturbs. */
static ast_tensor *gc_layer_forward(ast_ctx *c, ast_tensor *const *in, void *ud)
{
    const gc_layer *g = ud;
    ast_ctx_set_training(c, g->training);
    return ast_test_forward(g->l, c, g->x, g->a);
}

static int checkable(const ast_tensor *t) { return t && t->grad && (t->flags & AST_REQUIRES_GRAD); }

ast_test_gc_result ast_test_gradcheck(const ast_test_layer *l, ast_tensor *x, const ast_fwd_args *a,
                                      const ast_test_gc_opts *o)
{
    ast_test_gc_opts opt = o ? *o : (ast_test_gc_opts){0};
    ast_fwd_args args = a ? *a : (ast_fwd_args){0};
    int np = ast_params_count(l->params), n = 0;
    ast_tensor **in = ast_xmalloc((size_t)(np + 3) * sizeof *in);
    const char **names = ast_xmalloc((size_t)(np + 3) * sizeof *names);
    ast_tensor *extra[3] = {x, args.positions, args.time};
    const char *extra_names[3] = {"x", "positions", "time"};
    for (int i = 0; i < 3; i++)
        if (checkable(extra[i])) {
            in[n] = extra[i];
            names[n++] = extra_names[i];
        }
    for (int i = 0; i < np; i++) {
        in[n] = ast_params_at(l->params, i);
        names[n] = in[n]->name;
        n++;
    }

    ast_test_gc_result res = {.worst = "nothing"};
    for (int i = 0; i < n; i++) res.n_checked += in[i]->size;
    if (res.n_checked) {
        gc_layer g = {l, x, &args, opt.training};
        gc_result r = gc_check(gc_layer_forward, in, n, &g, opt.h > 0 ? opt.h : AST_TEST_GC_H,
                               opt.floor > 0 ? opt.floor : AST_TEST_GC_FLOOR);
        res.max_err = r.max_err;
        res.worst = names[r.worst_input];
        res.worst_input = r.worst_input;
        res.worst_index = r.worst_index;
        res.analytic = r.analytic;
        res.numeric = r.numeric;
        res.pass = r.max_err < (opt.tol > 0 ? opt.tol : AST_TEST_GC_TOL);
    }
    free(in);
    free(names);
    return res;
}
