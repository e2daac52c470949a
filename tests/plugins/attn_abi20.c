/* Loader test fixture: an attention plugin compiled against the plugin
 * headers of ABI 2.0 (the frozen copy in tests/plugins/abi-2.0), loaded by a
 * newer host of the same major. Its forward reaches host fields and ops at
 * slots spread over the 2.0 tables, up to the last op of 2.0, so any field
 * or op that moved since would call the wrong function and change the
 * result test_abi.c checks:
 *   y = (2 x + 1) + x * x + scheduled("abi.shift", 0.25)
 * and it adds mse(x, y) as the loss "abi20" and publishes mean(y) as "abi20.mean". */
#include <stdlib.h>

#include <alphast/plugin.h>

#if AST_ABI_MAJOR != 2 || AST_ABI_MINOR != 0
#error "this fixture must be built against the ABI 2.0 headers in tests/plugins/abi-2.0"
#endif

static const ast_host *host;

static void *create(const ast_create_args *a, char *err, size_t errlen)
{
    host = a->host;
    return host->alloc_uninit ? (void *)host : NULL;
}

static void destroy(void *self) {}

static ast_tensor *forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    const ast_ops *op = host->ops;
    float shift = host->scheduled(c, "abi.shift", 0.25f);
    ast_tensor *y = op->add(c, op->affine(c, x, 2.0f, 1.0f + shift), op->mul(c, x, x));
    host->add_loss(c, "abi20", op->mse(c, x, y, NULL));
    float *mean = host->alloc_uninit(c, sizeof *mean);
    *mean = op->mean(c, y)->data[0];
    host->stat(c, "abi20.mean", a->layer, mean, 1);
    host->log(AST_LOG_DEBUG, "abi20 forward on %lld values", (long long)x->size);
    return y;
}

static const ast_plugin_desc desc = {
    AST_PLUGIN_DESC_INIT(AST_KIND_ATTENTION, "abi20", "2.0.0", "fixture built against the ABI 2.0 headers"),
    .create = create,
    .destroy = destroy,
    .forward = forward,
};

AST_PLUGIN_DEFINE(desc)
