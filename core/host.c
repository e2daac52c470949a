/* The service table handed to plugins: every op of ops.def plus the step,
 * parameter, RNG and logging services, and cblas_sgemm. */
#include <cblas.h>
#include <stdarg.h>

#include "alphast/core.h"
#include "alphast/sink.h"

void ast_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
               const float *b, int ldb, float beta, float *cmat, int ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
                m, n, k, alpha, a, lda, b, ldb, beta, cmat, ldc);
}

static uint64_t host_rng_u64(ast_ctx *c) { return ast_rng_next(ast_ctx_rng(c)); }
static float host_rng_uniform(ast_ctx *c) { return ast_rng_uniform01(ast_ctx_rng(c)); }
static float host_rng_normal(ast_ctx *c) { return ast_rng_gauss(ast_ctx_rng(c)); }

static const ast_host host = {
    .abi_major = AST_ABI_MAJOR,
    .abi_minor = AST_ABI_MINOR,
    .struct_size = sizeof(ast_host),
    .param = ast_param,
    .alloc = ast_alloc,
    .training = ast_training,
    .grad_enabled = ast_grad_enabled,
    .grad = ast_grad,
    .record = ast_record,
    .rng_u64 = host_rng_u64,
    .rng_uniform = host_rng_uniform,
    .rng_normal = host_rng_normal,
    .add_loss = ast_add_loss,
    .stat = ast_publish_stat,
    .sgemm = ast_sgemm,
    .emit = ast_sink_emit,
    .warn_once = ast_sink_warn_once,
    .log = ast_log,
#define AST_OP(ret, name, args) .name = ast_##name,
#include "alphast/ops.def"
#undef AST_OP
    .scheduled = ast_ctx_scheduled,
    .parallel_for = ast_parallel_for,
    .alloc_uninit = ast_alloc_uninit,
};

const ast_host *ast_host_table(void) { return &host; }
