#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_fixture.h"

const ast_backend *cf_gpu(void)
{
#if AST_HAVE_CUDA
    char why[256] = "";
    const ast_backend *b = ast_backend_cuda();
    if (!b->available(b, why, sizeof why)) cr_skip_test("no GPU for the CUDA backend: %s", why);
    return b;
#else
    cr_skip_test("built without CUDA (configure --with-cuda finds nvcc and cuBLAS in /usr/local/cuda)");
    return NULL;
#endif
}

static int gpu_here(void)
{
#if AST_HAVE_CUDA
    return ast_backend_cuda()->available(ast_backend_cuda(), NULL, 0);
#else
    return 0;
#endif
}

/* Criterion's main, but a program that had no GPU to test ends with 77,
 * automake's SKIP, so `make check` shows the CUDA tests as skipped (each
 * test's line in its log says why) rather than passed. */
int main(int argc, char *argv[])
{
    struct criterion_test_set *tests = criterion_initialize();
    int result = 0;
    if (criterion_handle_args(argc, argv, true)) result = !criterion_run_all_tests(tests);
    criterion_finalize(tests);
    return result == 0 && !gpu_here() ? 77 : result;
}

void cf_normal(uint64_t seed, float *v, int64_t n, float scale)
{
    ast_rng r;
    ast_rng_seed(&r, seed);
    for (int64_t i = 0; i < n; i++) {
        float g = ast_rng_gauss(&r);
        v[i] = scale * (g != 0.0f ? g : 0.5f);
    }
}

/* malloc(0) may be NULL: every copy has at least one float. */
static float *host_floats(int64_t n) { return ast_xcalloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

float *cf_read(ast_ctx *c, const ast_tensor *t)
{
    float *v = host_floats(t->size);
    ast_tensor_read(c, t, 0, t->size, v);
    return v;
}

float *cf_read_grad(ast_ctx *c, const ast_tensor *t)
{
    float *v = host_floats(t->size);
    if (!t->grad) return v;
    ast_tensor g = *t; /* the gradient seen as a tensor's data: read through the backend */
    g.data = t->grad;
    ast_tensor_read(c, &g, 0, t->size, v);
    return v;
}

double cf_rel_err(const float *got, const float *want, int64_t n, int64_t *worst)
{
    double scale = 0.0, diff = 0.0;
    *worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i]) || isinf(got[i]) != isinf(want[i])) {
            *worst = i;
            return INFINITY;
        }
        if (!isfinite(want[i])) continue; /* the same inf (or NaN) on both sides */
        double d = fabs((double)got[i] - want[i]);
        scale = fmax(scale, fabs((double)want[i]));
        if (d > diff) diff = d, *worst = i;
    }
    return diff / (scale + 1e-30);
}

void cf_assert_close(const char *what, const float *got, const float *want, int64_t n, double tol)
{
    int64_t i;
    double err = cf_rel_err(got, want, n, &i);
    if (tol == 0.0)
        for (int64_t k = 0; k < n && err == 0.0; k++)
            if (memcmp(&got[k], &want[k], sizeof(float))) err = INFINITY, i = k; /* -0 vs +0, NaN bits */
    cr_assert(err <= tol, "%s: relative error %.3g > %.3g at [%lld]: CUDA %.9g, CPU %.9g", what, err, tol,
              (long long)i, n ? (double)got[i] : 0.0, n ? (double)want[i] : 0.0);
}

double cf_sum_tol(int64_t terms) { return fmax(2e-6, 2.4e-7 * (double)terms); }

/* ---- running a case on one backend ------------------------------------- */

static uint64_t name_seed(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

float *cf_make_values(const cf_input *in, uint64_t seed)
{
    int64_t n = ast_shape_size(in->ndim, in->shape), cols = in->shape[in->ndim - 1];
    float *v = ast_xcalloc((size_t)(n > 0 ? n : 1), sizeof *v);
    cf_normal(seed, v, n, in->fill == FILL_WIDE ? 12.0f : 1.0f);
    for (int64_t i = 0; i < n; i++) {
        if (in->fill == FILL_SHIFTED) v[i] += 1.0f;
        else if (in->fill == FILL_ZEROS) v[i] = 0.0f;
        else if (in->fill == FILL_AWAY) v[i] = copysignf(0.5f + fmodf(fabsf(v[i]), 2.0f), v[i]);
        else if (in->fill == FILL_MASK) v[i] = v[i] > -0.67f ? 1.0f : 0.0f; /* P(z > -0.67) = 0.75 */
        else if (in->fill == FILL_ZERO_ROWS && (i / cols) % 3 == 0) v[i] = 0.0f;
    }
    return v;
}

cf_data cf_make_data(const cf_case *k)
{
    cf_data d = {.seed = name_seed(k->name)};
    for (int i = 0; i < k->n_in; i++) {
        d.x[i] = cf_make_values(&k->in[i], d.seed + 2 * (uint64_t)i + 1);
        cf_input g = k->in[i];
        g.fill = FILL_NORMAL;
        d.pre[i] = cf_make_values(&g, d.seed + 2 * (uint64_t)i + 2);
    }
    return d;
}

void cf_free_data(const cf_case *k, cf_data *d)
{
    for (int i = 0; i < k->n_in; i++) free(d->x[i]), free(d->pre[i]);
}

/* Fills the first `bytes` of c's arena with NaN. The next step carves the
 * same addresses in the same order, so what an op leaves unwritten is NaN
 * there, not the zeros of fresh device memory. The first take and reset
 * make one chunk big enough (an outgrown arena becomes one chunk at reset);
 * the second fills it. */
static void poison_arena(ast_ctx *c, size_t bytes)
{
    int64_t n = (int64_t)(bytes / sizeof(float));
    ast_empty(c, 1, &n);
    ast_ctx_reset(c);
    ast_tensor *t = ast_empty(c, 1, &n);
    float *nan = ast_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *nan);
    for (int64_t i = 0; i < n; i++) nan[i] = NAN;
    ast_tensor_write(c, t, 0, n, nan);
    free(nan);
    ast_ctx_reset(c);
}

ast_tensor *cf_make_input(ast_ctx *c, const cf_input *in, const float *x, const float *pre)
{
    ast_tensor *t = ast_empty(c, in->ndim, in->shape);
    ast_tensor_write(c, t, 0, t->size, x);
    if (!in->grad) return t;
    t->flags |= AST_REQUIRES_GRAD;
    if (pre) {
        t->grad = ast_data_alloc_uninit(c, (size_t)t->size * sizeof(float));
        ast_tensor g = *t;
        g.data = t->grad;
        ast_tensor_write(c, &g, 0, t->size, pre);
    }
    return t;
}

cf_result cf_run_on(const ast_backend *b, const cf_case *k, const cf_data *d, int accumulate, size_t poison)
{
    ast_ctx *c = ast_ctx_new_on(b, CF_CTX_SEED);
    ast_ctx_set_training(c, 1);
    if (poison) poison_arena(c, poison);
    ast_tensor *in[CF_MAX_IN] = {0};
    for (int i = 0; i < k->n_in; i++) in[i] = cf_make_input(c, &k->in[i], d->x[i], accumulate ? d->pre[i] : NULL);
    ast_tensor *y = k->run(c, in, k->arg);
    cf_result r = {.ndim = y->ndim, .size = y->size, .y = cf_read(c, y)};
    memcpy(r.shape, y->shape, sizeof r.shape);
    if (y->flags & AST_REQUIRES_GRAD) {
        float *dy = ast_xcalloc((size_t)(y->size > 0 ? y->size : 1), sizeof *dy);
        cf_normal(d->seed ^ 0x5eed, dy, y->size, 1.0f);
        ast_backward_seed(c, y, dy);
        free(dy);
    }
    for (int i = 0; i < k->n_in; i++)
        if (k->in[i].grad) r.g[i] = cf_read_grad(c, in[i]);
    r.peak = ast_ctx_arena_peak(c);
    ast_ctx_free(c);
    return r;
}

void cf_free_result(cf_result *r)
{
    free(r->y);
    for (int i = 0; i < CF_MAX_IN; i++) free(r->g[i]);
}

static void compare(const cf_case *k, const cf_result *got, const cf_result *want, double tol, const char *how)
{
    char what[256];
    cr_assert_eq(got->ndim, want->ndim, "%s (%s): output rank %d, CPU %d", k->name, how, got->ndim, want->ndim);
    for (int i = 0; i < want->ndim; i++)
        cr_assert_eq(got->shape[i], want->shape[i], "%s (%s): output dim %d is %lld, CPU %lld", k->name, how, i,
                     (long long)got->shape[i], (long long)want->shape[i]);
    snprintf(what, sizeof what, "%s (%s): output", k->name, how);
    cf_assert_close(what, got->y, want->y, want->size, tol);
    for (int i = 0; i < k->n_in; i++) {
        if (!k->in[i].grad) continue;
        snprintf(what, sizeof what, "%s (%s): gradient of input %d", k->name, how, i);
        cf_assert_close(what, got->g[i], want->g[i], ast_shape_size(k->in[i].ndim, k->in[i].shape), tol);
    }
}

void cf_check_data(const ast_backend *gpu, const cf_case *k, const cf_data *d)
{
    cf_result cpu = cf_run_on(ast_backend_cpu(), k, d, 0, 0), first = cf_run_on(gpu, k, d, 0, 0);
    compare(k, &first, &cpu, k->tol, "CUDA vs CPU");
    cf_result again = cf_run_on(gpu, k, d, 0, first.peak);
    compare(k, &again, &first, 0.0, "second CUDA run, arena full of NaN, vs the first: unwritten or not deterministic");
    cf_result cpu_acc = cf_run_on(ast_backend_cpu(), k, d, 1, 0), gpu_acc = cf_run_on(gpu, k, d, 1, first.peak);
    compare(k, &gpu_acc, &cpu_acc, k->tol, "CUDA vs CPU, adding to gradients already there");
    cf_free_result(&cpu), cf_free_result(&first), cf_free_result(&again), cf_free_result(&cpu_acc), cf_free_result(&gpu_acc);
}

void cf_check_case(const ast_backend *gpu, const cf_case *k)
{
    cf_data d = cf_make_data(k);
    cf_check_data(gpu, k, &d);
    cf_free_data(k, &d);
}

