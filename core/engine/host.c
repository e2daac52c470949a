/* The service table handed to plugins: the op set (each op runs on the
 * step's backend), parameters and saved buffers, step services, RNG, the
 * thread pool and host GEMM for CPU kernels, logging, and the copies of
 * tensor data to and from host memory. Fields are
 * appended at the tail only (alphast/abi_layout.h asserts every offset). */
#include "engine/backend.h"
#include "engine/ctx_internal.h"
#include "engine/sink.h"

/* Draws a plugin uses on the host: counted, as a captured step's replay
 * cannot make them again (graph.h); a kernel's key comes from rng_key. */
static uint64_t host_rng_u64(ast_ctx *c) { return ast_rng_next(ast_ctx_rng_loose(c)); }
static float host_rng_uniform(ast_ctx *c) { return ast_rng_uniform01(ast_ctx_rng_loose(c)); }
static float host_rng_normal(ast_ctx *c) { return ast_rng_gauss(ast_ctx_rng_loose(c)); }

static const ast_ops ops = {
    .n_ops = sizeof(ast_ops) / sizeof(void (*)(void)) - 1,
#define AST_OP(slot, ret, name, params, args) .name = ast_##name,
#include "alphast/ops.def"
#undef AST_OP
};

static const ast_host host = {
    .abi_major = AST_ABI_MAJOR,
    .abi_minor = AST_ABI_MINOR,
    .struct_size = sizeof(ast_host),
    .ops = &ops,
    .param = ast_param,
    .buffer = ast_buffer,
    .alloc = ast_alloc,
    .alloc_uninit = ast_alloc_uninit,
    .training = ast_training,
    .grad_enabled = ast_grad_enabled,
    .grad = ast_grad,
    .record = ast_record,
    .rng_u64 = host_rng_u64,
    .rng_uniform = host_rng_uniform,
    .rng_normal = host_rng_normal,
    .add_loss = ast_add_loss,
    .stat = ast_publish_stat,
    .scheduled = ast_ctx_scheduled,
    .parallel_for = ast_parallel_for,
    .sgemm = ast_sgemm,
    .emit = ast_sink_emit,
    .warn_once = ast_sink_warn_once,
    .log = ast_log,
    .read = ast_tensor_read,
    .write = ast_tensor_write,
    .rng_key = ast_ctx_key,
    .stats_wanted = ast_ctx_stats_wanted,
    .stat_tensor = ast_publish_stat_tensor,
};

const ast_host *ast_host_table(void) { return &host; }
