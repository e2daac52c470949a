/* Fault-test fixture, not a model component: a dense FFN that, from its
 * fourth forward call on, misbehaves as $EVIL_MODE says (segv, abort,
 * exit, fpe), so test_plugin_faults.c can check alphast names it. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <alphast/plugin_api.h>

AST_API_DEFINE;

typedef struct evil {
    ast_weights fc;
    int calls;
} evil;

static void *create(const ast_create_args *a, char *err, size_t errlen)
{
    evil *f = calloc(1, sizeof *f);
    AST_REQUIRE(f, err, errlen, "out of memory");
    f->fc = ast_linear_params(a->scope, "fc", a->dims->d_model, a->dims->d_model, 1);
    return f;
}

static void destroy(void *self) { free(self); }

static void misbehave(const char *mode)
{
    if (!strcmp(mode, "segv")) raise(SIGSEGV);
    if (!strcmp(mode, "abort")) abort();
    if (!strcmp(mode, "exit")) exit(3);
    if (!strcmp(mode, "fpe")) raise(SIGFPE);
}

static ast_tensor *forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    evil *f = self;
    const char *mode = getenv("EVIL_MODE");
    if (mode && ++f->calls > 3) misbehave(mode);
    return ast_linear(c, x, f->fc.weight, f->fc.bias);
}

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_FFN, "evil", "1.0", "fault-test fixture: misbehaves in forward"),
    .create = create,
    .destroy = destroy,
    .forward = forward,
};

AST_PLUGIN_DEFINE(desc)
