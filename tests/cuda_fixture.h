/* Shared by the CUDA tests (test_cuda_ops.c, test_cuda_model.c): the CUDA
 * backend or a skipped test saying why, random data, copies of tensor data
 * and gradients to the host, and the comparison of a CUDA result with the
 * CPU's. Compiles with and without AST_HAVE_CUDA. */
#ifndef ALPHAST_TEST_CUDA_FIXTURE_H
#define ALPHAST_TEST_CUDA_FIXTURE_H

#include "engine/backend.h"

/* The CUDA backend; skips the calling test (cr_skip_test, with the reason)
 * when the build has no CUDA or no GPU can be used here. */
const ast_backend *cf_gpu(void);

/* n floats N(0, scale^2) from seed; none is exactly zero. */
void cf_normal(uint64_t seed, float *v, int64_t n, float scale);

/* Host copies (malloc'd, n >= 0 floats) of a tensor's data and gradient;
 * a NULL gradient reads as zeros. */
float *cf_read(ast_ctx *c, const ast_tensor *t);
float *cf_read_grad(ast_ctx *c, const ast_tensor *t);

/* max |got - want| / (max |want| + 1e-30): a NaN in got (or want) gives
 * +inf. *worst is where the largest difference is. */
double cf_rel_err(const float *got, const float *want, int64_t n, int64_t *worst);

/* Fails the test when cf_rel_err(got, want) > tol, naming `what`. tol 0
 * asks for the same bits (NaN-free). */
void cf_assert_close(const char *what, const float *got, const float *want, int64_t n, double tol);

/* The tolerance of a float32 result that adds `terms` values in another
 * order on the GPU than on the CPU (tree reductions, cuBLAS's kernels, FMA
 * contraction). Two orders differ by at most ~2 terms u sum|term| (Higham's
 * bound for recursive summation, u = 2^-24 = 6e-8); the largest result of
 * a tensor of random data is at least ~sum|term| / sqrt(terms), and actual
 * rounding errors grow as sqrt(terms) u sum|term| (random signs), so
 * 4 u terms = 2.4e-7 terms of the largest |CPU value| covers them with
 * margin. Never below 2e-6, a few ulp, for an op without a sum: one FMA
 * against a multiply and an add, CUDA's expf / erff / log1pf (within 2 ulp)
 * against ast_expf / ast_erff (within 1.4 ulp). */
double cf_sum_tol(int64_t terms);

/* ---- an op (or a fused kernel) on both backends ---------------------------- */

enum { CF_MAX_IN = 12 };
/* The seed of every case's contexts: dropout draws the same keys on both. */
#define CF_CTX_SEED 77

/* How an input's random values are drawn (never all zeros). */
typedef enum fill {
    FILL_NORMAL,    /* N(0, 1) */
    FILL_WIDE,      /* N(0, 12^2): both tails of sigmoid, softplus (threshold 20) and exp (overflow at 88.7) */
    FILL_AWAY,      /* |v| in [0.5, 2.5), random sign: divisors */
    FILL_MASK,      /* 1, or 0 for about a quarter */
    FILL_ZERO_ROWS, /* N(0, 1) with every third row of the last axis zero: zero norms and distances */
    FILL_SHIFTED,   /* N(1, 1): sums of terms of mostly one sign */
    FILL_ZEROS,     /* all 0: a mask with nothing valid */
} fill;

typedef struct cf_input {
    int ndim;
    int64_t shape[AST_MAX_DIMS];
    fill fill;
    int grad; /* requires a gradient */
} cf_input;

typedef ast_tensor *(*cf_op_fn)(ast_ctx *c, ast_tensor *const *in, const void *arg);

typedef struct cf_case {
    const char *name;
    cf_op_fn run;
    const void *arg;
    int n_in;
    cf_input in[CF_MAX_IN];
    double tol; /* of the output and of every gradient, cf_rel_err; 0: the same bits */
} cf_case;

/* Host data of a case: input values, gradients put there before the
 * backward in the accumulating runs, and the seed of dL/dy. */
typedef struct cf_data {
    float *x[CF_MAX_IN], *pre[CF_MAX_IN];
    uint64_t seed;
} cf_data;

typedef struct cf_result {
    int ndim;
    int64_t shape[AST_MAX_DIMS], size;
    float *y, *g[CF_MAX_IN];
    size_t peak; /* arena bytes the run carved */
} cf_result;

/* n random values of an input's shape and fill, from seed (malloc'd). */
float *cf_make_values(const cf_input *in, uint64_t seed);
/* A case's inputs and the gradients put there before an accumulating run. */
cf_data cf_make_data(const cf_case *k);
void cf_free_data(const cf_case *k, cf_data *d);
/* Arena tensor of in's shape holding x; with `pre` (requires a gradient)
 * its gradient already holds those values. */
ast_tensor *cf_make_input(ast_ctx *c, const cf_input *in, const float *x, const float *pre);
/* One run of case k on backend b: the inputs (with d->pre as gradients
 * already there when `accumulate`), the op, dL/dy from d->seed, the
 * backward; with `poison` the first that many arena bytes are NaN first. */
cf_result cf_run_on(const ast_backend *b, const cf_case *k, const cf_data *d, int accumulate, size_t poison);
void cf_free_result(cf_result *r);
/* Case k on the CPU and on gpu: CUDA against the CPU (k->tol, outputs and
 * every gradient); a second CUDA run over a NaN-filled arena must give the
 * first run's bits (what an op leaves unwritten, or a fresh gradient it adds
 * to, shows as NaN there, where fresh device memory reads as zeros; and the
 * same inputs give the same bits); and with gradients already there before
 * the backward (ast_grad's +=), CUDA against the CPU again. */
void cf_check_case(const ast_backend *gpu, const cf_case *k);
/* The same on data the caller made (cf_make_data, then values of its own:
 * degenerate inputs a fill cannot draw). */
void cf_check_data(const ast_backend *gpu, const cf_case *k, const cf_data *d);

/* Inputs in case tables: CF_IN(requires grad, fill, dims...). */
#define CF_IN(g, f, ...) {(int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), {__VA_ARGS__}, f, g}

#endif
