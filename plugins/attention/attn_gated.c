/* attn_gated: GatedMultiHeadAttention (docs/model.md §2.6). Softmax attention whose
 * output is scaled per head (or per feature) by a sigmoid gate predicted
 * from the token by extra columns of q_proj, optionally with RMSNorm on
 * each head's queries and keys. The attention core is one fused op,
 * "gated_attention", in the descriptor's kernels table: for "cpu" both its
 * kernels (tiled and naive) in one implementation (attn_gated_kernel.c),
 * for "cuda" the tiled one (attn_gated_cuda.cu). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alphast/plugin_api.h"
#include "attn_gated_kernel.h"

#define QK_NORM_EPS 1e-6f

enum { GATE_HEADWISE, GATE_ELEMENTWISE, GATE_NONE };
enum { OPT_GATE_TYPE, OPT_QK_NORM, OPT_KERNEL, OPT_TILE };

static const ast_option_spec options[] = {
    [OPT_GATE_TYPE] = {"gate_type", AST_OPT_ENUM, "headwise", 0, -1, "headwise|elementwise|none",
                       "sigmoid gate on the attention output: one per head and token, one per feature, or none"},
    [OPT_QK_NORM] = {"use_qk_norm", AST_OPT_BOOL, "true", 0, -1, NULL,
                     "RMSNorm (eps 1e-6, weight shared by the heads) on queries and keys"},
    [OPT_KERNEL] = {"kernel", AST_OPT_ENUM, "tiled", 0, -1, "tiled|naive",
                    "tiled: FlashAttention-2 style, memory O(N) per head; naive (CPU only): stores the N x N "
                    "probabilities"},
    [OPT_TILE] = {"tile_size", AST_OPT_INT, "128", 1, 4096, NULL,
                  "query and key rows per tile of the tiled CPU kernel (memory per head grows as its square); "
                  "the CUDA kernel's tiles follow the head width"},
};

/* The reference's keys for two options: use_gated_attention: true chose
 * this plugin, and these set its gate and QK norm. */
static const ast_legacy_key legacy_keys[] = {{"TransformerLayer_setting.gate_type", "gate_type"},
                                             {"TransformerLayer_setting.use_qk_norm", "use_qk_norm"}};

typedef struct gated {
    int d_model, heads, gate_type, qk_norm;
    float dropout;
    attn_core_cfg core;
    attn_core_fn core_fn; /* the backend's kernel of the fused op "gated_attention" */
    ast_weights q_proj, k_proj, v_proj, o_proj;
    ast_tensor *q_norm, *k_norm; /* NULL without qk-norm */
} gated;

/* Extra q_proj columns holding the gate scores. */
static int gate_width(const gated *g)
{
    if (g->gate_type == GATE_HEADWISE) return g->heads;
    return g->gate_type == GATE_ELEMENTWISE ? g->d_model : 0;
}

/* Defined at the end of the file; create() looks up its kernels. */
static const ast_plugin_desc ast_plugin_self;

static void *gated_create(const ast_create_args *a, char *err, size_t errlen)
{
    const ast_layer_dims *d = a->dims;
    const char *backend = a->backend ? a->backend : "cpu";
    attn_core_fn core_fn = (attn_core_fn)ast_kernel_find(ast_plugin_self.kernels, ast_plugin_self.n_kernels, "gated_attention", backend);
    AST_REQUIRE(core_fn, err, errlen, "attention 'gated': no gated_attention kernel for backend '%s'", backend);
    /* Only the CPU has the naive reference and tiles of any width. */
    int cpu = !strcmp(backend, "cpu");
    AST_REQUIRE(cpu || a->opts[OPT_KERNEL].i != 1, err, errlen,
                "attention 'gated': kernel: naive runs on the CPU only (it stores the N x N probabilities); "
                "use kernel: tiled on '%s'",
                backend);
    AST_REQUIRE(cpu || d->d_model / d->heads <= ATTN_CUDA_MAX_DH, err, errlen,
                "attention 'gated': head width %d (d_model %d / num_heads %d) is above the %s kernel's %d; "
                "use more heads",
                d->d_model / d->heads, d->d_model, d->heads, backend, ATTN_CUDA_MAX_DH);
    gated *g = calloc(1, sizeof *g);
    AST_REQUIRE(g, err, errlen, "attention 'gated': out of memory");
    g->d_model = d->d_model;
    g->heads = d->heads;
    g->dropout = d->dropout;
    g->gate_type = (int)a->opts[OPT_GATE_TYPE].i;
    g->qk_norm = a->opts[OPT_QK_NORM].i != 0;
    g->core.kernel = a->opts[OPT_KERNEL].i == 1 ? ATTN_KERNEL_NAIVE : ATTN_KERNEL_TILED;
    g->core.tile = (int)a->opts[OPT_TILE].i;
    g->core_fn = core_fn;

    int E = g->d_model;
    g->q_proj = ast_linear_params(a->scope, "q_proj", E, E + gate_width(g), 1);
    g->k_proj = ast_linear_params(a->scope, "k_proj", E, E, 1);
    g->v_proj = ast_linear_params(a->scope, "v_proj", E, E, 1);
    g->o_proj = ast_linear_params(a->scope, "o_proj", E, E, 1);
    if (g->qk_norm) {
        int64_t dh = E / g->heads;
        g->q_norm = ast_param(a->scope, "q_norm.weight", 1, &dh, AST_INIT_ONE, 0.0f);
        g->k_norm = ast_param(a->scope, "k_norm.weight", 1, &dh, AST_INIT_ONE, 0.0f);
    }
    return g;
}

/* [B, N, E] projection -> [B, H, N, dh], RMS-normalised when asked. */
static ast_tensor *heads_of(const gated *g, ast_ctx *c, ast_tensor *x, ast_tensor *norm_w)
{
    ast_tensor *t = ast_split_heads(c, x, g->heads);
    return norm_w ? ast_rmsnorm(c, t, norm_w, QK_NORM_EPS) : t;
}

/* For the gate_activation monitor, per layer: attn.gate_mean [1] and
 * attn.gate_std [1] (population) of the sigmoid gate factors gate
 * [B, H, N, w] over the valid cells. On the CPU from the data, summed in
 * float64; on a device see device_gate_stats. */
static void host_gate_stats(ast_ctx *c, const ast_tensor *gate, const ast_fwd_args *a)
{
    const float *mask = a && a->mask ? ast_host_copy(c, a->mask) : NULL, *g = ast_host_copy(c, gate);
    int64_t n = gate->shape[2], w = gate->shape[3], per_set = gate->shape[1] * n * w;
    double sum = 0.0, sq = 0.0, count = 0.0;
    for (int64_t i = 0; i < gate->size; i++) {
        if (mask && mask[(i / per_set) * n + (i / w) % n] == 0.0f) continue;
        sum += g[i];
        sq += (double)g[i] * g[i];
        count += 1.0;
    }
    if (count == 0.0) return;
    double mean = sum / count, var = sq / count - mean * mean;
    float mean_f = (float)mean, std_f = var > 0.0 ? (float)sqrt(var) : 0.0f;
    ast_publish_stat(c, "attn.gate_mean", a ? a->layer : -1, &mean_f, 1);
    ast_publish_stat(c, "attn.gate_std", a ? a->layer : -1, &std_f, 1);
}

/* The same statistics reduced with ops where the step runs, so that a
 * device step waits for nothing (and can be captured): the mean, then the
 * spread about it (two passes: float32 sums of the deviations keep the
 * digits that sum(g^2) / n - mean^2 would cancel), std = |(g - mean) m| /
 * |m| with the valid-cell indicator m (|m|^2 is the count). */
static void device_gate_stats(ast_ctx *c, ast_tensor *gate, const ast_fwd_args *a)
{
    const int64_t *s = gate->shape, flat[2] = {1, gate->size};
    ast_tensor *m = ast_affine(c, ast_zeros(c, 4, s), 0.0f, 1.0f);
    if (a && a->mask) m = ast_mul(c, m, ast_reshape(c, a->mask, 4, (int64_t[]){s[0], 1, s[2], 1}));
    ast_tensor *mean = ast_div(c, ast_sum(c, ast_mul(c, gate, m)), ast_sum(c, m));
    ast_tensor *dev = ast_mul(c, ast_sub(c, gate, mean), m);
    ast_tensor *std = ast_div(c, ast_vecnorm(c, ast_reshape(c, dev, 2, flat)), ast_vecnorm(c, ast_reshape(c, m, 2, flat)));
    ast_publish_stat_tensor(c, "attn.gate_mean", a ? a->layer : -1, mean);
    ast_publish_stat_tensor(c, "attn.gate_std", a ? a->layer : -1, std);
}

static void publish_gate_stats(ast_ctx *c, ast_tensor *gate, const ast_fwd_args *a)
{
    if (gate->memory == AST_MEM_HOST) host_gate_stats(c, gate, a);
    else device_gate_stats(c, gate, a);
}

/* Scales o [B, H, N, dh] by sigmoid of the gate columns of q_proj's output. */
static ast_tensor *apply_gate(const gated *g, ast_ctx *c, ast_tensor *qg, ast_tensor *o, const ast_fwd_args *a)
{
    if (g->gate_type == GATE_NONE) return o;
    ast_tensor *score = ast_slice(c, qg, g->d_model, gate_width(g));
    if (g->gate_type == GATE_HEADWISE) {
        /* [B, N, H] -> [B, H, N, 1]: one factor per head and token */
        const int64_t *s = score->shape;
        score = ast_reshape(c, score, 4, (int64_t[]){s[0], s[1], s[2], 1});
        score = ast_permute(c, score, (int[]){0, 2, 1, 3});
    } else {
        score = ast_split_heads(c, score, g->heads);
    }
    ast_tensor *gate = ast_sigmoid(c, score);
    if (ast_stats_wanted(c)) publish_gate_stats(c, gate, a);
    return ast_mul(c, o, gate);
}

static ast_tensor *gated_forward(void *self, ast_ctx *c, ast_tensor *x, const ast_fwd_args *a)
{
    const gated *g = self;
    ast_tensor *qg = ast_linear(c, x, g->q_proj.weight, g->q_proj.bias);
    ast_tensor *q = gate_width(g) ? ast_slice(c, qg, 0, g->d_model) : qg;
    ast_tensor *Q = heads_of(g, c, q, g->q_norm);
    ast_tensor *K = heads_of(g, c, ast_linear(c, x, g->k_proj.weight, g->k_proj.bias), g->k_norm);
    ast_tensor *V = heads_of(g, c, ast_linear(c, x, g->v_proj.weight, g->v_proj.bias), NULL);

    attn_core_cfg core = g->core;
    core.dropout = ast_training(c) ? g->dropout : 0.0f;
    ast_tensor *o = g->core_fn(c, Q, K, V, a ? a->mask : NULL, &core);
    o = apply_gate(g, c, qg, o, a);
    return ast_linear(c, ast_merge_heads(c, o), g->o_proj.weight, g->o_proj.bias);
}

static const ast_kernel kernels[] = {
    {"gated_attention", "cpu", (ast_kernel_fn)attn_core},
#if AST_HAVE_CUDA
    {"gated_attention", "cuda", (ast_kernel_fn)attn_core_cuda},
#endif
};

AST_PLUGIN(AST_KIND_ATTENTION, "gated", "1.0",
           "gated multi-head softmax attention (sigmoid output gate, QK RMSNorm, fused tiled core)",
           AST_OPTIONS(options), AST_KERNELS(kernels), AST_LEGACY_KEYS(legacy_keys), .create = gated_create,
           .forward = gated_forward)
