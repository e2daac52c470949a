/* attn_gated: state_dict names per gate type, values against the
 * independent double-precision reference, finite-difference gradients,
 * tiled vs naive kernels (forward and backward, padding, dropout), the
 * node mask, the dropout rule, O(N) memory of the tiled kernel, and the
 * tiled core on two threads. */
#include <cblas.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_gated_kernel.h"
#include "attn_reference.h"
#include "plugin/loader.h"
#include "plugin_fixture.h"

#define PREFIX "attention"
enum { B = 2, N = 5, E = 8, H = 2 };

/* float32 against the double reference on O(1) values through two linears,
 * RMSNorm and softmax: measured 1.6e-7 of the output scale; 1e-5 leaves
 * room for another BLAS summation order. */
#define VAL_TOL 1e-5
/* Tiled vs naive: same products, summed in another order and rescaled by
 * exp(m_old - m_new); float32 rounding over N = 150 keys measures 6.5e-7
 * of each tensor's scale (output and every gradient). */
#define KERNEL_TOL 1e-5
/* Central differences in float32 (floor 1e-2 for near-zero gradients):
 * the O(h^2) truncation through RMSNorm over dh = 4 and softmax dominates
 * at h = 1e-2 (2.3e-2 relative), rounding of L / h below 1e-3; at
 * h = 3e-3 the worst element over all configurations measures 7e-3. */
#define GRAD_H 3e-3f
#define GRAD_FLOOR 1e-2
#define GRAD_TOL 2e-2

static const char *const gate_names[] = {"headwise", "elementwise", "none"};

static ast_layer_dims dims_with(int d_model, int heads, float dropout)
{
    return (ast_layer_dims){.d_model = d_model, .heads = heads, .d_ff = 16, .d_time = 4, .num_layers = 1,
                            .dropout = dropout, .ln_eps = 1e-6f};
}

/* Options as "key=value" strings kept alive with the instance. */
typedef struct gated_opts {
    char text[4][48];
    const char *ptr[4];
} gated_opts;

static pf_instance make(uint64_t seed, const ast_layer_dims *d, gated_opts *o, int gate, int qk_norm,
                        const char *kernel, int tile)
{
    snprintf(o->text[0], sizeof o->text[0], "gate_type=%s", gate_names[gate]);
    snprintf(o->text[1], sizeof o->text[1], "use_qk_norm=%s", qk_norm ? "true" : "false");
    snprintf(o->text[2], sizeof o->text[2], "kernel=%s", kernel);
    snprintf(o->text[3], sizeof o->text[3], "tile_size=%d", tile);
    for (int i = 0; i < 4; i++) o->ptr[i] = o->text[i];
    pf_instance pi = pf_create(pf_load("attention", "attn_gated"), PREFIX, d, seed, o->ptr, 4);
    /* move the norm weights off their init of 1 so their gradients matter */
    ast_rng r;
    ast_rng_seed(&r, seed + 100);
    for (int i = 0; i < ast_params_count(pi.params); i++) {
        ast_tensor *t = ast_params_at(pi.params, i);
        for (int64_t j = 0; j < t->size; j++) t->data[j] += 0.2f * ast_rng_gauss(&r);
    }
    return pi;
}

/* The last two cells of set 1 are padding. */
static ast_tensor *padding_mask(int b, int n, int pad)
{
    ast_tensor *m = pf_const(2, (int64_t[]){b, n}, NULL);
    for (int i = 0; i < b * n; i++) m->data[i] = (i / n == b - 1 && i % n >= n - pad) ? 0.0f : 1.0f;
    return m;
}

Test(attn_gated, parameters_per_gate_type)
{
    /* docs/model.md §2.11: q_proj widths and totals 4E^2 + EH + 4E + H (+ 2E/H), 5E^2 + 5E, 4E^2 + 4E */
    const int64_t q_rows[] = {E + H, 2 * E, E};
    const int64_t totals[] = {4 * E * E + E * H + 4 * E + H, 5 * E * E + 5 * E, 4 * E * E + 4 * E};
    static const char *const names[] = {"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
                                        "v_proj.weight", "v_proj.bias", "o_proj.weight", "o_proj.bias",
                                        "q_norm.weight", "k_norm.weight"};
    ast_layer_dims d = dims_with(E, H, 0.0f);
    for (int gate = 0; gate < 3; gate++)
        for (int qk = 0; qk < 2; qk++) {
            gated_opts o;
            pf_instance pi = make(1, &d, &o, gate, qk, "tiled", 64);
            cr_assert_eq(ast_params_count(pi.params), qk ? 10 : 8);
            for (int i = 0; i < ast_params_count(pi.params); i++)
                cr_assert_str_eq(ast_params_at(pi.params, i)->name + strlen(PREFIX "."), names[i]);
            cr_assert_eq(ast_params_at(pi.params, 0)->shape[0], q_rows[gate]);
            cr_assert_eq(ast_params_at(pi.params, 1)->shape[0], q_rows[gate]);
            if (qk) cr_assert_eq(ast_params_at(pi.params, 8)->shape[0], E / H);
            cr_assert_eq(ast_params_numel(pi.params), totals[gate] + (qk ? 2 * E / H : 0), "%s qk=%d",
                         gate_names[gate], qk);
            pf_destroy(&pi);
        }
}

Test(attn_gated, init_is_pytorch_default)
{
    ast_layer_dims d = dims_with(E, H, 0.0f);
    ast_optval opts[4] = {{.i = 0}, {.i = 1}, {.i = 0}, {.i = 64}};
    ast_params *p = ast_params_new(1);
    const ast_plugin_desc *desc = pf_load("attention", "attn_gated");
    char err[128];
    void *self = desc->create(&(ast_create_args){ast_host_table(), ast_scope_new(p, PREFIX), &d, opts}, err, sizeof err);
    for (int i = 0; i < ast_params_count(p); i++) {
        ast_tensor *t = ast_params_at(p, i);
        int norm = strstr(t->name, "_norm.") != NULL;
        for (int64_t j = 0; j < t->size; j++) {
            if (norm) cr_assert_eq(t->data[j], 1.0f, "%s", t->name);
            else cr_assert_leq(fabsf(t->data[j]), 1.0f / sqrtf(E), "%s", t->name);
        }
    }
    ast_plugin_destroy(desc, self);
    ast_params_free(p);
}

Test(attn_gated, matches_reference_in_every_configuration)
{
    ast_layer_dims d = dims_with(E, H, 0.1f);
    ast_params *xs = ast_params_new(3);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, N, E}, 1.0f);
    ast_tensor *mask = padding_mask(B, N, 2);
    ast_ctx *c = ast_ctx_new(0);
    for (int gate = 0; gate < 3; gate++)
        for (int qk = 0; qk < 2; qk++)
            for (int naive = 0; naive < 2; naive++)
                for (int masked = 0; masked < 2; masked++) {
                    gated_opts o;
                    pf_instance pi = make(2, &d, &o, gate, qk, naive ? "naive" : "tiled", 2);
                    ast_tensor *m = masked ? mask : NULL;
                    ast_tensor *y = pf_forward(&pi, c, x, m);
                    double ref[B * N * E], scale = 0;
                    ref_gated_block(pi.params, PREFIX, (ref_dims){B, N, E, H}, gate, qk, x->data,
                                    m ? m->data : NULL, ref);
                    for (int i = 0; i < B * N * E; i++) scale = fmax(scale, fabs(ref[i]));
                    for (int i = 0; i < B * N * E; i++)
                        cr_assert_leq(fabs(y->data[i] - ref[i]), VAL_TOL * scale, "%s qk=%d naive=%d mask=%d y[%d]",
                                      gate_names[gate], qk, naive, masked, i);
                    pf_destroy(&pi);
                    ast_ctx_reset(c);
                }
    ast_ctx_free(c);
    pf_const_free(mask);
    ast_params_free(xs);
}

static void check_gradients(int gate, int qk, const char *kernel, int training, ast_tensor *mask)
{
    ast_layer_dims d = dims_with(E, H, 0.3f);
    gated_opts o;
    pf_instance pi = make(4, &d, &o, gate, qk, kernel, 2);
    ast_params *xs = ast_params_new(5);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, N, E}, 1.0f);
    gc_result r = pf_gradcheck(&pi, x, mask, training, GRAD_H, GRAD_FLOOR);
    const char *name = r.worst_input ? ast_params_at(pi.params, r.worst_input - 1)->name : "x";
    cr_assert_lt(r.max_err, GRAD_TOL, "%s qk=%d %s train=%d: %s[%lld] analytic %g numeric %g", gate_names[gate], qk,
                 kernel, training, name, (long long)r.worst_index, r.analytic, r.numeric);
    ast_params_free(xs);
    pf_destroy(&pi);
}

/* Tile size 2 over N = 5 cells: three query and key tiles, the last partial. */
Test(attn_gated, gradients_every_gate_type_and_qk_norm)
{
    for (int gate = 0; gate < 3; gate++)
        for (int qk = 0; qk < 2; qk++) check_gradients(gate, qk, "tiled", 0, NULL);
}

Test(attn_gated, gradients_with_padding_and_dropout)
{
    ast_tensor *mask = padding_mask(B, N, 2);
    check_gradients(0, 1, "tiled", 1, mask);
    check_gradients(1, 1, "naive", 1, mask);
    check_gradients(0, 1, "naive", 0, NULL);
    pf_const_free(mask);
}

/* Output, d(sum_i w_i y_i)/dx and every parameter gradient, one after the
 * other; seg[] receives the length of each part. */
static float *outputs_and_grads(const pf_instance *pi, ast_tensor *x, ast_tensor *mask, int training,
                                int64_t *seg, int *n_seg)
{
    ast_ctx *c = ast_ctx_new(11);
    ast_ctx_set_training(c, training);
    memset(x->grad, 0, (size_t)x->size * sizeof(float));
    ast_params_zero_grad(pi->params);
    ast_tensor *y = pf_forward(pi, c, x, mask);
    float *w = malloc((size_t)y->size * sizeof *w);
    for (int64_t i = 0; i < y->size; i++) w[i] = cosf(0.37f * (float)i);
    ast_backward_seed(c, y, w);
    free(w);
    int np = ast_params_count(pi->params);
    int64_t total = y->size + x->size + ast_params_numel(pi->params), off;
    float *all = malloc((size_t)total * sizeof *all);
    seg[0] = y->size;
    memcpy(all, y->data, (size_t)y->size * sizeof(float));
    off = y->size;
    for (int i = 1; i < np + 2; i++) {
        ast_tensor *t = i == 1 ? x : ast_params_at(pi->params, i - 2);
        memcpy(all + off, t->grad, (size_t)t->size * sizeof(float));
        seg[i] = t->size;
        off += t->size;
    }
    *n_seg = np + 2;
    ast_ctx_free(c);
    return all;
}

/* Each part agrees to KERNEL_TOL of its own largest magnitude. */
static void assert_parts_agree(const float *a, const float *b, const int64_t *seg, int n_seg, const char *what)
{
    int64_t off = 0;
    for (int s = 0; s < n_seg; off += seg[s], s++) {
        double scale = 0;
        for (int64_t i = 0; i < seg[s]; i++) scale = fmax(scale, fabs(b[off + i]));
        cr_assert_gt(scale, 0.0, "%s: part %d is all zero", what, s);
        for (int64_t i = 0; i < seg[s]; i++)
            cr_assert_leq(fabs(a[off + i] - b[off + i]), KERNEL_TOL * scale, "%s: part %d [%lld] tiled %g naive %g",
                          what, s, (long long)i, a[off + i], b[off + i]);
    }
}

static void compare_kernels(int training, float dropout)
{
    enum { NL = 150 }; /* two full tiles of 64 and a partial one */
    ast_layer_dims d = dims_with(E, H, dropout);
    ast_params *xs = ast_params_new(8);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, NL, E}, 1.0f);
    ast_tensor *mask = padding_mask(B, NL, 37);
    gated_opts ot, on;
    pf_instance tiled = make(9, &d, &ot, 0, 1, "tiled", 64), naive = make(9, &d, &on, 0, 1, "naive", 64);
    int64_t seg[64];
    int n_seg;
    float *a = outputs_and_grads(&tiled, x, mask, training, seg, &n_seg);
    float *b = outputs_and_grads(&naive, x, mask, training, seg, &n_seg);
    assert_parts_agree(a, b, seg, n_seg, training ? "dropout" : "eval");
    free(a);
    free(b);
    pf_destroy(&tiled);
    pf_destroy(&naive);
    pf_const_free(mask);
    ast_params_free(xs);
}

Test(attn_gated, tiled_and_naive_agree_with_padding) { compare_kernels(0, 0.1f); }
Test(attn_gated, tiled_and_naive_agree_with_dropout) { compare_kernels(1, 0.3f); }

Test(attn_gated, padded_cells_do_not_reach_valid_ones)
{
    ast_layer_dims d = dims_with(E, H, 0.0f);
    ast_params *xs = ast_params_new(12);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, N, E}, 1.0f);
    ast_tensor *mask = padding_mask(B, N, 2);
    ast_ctx *c = ast_ctx_new(0);
    ast_ctx_set_grad(c, 0);
    for (int naive = 0; naive < 2; naive++) {
        gated_opts o;
        pf_instance pi = make(13, &d, &o, 1, 1, naive ? "naive" : "tiled", 2);
        float before[B * N * E], unmasked[B * N * E];
        memcpy(before, pf_forward(&pi, c, x, mask)->data, sizeof before);
        memcpy(unmasked, pf_forward(&pi, c, x, NULL)->data, sizeof unmasked);
        for (int i = (2 * N - 2) * E; i < B * N * E; i++) x->data[i] += 3.0f;
        ast_tensor *after = pf_forward(&pi, c, x, mask), *none = pf_forward(&pi, c, x, NULL);
        for (int i = 0; i < (2 * N - 2) * E; i++) cr_assert_eq(after->data[i], before[i], "valid output %d changed", i);
        cr_assert_neq(memcmp(none->data + N * E, unmasked + N * E, (N - 2) * E * sizeof(float)), 0,
                      "without a mask padded cells reach valid ones (docs/model.md §2.9)");
        for (int i = (2 * N - 2) * E; i < B * N * E; i++) x->data[i] -= 3.0f;
        /* no padding: exactly the unmasked computation */
        ast_tensor *ones = pf_const(2, (int64_t[]){B, N}, NULL);
        for (int i = 0; i < B * N; i++) ones->data[i] = 1.0f;
        cr_assert_arr_eq(pf_forward(&pi, c, x, ones)->data, pf_forward(&pi, c, x, NULL)->data, sizeof before);
        pf_const_free(ones);
        pf_destroy(&pi);
    }
    ast_ctx_free(c);
    pf_const_free(mask);
    ast_params_free(xs);
}

/* The CPU kernel of the plugin's fused op, from its descriptor's kernels
 * table as the plugin's create() finds it. */
static attn_core_fn core_kernel(void)
{
    const ast_plugin_desc *d = pf_load("attention", "attn_gated");
    attn_core_fn fn = (attn_core_fn)ast_kernel_find(d->kernels, d->n_kernels, "gated_attention", "cpu");
    cr_assert_not_null(fn, "attn_gated has no cpu kernel of gated_attention");
    return fn;
}

/* Q = K = 0 makes every probability 1/N; with V = I (dh = N) the output is
 * O[i, j] = Z[i, j] / N, the dropout factor itself. */
static void dropout_factors(attn_kernel kernel, float p, float *z)
{
    enum { NZ = 64 };
    const ast_host *h = ast_host_table();
    ast_ctx *c = ast_ctx_new(21);
    int64_t shape[4] = {1, 1, NZ, NZ};
    ast_tensor *q = h->ops->zeros(c, 4, shape), *k = h->ops->zeros(c, 4, shape), *v = h->ops->zeros(c, 4, shape);
    for (int i = 0; i < NZ; i++) v->data[i * NZ + i] = 1.0f;
    ast_tensor *o = core_kernel()(c, q, k, v, NULL, &(attn_core_cfg){kernel, 16, p});
    for (int i = 0; i < NZ * NZ; i++) z[i] = o->data[i] * NZ;
    ast_ctx_free(c);
}

Test(attn_gated, dropout_rate_scale_and_rule_shared_by_both_kernels)
{
    float zt[64 * 64], zn[64 * 64];
    const float p = 0.25f;
    dropout_factors(ATTN_KERNEL_TILED, p, zt);
    dropout_factors(ATTN_KERNEL_NAIVE, p, zn);
    int dropped = 0;
    for (int i = 0; i < 64 * 64; i++) {
        /* one product and one division by the row sum of 64 equal terms */
        cr_assert(zt[i] == 0.0f || fabsf(zt[i] - 1.0f / (1.0f - p)) < 1e-5f, "factor %g", zt[i]);
        cr_assert_eq(zt[i] == 0.0f, zn[i] == 0.0f, "cell %d dropped by one kernel only", i);
        dropped += zt[i] == 0.0f;
    }
    /* binomial(4096, 0.25): mean 1024, sd 27.7; 5 sd */
    cr_assert_lt(abs(dropped - 1024), 139, "dropped %d of 4096", dropped);
    float none[64 * 64];
    dropout_factors(ATTN_KERNEL_TILED, 0.0f, none);
    for (int i = 0; i < 64 * 64; i++) cr_assert_float_eq(none[i], 1.0f, 1e-5f);
}

Test(attn_gated, dropout_only_in_training)
{
    ast_layer_dims d = dims_with(E, H, 0.5f), d0 = dims_with(E, H, 0.0f);
    ast_params *xs = ast_params_new(14);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){B, N, E}, 1.0f);
    gated_opts o, o0;
    pf_instance pi = make(15, &d, &o, 0, 1, "tiled", 2), p0 = make(15, &d0, &o0, 0, 1, "tiled", 2);
    ast_ctx *c = ast_ctx_new(3);
    float eval[B * N * E], train[B * N * E];
    memcpy(eval, pf_forward(&pi, c, x, NULL)->data, sizeof eval);
    cr_assert_arr_eq(eval, pf_forward(&p0, c, x, NULL)->data, sizeof eval, "eval must not drop");
    ast_ctx_set_training(c, 1);
    memcpy(train, pf_forward(&pi, c, x, NULL)->data, sizeof train);
    cr_assert_neq(memcmp(train, eval, sizeof eval), 0, "training with p = 0.5 must drop");
    ast_ctx_free(c);
    pf_destroy(&pi);
    pf_destroy(&p0);
    ast_params_free(xs);
}

/* Arena peak of one forward and backward pass over one set of n cells. */
static size_t step_peak(const pf_instance *pi, int n)
{
    ast_params *xs = ast_params_new(16);
    ast_tensor *x = gc_input(xs, "x", 3, (int64_t[]){1, n, E}, 1.0f);
    ast_ctx *c = ast_ctx_new(0);
    ast_tensor *y = pf_forward(pi, c, x, NULL);
    float *w = ast_alloc(c, (size_t)y->size * sizeof *w);
    ast_backward_seed(c, y, w);
    size_t peak = ast_ctx_arena_peak(c);
    ast_ctx_free(c);
    ast_params_free(xs);
    return peak;
}

/* Growth from 256 to 512 cells over growth from 128 to 256: 2 when memory
 * is linear in N, 4 when an N x N buffer dominates. */
static double growth_ratio(const char *kernel, size_t *peak512)
{
    ast_layer_dims d = dims_with(E, H, 0.0f);
    gated_opts o;
    pf_instance pi = make(17, &d, &o, 0, 1, kernel, 64);
    size_t p128 = step_peak(&pi, 128), p256 = step_peak(&pi, 256);
    *peak512 = step_peak(&pi, 512);
    pf_destroy(&pi);
    return (double)(*peak512 - p256) / (double)(p256 - p128);
}

Test(attn_gated, tiled_kernel_memory_is_linear_in_n)
{
    size_t tiled512, naive512;
    double tiled = growth_ratio("tiled", &tiled512), naive = growth_ratio("naive", &naive512);
    cr_assert_lt(tiled, 2.2, "tiled: growth ratio %.2f (peak %zu at N=512)", tiled, tiled512);
    cr_assert_lt(tiled512, (size_t)H * 512 * 512 * sizeof(float), "tiled peak %zu holds an N x N buffer", tiled512);
    /* the measure can fail: the naive kernel is quadratic */
    cr_assert_gt(naive, 3.0, "naive: growth ratio %.2f", naive);
}

/* The host refuses the sizes before create() (ast_plugin_dims_ok), so the
 * plugin need not check them. */
Test(attn_gated, rejects_heads_not_dividing_the_width)
{
    ast_layer_dims bad = dims_with(E, 3, 0.0f);
    const ast_plugin_desc *d = pf_load("attention", "attn_gated");
    char err[256] = "";
    cr_assert_not(ast_plugin_dims_ok(d, &bad, err, sizeof err));
    cr_assert_not_null(strstr(err, "num_heads 3"), "message: %s", err);
}

/* create() on backend `backend` with the given kernel option (0 tiled,
 * 1 naive): the instance's error message, "" when it was made. */
static void create_on(const char *backend, const ast_layer_dims *dims, int kernel, char *err, size_t n)
{
    const ast_plugin_desc *d = pf_load("attention", "attn_gated");
    ast_params *p = ast_params_new(1);
    ast_optval opts[4] = {{.i = 0}, {.i = 1}, {.i = kernel}, {.i = 64}};
    err[0] = '\0';
    void *self = d->create(&(ast_create_args){ast_host_table(), ast_scope_new(p, PREFIX), dims, opts, backend}, err, n);
    cr_assert((self != NULL) == (err[0] == '\0'), "made %d, message '%s'", self != NULL, err);
    ast_plugin_destroy(d, self);
    ast_params_free(p);
}

/* The cuda kernel is tiled only, for heads up to ATTN_CUDA_MAX_DH wide:
 * create() says so, naming the fix; a build without CUDA has no cuda
 * kernel at all. Creating needs no GPU (parameters start on the host). */
Test(attn_gated, cuda_refuses_what_its_kernel_lacks)
{
    char err[256];
    ast_layer_dims ok = dims_with(E, H, 0.0f);
#if AST_HAVE_CUDA
    ast_layer_dims wide = dims_with(2 * (ATTN_CUDA_MAX_DH + 1), 2, 0.0f);
    create_on("cuda", &ok, 0, err, sizeof err);
    cr_assert_str_empty(err);
    create_on("cuda", &ok, 1, err, sizeof err);
    cr_assert(strstr(err, "naive runs on the CPU only") && strstr(err, "use kernel: tiled"), "%s", err);
    create_on("cuda", &wide, 0, err, sizeof err);
    cr_assert(strstr(err, "head width 129") && strstr(err, "use more heads"), "%s", err);
    create_on("cpu", &wide, 1, err, sizeof err); /* the CPU takes both */
    cr_assert_str_empty(err);
#else
    create_on("cuda", &ok, 0, err, sizeof err);
    cr_assert(strstr(err, "no gated_attention kernel for backend 'cuda'"), "%s", err);
#endif
}

/* Output and q, k, v gradients of the attention core alone, one after the
 * other; the same context seed gives both kernels the same dropout. */
static float *core_outputs(attn_kernel kernel, float p, ast_tensor *const qkv[3], const ast_tensor *mask,
                           int64_t *seg)
{
    ast_ctx *c = ast_ctx_new(31);
    for (int i = 0; i < 3; i++) memset(qkv[i]->grad, 0, (size_t)qkv[i]->size * sizeof(float));
    ast_tensor *o = core_kernel()(c, qkv[0], qkv[1], qkv[2], mask, &(attn_core_cfg){kernel, 64, p});
    float *w = malloc((size_t)o->size * sizeof *w), *all = malloc((size_t)o->size * 4 * sizeof *all);
    for (int64_t i = 0; i < o->size; i++) w[i] = cosf(0.37f * (float)i);
    ast_backward_seed(c, o, w);
    memcpy(all, o->data, (size_t)o->size * sizeof(float));
    for (int i = 0; i < 3; i++) memcpy(all + (i + 1) * o->size, qkv[i]->grad, (size_t)o->size * sizeof(float));
    for (int i = 0; i < 4; i++) seg[i] = o->size;
    free(w);
    ast_ctx_free(c);
    return all;
}

/* The tiled core runs its heads on two threads, each range in its own
 * scratch: 3 x 3 heads split unevenly, N = 200 cells (three tiles of 64 and
 * one of 8), padded keys in the last set, with and without dropout (Pd is
 * its own buffer or P itself) — still the serial naive kernel's results. */
Test(attn_gated, threaded_tiled_core_matches_naive)
{
    enum { BT = 3, HT = 3, NT = 200, DT = 8 };
    openblas_set_num_threads(2); /* the pool takes OpenBLAS's count when it starts */
    cr_assert_eq(ast_parallel_threads(), 2);
    ast_params *xs = ast_params_new(32);
    ast_tensor *qkv[3] = {gc_input(xs, "q", 4, (int64_t[]){BT, HT, NT, DT}, 1.0f),
                          gc_input(xs, "k", 4, (int64_t[]){BT, HT, NT, DT}, 1.0f),
                          gc_input(xs, "v", 4, (int64_t[]){BT, HT, NT, DT}, 1.0f)};
    ast_tensor *mask = padding_mask(BT, NT, 45);
    const float rates[] = {0.0f, 0.2f};
    for (int i = 0; i < 2; i++) {
        int64_t seg[4];
        float *a = core_outputs(ATTN_KERNEL_TILED, rates[i], qkv, mask, seg);
        float *b = core_outputs(ATTN_KERNEL_NAIVE, rates[i], qkv, mask, seg);
        assert_parts_agree(a, b, seg, 4, rates[i] > 0.0f ? "threads, dropout" : "threads");
        free(a);
        free(b);
    }
    pf_const_free(mask);
    ast_params_free(xs);
}
