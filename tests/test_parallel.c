/* The kernel thread pool: every index exactly once, nested and forked use,
 * and ops on tensors big enough to be split giving the same bits as the
 * same ops on single rows (which run on one thread). */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <string.h>
#include <unistd.h>

#include "train/optim.h"
#include "gradcheck.h"

typedef struct coverage {
    atomic_int *hits;
    pthread_t threads[64];
    atomic_int n_ranges;
} coverage;

static void count_range(void *arg, int64_t lo, int64_t hi)
{
    coverage *cv = arg;
    int k = atomic_fetch_add(&cv->n_ranges, 1);
    if (k < 64) cv->threads[k] = pthread_self();
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&cv->hits[i], 1);
}

static int run_coverage(int64_t n, int64_t grain, coverage *cv)
{
    cv->hits = calloc((size_t)n + 1, sizeof *cv->hits);
    atomic_store(&cv->n_ranges, 0);
    ast_parallel_for(n, grain, count_range, cv);
    for (int64_t i = 0; i < n; i++)
        if (atomic_load(&cv->hits[i]) != 1) return (int)i + 1;
    free(cv->hits);
    return 0;
}

Test(parallel, every_index_is_visited_once)
{
    const int64_t sizes[] = {0, 1, 1000, 32767, 32768, 1000003};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        coverage cv = {0};
        cr_assert_eq(run_coverage(sizes[k], 16384, &cv), 0, "n = %lld", (long long)sizes[k]);
    }
}

Test(parallel, big_ranges_are_split_across_the_threads)
{
    coverage cv = {0};
    cr_assert_eq(run_coverage(1 << 20, 1024, &cv), 0);
    int threads = ast_parallel_threads();
    cr_assert_eq(atomic_load(&cv.n_ranges), threads, "%d ranges for %d threads", atomic_load(&cv.n_ranges), threads);
    for (int i = 1; i < threads; i++) cr_assert(!pthread_equal(cv.threads[0], cv.threads[i]) || threads == 1);
}

Test(parallel, small_ranges_stay_on_the_caller)
{
    coverage cv = {0};
    cr_assert_eq(run_coverage(100, 1024, &cv), 0);
    cr_assert_eq(atomic_load(&cv.n_ranges), 1);
    cr_assert(pthread_equal(cv.threads[0], pthread_self()));
}

static void nested_range(void *arg, int64_t lo, int64_t hi)
{
    coverage *inner = arg;
    for (int64_t i = lo; i < hi; i++) ast_parallel_for(1 << 16, 1024, count_range, &inner[i]);
}

Test(parallel, a_nested_call_runs_serially_and_completes)
{
    coverage inner[2] = {0};
    for (int i = 0; i < 2; i++) inner[i].hits = calloc(1 << 16, sizeof *inner[i].hits);
    ast_parallel_for(2, 1, nested_range, inner);
    for (int i = 0; i < 2; i++)
        for (int64_t k = 0; k < 1 << 16; k++) cr_assert_eq(atomic_load(&inner[i].hits[k]), 1, "%d/%lld", i, (long long)k);
}

/* The sweep runner and the bench fork: a child must not wait for the
 * parent's workers, which it does not have. */
Test(parallel, a_forked_child_has_a_working_pool)
{
    coverage cv = {0};
    cr_assert_eq(run_coverage(1 << 20, 1024, &cv), 0); /* the parent's pool is up */
    pid_t pid = fork();
    if (pid == 0) _exit(run_coverage(1 << 20, 1024, &cv) ? 1 : 0);
    int status = 0;
    alarm(60);
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
}

/* ---- ops split across threads ------------------------------------------- */

enum { ROWS = 300, COLS = 512 }; /* 153,600 elements: several ranges per op */

static ast_tensor *filled(ast_ctx *c, int64_t rows, int64_t cols, uint64_t seed)
{
    ast_tensor *t = ast_zeros(c, 2, (int64_t[]){rows, cols});
    ast_rng r;
    ast_rng_seed(&r, seed);
    for (int64_t i = 0; i < t->size; i++) t->data[i] = 2.0f * ast_rng_gauss(&r);
    return t;
}

static ast_tensor *row_of(ast_ctx *c, const ast_tensor *t, int64_t r)
{
    return ast_tensor_from(c, 2, (int64_t[]){1, t->shape[1]}, t->data + r * t->shape[1]);
}

typedef ast_tensor *(*row_op)(ast_ctx *c, ast_tensor *x);
static ast_tensor *op_gelu(ast_ctx *c, ast_tensor *x) { return ast_gelu(c, x); }
static ast_tensor *op_relu(ast_ctx *c, ast_tensor *x) { return ast_relu(c, x); }
static ast_tensor *op_softmax(ast_ctx *c, ast_tensor *x) { return ast_softmax(c, x, -1); }
static ast_tensor *op_rmsnorm(ast_ctx *c, ast_tensor *x) { return ast_rmsnorm(c, x, NULL, 1e-6f); }
static ast_tensor *op_square(ast_ctx *c, ast_tensor *x) { return ast_mul(c, x, x); }
static ast_tensor *op_layernorm(ast_ctx *c, ast_tensor *x) { return ast_layernorm(c, x, NULL, NULL, 1e-5f); }

/* Forward values and input gradients (of sum(y * x), so every element's
 * gradient differs) of the whole tensor against row-by-row runs. */
static void check_rowwise(row_op op, const char *name)
{
    ast_ctx *c = ast_ctx_new(1);
    ast_params *p = ast_params_new(1);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){ROWS, COLS}, 2.0f);
    ast_tensor *src = filled(c, ROWS, COLS, 7);
    ast_tensor *y = op(c, x);
    ast_backward(c, ast_sum(c, ast_mul(c, y, src)));
    for (int64_t r = 0; r < ROWS; r++) {
        ast_ctx *rc = ast_ctx_new(1);
        ast_params *rp = ast_params_new(1);
        ast_tensor *xr = gc_input(rp, "x", 2, (int64_t[]){1, COLS}, 1.0f);
        memcpy(xr->data, x->data + r * COLS, COLS * sizeof(float));
        ast_tensor *yr = op(rc, xr);
        ast_backward(rc, ast_sum(rc, ast_mul(rc, yr, row_of(rc, src, r))));
        for (int64_t k = 0; k < COLS; k++) {
            cr_assert_eq(y->data[r * COLS + k], yr->data[k], "%s y[%lld, %lld]", name, (long long)r, (long long)k);
            cr_assert_eq(x->grad[r * COLS + k], xr->grad[k], "%s dx[%lld, %lld]", name, (long long)r, (long long)k);
        }
        ast_params_free(rp);
        ast_ctx_free(rc);
    }
    ast_params_free(p);
    ast_ctx_free(c);
}

Test(parallel, split_gelu_matches_rows) { check_rowwise(op_gelu, "gelu"); }
Test(parallel, split_relu_matches_rows) { check_rowwise(op_relu, "relu"); }
Test(parallel, split_softmax_matches_rows) { check_rowwise(op_softmax, "softmax"); }
Test(parallel, split_layernorm_matches_rows) { check_rowwise(op_layernorm, "layernorm"); }
Test(parallel, split_rmsnorm_matches_rows) { check_rowwise(op_rmsnorm, "rmsnorm"); }
Test(parallel, split_binary_op_matches_rows) { check_rowwise(op_square, "mul"); }

/* A linear's bias is copied into every row and its gradient summed down them, column ranges on
 * different threads: against a double-precision sum (float accumulation of
 * 300 O(1) terms: relative error ~300 * 6e-8 at worst, 2e-5 allowed). */
Test(parallel, split_linear_bias_gradient_sums_every_row)
{
    ast_ctx *c = ast_ctx_new(1);
    ast_params *p = ast_params_new(3);
    ast_tensor *x = gc_input(p, "x", 2, (int64_t[]){ROWS, COLS}, 1.0f);
    ast_tensor *w = gc_input(p, "w", 2, (int64_t[]){COLS, COLS}, 0.05f);
    ast_tensor *b = gc_input(p, "b", 1, (int64_t[]){COLS}, 1.0f);
    ast_tensor *dy = filled(c, ROWS, COLS, 11);
    ast_tensor *y = ast_linear(c, x, w, b);
    ast_backward(c, ast_sum(c, ast_mul(c, y, dy)));
    for (int64_t o = 0; o < COLS; o++) {
        double want = 0.0, scale = 0.0;
        for (int64_t r = 0; r < ROWS; r++) want += dy->data[r * COLS + o], scale += fabs(dy->data[r * COLS + o]);
        cr_assert_lt(fabs(b->grad[o] - want), 2e-5 * scale, "db[%lld] = %g, want %g", (long long)o,
                     (double)b->grad[o], want);
        /* Every row got the bias: the last row's output against double precision. */
        double yo = b->data[o];
        for (int64_t k = 0; k < COLS; k++) yo += (double)x->data[(ROWS - 1) * COLS + k] * w->data[o * COLS + k];
        cr_assert_lt(fabs(y->data[(ROWS - 1) * COLS + o] - yo), 1e-4, "y[%d, %lld]", ROWS - 1, (long long)o);
    }
    ast_params_free(p);
    ast_ctx_free(c);
}

/* The gradient norm sums fixed blocks on the threads, in double: against one
 * double loop it differs only by the order of ~1e6 additions (~1e-13). */
Test(parallel, split_gradient_norm_matches_a_serial_sum)
{
    ast_params *p = ast_params_new(5);
    ast_tensor *t = gc_input(p, "big", 1, (int64_t[]){1000003}, 1.0f);
    gc_input(p, "small", 1, (int64_t[]){5}, 1.0f);
    double want = 0.0;
    for (int i = 0; i < ast_params_count(p); i++) {
        ast_tensor *q = ast_params_at(p, i);
        for (int64_t j = 0; j < q->size; j++) q->grad[j] = q->data[j], want += (double)q->data[j] * q->data[j];
    }
    want = sqrt(want);
    cr_assert_lt(fabs(ast_grad_norm(p) - want) / want, 1e-12, "norm %.17g, want %.17g", ast_grad_norm(p), want);
    ast_clip_grad_norm(p, 1.0);
    cr_assert_lt(fabs(ast_grad_norm(p) - 1.0), 1e-6, "clipped norm %g", ast_grad_norm(p));
    cr_assert_eq(t->grad[999999], (float)(t->data[999999] * (1.0 / (want + 1e-6))));
    ast_params_free(p);
}

/* pdist splits its points over the threads, each writing its own row of D
 * and its own gradient: against double-precision formulas (sums of 300
 * terms of O(1): 1e-4 relative to the sum of magnitudes). */
Test(parallel, split_pdist_matches_double_formulas)
{
    enum { NB = 2, NP = 300 };
    ast_ctx *c = ast_ctx_new(1);
    ast_params *p = ast_params_new(9);
    ast_tensor *pts = gc_input(p, "p", 3, (int64_t[]){NB, NP, 3}, 1.0f);
    ast_tensor *r = filled(c, NB * NP, NP, 13);
    ast_tensor *d = ast_pdist(c, pts);
    ast_backward(c, ast_sum(c, ast_mul(c, d, ast_reshape(c, r, 3, (int64_t[]){NB, NP, NP}))));
    for (int b = 0; b < NB; b++)
        for (int i = 0; i < NP; i++) {
            const float *pi = pts->data + (b * NP + i) * 3;
            double g[3] = {0}, mag[3] = {0};
            for (int j = 0; j < NP; j++) {
                const float *pj = pts->data + (b * NP + j) * 3;
                double dist = sqrt(pow(pi[0] - pj[0], 2) + pow(pi[1] - pj[1], 2) + pow(pi[2] - pj[2], 2));
                cr_assert_lt(fabs(d->data[(b * NP + i) * NP + j] - dist), 1e-5 * (1.0 + dist), "D[%d,%d,%d]", b, i, j);
                if (j == i) continue;
                double w = r->data[(b * NP + i) * NP + j] + r->data[(b * NP + j) * NP + i];
                for (int k = 0; k < 3; k++) g[k] += w * (pi[k] - pj[k]) / dist, mag[k] += fabs(w);
            }
            for (int k = 0; k < 3; k++)
                cr_assert_lt(fabs(pts->grad[(b * NP + i) * 3 + k] - g[k]), 1e-4 * (1.0 + mag[k]), "dp[%d,%d,%d]", b, i, k);
        }
    ast_params_free(p);
    ast_ctx_free(c);
}

/* mse sums per-row squared errors on the threads, then adds them in row order. */
Test(parallel, split_mse_matches_a_double_sum)
{
    ast_ctx *c = ast_ctx_new(1);
    ast_params *p = ast_params_new(4);
    ast_tensor *a = gc_input(p, "a", 2, (int64_t[]){ROWS, COLS}, 1.0f);
    ast_tensor *b = filled(c, ROWS, COLS, 17);
    ast_tensor *loss = ast_mse(c, a, b, NULL);
    ast_backward(c, loss);
    double want = 0.0;
    for (int64_t i = 0; i < a->size; i++) want += pow((double)a->data[i] - b->data[i], 2);
    want /= (double)a->size;
    cr_assert_lt(fabs(loss->data[0] - want) / want, 1e-6, "mse %g, want %g", (double)loss->data[0], want);
    for (int64_t i = 0; i < a->size; i += 997) {
        double gi = 2.0 * ((double)a->data[i] - b->data[i]) / (double)a->size;
        cr_assert_lt(fabs(a->grad[i] - gi), 1e-6 * fabs(gi) + 1e-12, "da[%lld]", (long long)i);
    }
    ast_params_free(p);
    ast_ctx_free(c);
}

/* GEMMs are split along C's longer side over the pool, each part one
 * single-threaded cblas_sgemm; op(A)'s rows are A's columns when A is
 * transposed, op(B)'s columns B's rows when B is. Every
 * transpose combination against double precision: 64 products of N(0, 4)
 * values sum to ~30, whose float rounding is ~1e-4; 5e-4 allowed, while a
 * misplaced part is off by O(10). */
Test(parallel, split_gemm_matches_double_for_every_transpose)
{
    /* split by rows (M >= N) and by columns (M < N) */
    const int shapes[2][3] = {{300, 64, 256}, {64, 64, 600}};
    ast_ctx *c = ast_ctx_new(1);
    for (int sh = 0; sh < 2; sh++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int M = shapes[sh][0], K = shapes[sh][1], N = shapes[sh][2];
                ast_tensor *a = filled(c, ta ? K : M, ta ? M : K, 21), *b = filled(c, tb ? N : K, tb ? K : N, 22);
                ast_tensor *y = ast_bmm(c, ast_reshape(c, a, 3, (int64_t[]){1, a->shape[0], a->shape[1]}),
                                        ast_reshape(c, b, 3, (int64_t[]){1, b->shape[0], b->shape[1]}), ta, tb);
                for (int i = 0; i < M; i += 7)
                    for (int j = 0; j < N; j += 5) {
                        double want = 0.0;
                        for (int k = 0; k < K; k++)
                            want += (double)(ta ? a->data[k * M + i] : a->data[i * K + k]) *
                                    (tb ? b->data[j * K + k] : b->data[k * N + j]);
                        cr_assert_lt(fabs(y->data[i * N + j] - want), 5e-4, "%dx%dx%d ta %d tb %d C[%d,%d]", M, K, N,
                                     ta, tb, i, j);
                    }
            }
    ast_ctx_free(c);
}
