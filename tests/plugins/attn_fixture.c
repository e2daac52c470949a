/* Test fixture for the loader, not a model component: a valid attention
 * plugin whose option table covers every option type. Its forward is a
 * plain copy (no tape node, so no gradient) because only loading,
 * describing and the host hand-off are under test. It includes nothing
 * but plugin.h, so the out-of-tree test also builds it with pkg-config. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <alphast/plugin.h>

typedef struct fixture {
    const ast_host *host;
} fixture;

static const ast_option_spec options[] = {
    {"enabled", AST_OPT_BOOL, "true", 0, 0, NULL, "a boolean"},
    {"heads", AST_OPT_INT, "4", 1, 64, NULL, "an integer in [1, 64]"},
    {"learning_rate", AST_OPT_FLOAT, "1e-3", 0, 1, NULL, "a number in [0, 1]"},
    {"scale", AST_OPT_FLOAT, "-2.5", 1, 0, NULL, "a number with no range (min > max)"},
    {"gate", AST_OPT_ENUM, "elementwise", 0, 0, "headwise|elementwise|none", "one of three choices"},
    {"label", AST_OPT_STRING, "fixture", 0, 0, NULL, "free text"},
};

static void *create(const ast_create_args *a, char *err, size_t errlen)
{
    fixture *f = malloc(sizeof *f);
    if (f) f->host = a->host;
    else snprintf(err, errlen, "out of memory");
    return f;
}

static void destroy(void *self) { free(self); }

static ast_tensor *forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    const fixture *f = self;
    ast_tensor *y = f->host->ops->zeros(c, x->ndim, x->shape);
    memcpy(y->data, x->data, (size_t)x->size * sizeof *x->data);
    return y;
}

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_ATTENTION, "fixture", "1.2.3", "loader test fixture: copies its input"),
    .options = options,
    .n_options = AST_N_OPTIONS(options),
    .create = create,
    .destroy = destroy,
    .forward = forward,
};

AST_PLUGIN_DEFINE(desc)
