/* The CUDA kernels of the elementwise ops (ops/dispatch_elementwise.c),
 * with ops/ops_elementwise.c's semantics: broadcasting add/sub/mul/div, the unary activations (affine, relu, gelu,
 * sigmoid, softplus, dropout, silu, exp) and the key mask's attention bias.
 *
 * Products and sums that the CPU rounds one by one use __fmul_rn/__fadd_rn,
 * which nvcc never fuses into an FMA: those ops (and the backward of every
 * operand as big as the output) give the CPU's bits. The transcendental
 * ones differ from the CPU's fastmath by a few ulp (CUDA's expf, erff,
 * log1pf). A broadcast operand's gradient sums in a fixed tree and then
 * fixed chunks in order (no atomics), so it repeats bit for bit. */
#include <math.h>

#include "engine/cuda/cuda_internal.h"
#include "engine/ops/ops_plan.h"

/* ---- launching ------------------------------------------------------------ */

/* y[i] = f(i) for i < n. */
template <class F> __global__ void map_kernel(F f, float *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = f(i);
}

template <class F> static void map_launch(F f, float *y, int64_t n)
{
    if (!n) return;
    map_kernel<<<ast_cuda_blocks(n), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(f, y, n);
    AST_CUDA_LAUNCHED();
}

/* gx[i] = f(i) when the gradient is fresh, else gx[i] += f(i). */
template <class F> __global__ void grad_kernel(F f, float *gx, int64_t n, int assign)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float g = f(i);
        gx[i] = assign ? g : __fadd_rn(gx[i], g);
    }
}

/* The backward of a one-input op whose input has the output's size. */
template <class F> static void grad_launch(const ast_node *n, const ast_op_grads *g, F f)
{
    float *gx = g->g[0];
    int fresh = g->assign[0];
    int64_t size = n->out->size;
    if (!gx || !size) return;
    grad_kernel<<<ast_cuda_blocks(size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(f, gx, size, fresh);
    AST_CUDA_LAUNCHED();
}

/* A fresh gradient that no element of the output reaches (an empty output)
 * is zero, not left as it came from the arena. */
static void zero_if_fresh(float *g, int fresh, int64_t size)
{
    if (g && fresh && size) AST_CUDA_CHECK(cudaMemsetAsync(g, 0, (size_t)size * sizeof(float), AST_CUDA_STREAM));
}

/* ---- broadcasting binary ops ------------------------------------------------ */

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV };

/* The op and its merged dims (ops_plan.h), passed to the kernels by value. */
typedef struct bcast_plan {
    int op;
    ast_bcast_dims dims;
} bcast_plan;

/* The plan of node n (saved: the dispatch's ast_bcast_dims) for op. */
static bcast_plan plan_of(const ast_node *n, int op)
{
    bcast_plan p;
    p.op = op;
    p.dims = *(const ast_bcast_dims *)n->saved;
    return p;
}

/* The operands' offsets of output element o. Unrolled, so every index
 * into the plan is a constant and the plan stays in kernel parameters. */
__device__ static inline void operand_offsets(const bcast_plan &p, int64_t o, int64_t &oa, int64_t &ob)
{
    oa = 0, ob = 0;
#pragma unroll
    for (int d = AST_MAX_DIMS - 1; d > 0; d--) {
        if (d >= p.dims.nd) continue;
        int64_t i = o % p.dims.dim[d];
        o /= p.dims.dim[d];
        oa += i * p.dims.sa[d], ob += i * p.dims.sb[d];
    }
    oa += o * p.dims.sa[0], ob += o * p.dims.sb[0];
}

/* The op is a kernel argument: the switch on it is the same for every thread. */
__device__ static inline float apply_op(int op, float a, float b)
{
    switch (op) {
    case OP_ADD: return __fadd_rn(a, b);
    case OP_SUB: return __fsub_rn(a, b);
    case OP_MUL: return __fmul_rn(a, b);
    default: return __fdiv_rn(a, b);
    }
}

__global__ void binary_kernel(bcast_plan p, const float *a, const float *b, float *y, int64_t n)
{
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += (int64_t)gridDim.x * blockDim.x) {
        int64_t oa, ob;
        operand_offsets(p, o, oa, ob);
        y[o] = apply_op(p.op, a[oa], b[ob]);
    }
}

/* What the backward reads: the operands, the output and its gradient. */
typedef struct binary_args {
    int op;
    const float *a, *b, *y, *gy;
} binary_args;

/* d out[o] / d a (which 0) or b (which 1), times gy[o]; each term loads
 * only what it needs. d(a/b)/db = -a/b^2 = -y/b. */
__device__ static inline float grad_term(const binary_args &g, int which, int64_t o, int64_t oa, int64_t ob)
{
    float gy = g.gy[o];
    switch (g.op) {
    case OP_ADD: return gy;
    case OP_SUB: return which ? -gy : gy;
    case OP_MUL: return __fmul_rn(gy, which ? g.a[oa] : g.b[ob]);
    default: return which ? __fdiv_rn(__fmul_rn(-gy, g.y[o]), g.b[ob]) : __fdiv_rn(gy, g.b[ob]);
    }
}

/* The gradients of operands as big as the output (NULL: not asked for or
 * broadcast), one thread per output element. add(x, x) passes one buffer
 * as both: the same thread writes a's term, then adds b's, in order. */
__global__ void binary_grad_kernel(bcast_plan p, binary_args g, float *ga, float *gb, int assign_a, int assign_b,
                                   int64_t n)
{
    for (int64_t o = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; o < n; o += (int64_t)gridDim.x * blockDim.x) {
        int64_t oa, ob;
        operand_offsets(p, o, oa, ob);
        if (ga) {
            float t = grad_term(g, 0, o, oa, ob);
            ga[o] = assign_a ? t : __fadd_rn(ga[o], t);
        }
        if (gb) {
            float t = grad_term(g, 1, o, oa, ob);
            gb[o] = assign_b ? t : __fadd_rn(gb[o], t);
        }
    }
}

/* ---- a broadcast operand's gradient: a deterministic two-pass sum ------------- */

/* One merged dim: its size and the step it makes in y, a and b. */
typedef struct dim_steps {
    int64_t n, y, a, b;
} dim_steps;

/* The output's dims split into those the operand keeps (its element j, in
 * its own row-major order, is the kept coordinates) and those it repeats
 * along (r), which its gradient sums over. */
typedef struct reduce_geom {
    binary_args g;
    int which, nk, nr;
    dim_steps kept[AST_MAX_DIMS], rep[AST_MAX_DIMS];
    int64_t kept_n, rep_n;
} reduce_geom;

static reduce_geom plan_reduce(const bcast_plan *p, const binary_args *g, int which)
{
    reduce_geom r = {};
    r.g = *g, r.which = which, r.kept_n = 1, r.rep_n = 1;
    int64_t ystride = 1;
    for (int d = p->dims.nd - 1; d >= 0; d--) {
        dim_steps s = {p->dims.dim[d], ystride, p->dims.sa[d], p->dims.sb[d]};
        ystride *= p->dims.dim[d];
        if (which ? s.b : s.a)
            r.kept[r.nk++] = s, r.kept_n *= s.n;
        else
            r.rep[r.nr++] = s, r.rep_n *= s.n;
    }
    return r; /* kept[] and rep[] hold the innermost dim first */
}

/* Adds the y, a and b offsets of index i over dims d[0..n) (innermost first). */
__device__ static inline void add_offsets(const dim_steps *d, int n, int64_t i, int64_t &oy, int64_t &oa, int64_t &ob)
{
    for (int k = 0; k < n; k++) {
        int64_t at = k + 1 < n ? i % d[k].n : i;
        i /= d[k].n;
        oy += at * d[k].y, oa += at * d[k].a, ob += at * d[k].b;
    }
}

/* Pass 1: block (x, chunk) sums the terms of kept elements [x*jt, x*jt+jt)
 * over repeats [chunk*chunk_len, +chunk_len): thread t takes element t % jt
 * and every rt-th repeat from t / jt, in order; then a fixed tree over the
 * rt threads of each element. dst[chunk * kept_n + j] gets the sum (=, or +=
 * when !assign). */
__global__ void reduce_partial_kernel(reduce_geom r, int jt, int64_t chunk_len, float *dst, int assign)
{
    __shared__ float part[AST_CUDA_THREADS];
    int rt = blockDim.x / jt, jl = threadIdx.x % jt, rl = threadIdx.x / jt;
    int64_t j = blockIdx.x * (int64_t)jt + jl, from = blockIdx.y * chunk_len;
    int64_t to = from + chunk_len < r.rep_n ? from + chunk_len : r.rep_n;
    float s = 0.0f;
    if (j < r.kept_n) {
        int64_t jy = 0, ja = 0, jb = 0;
        add_offsets(r.kept, r.nk, j, jy, ja, jb);
        for (int64_t k = from + rl; k < to; k += rt) {
            int64_t oy = jy, oa = ja, ob = jb;
            add_offsets(r.rep, r.nr, k, oy, oa, ob);
            s = __fadd_rn(s, grad_term(r.g, r.which, oy, oa, ob));
        }
    }
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = rt / 2; w > 0; w /= 2) {
        if (rl < w) part[threadIdx.x] += part[threadIdx.x + w * jt];
        __syncthreads();
    }
    if (rl == 0 && j < r.kept_n) {
        float *d = dst + blockIdx.y * r.kept_n + j;
        *d = assign ? part[jl] : __fadd_rn(*d, part[jl]);
    }
}

/* Pass 2: each element's chunk sums added in chunk order. */
__global__ void reduce_final_kernel(const float *part, int64_t chunks, int64_t n, float *g, int assign)
{
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
        float s = part[j];
        for (int64_t k = 1; k < chunks; k++) s = __fadd_rn(s, part[k * n + j]);
        g[j] = assign ? s : __fadd_rn(g[j], s);
    }
}

static int pow2_at_least(int64_t n, int cap)
{
    int p = 1;
    while (p < cap && p < n) p *= 2;
    return p;
}

/* The layout depends on the sizes only (not on the GPU), so a result has
 * the same bits wherever it runs. Threads run along whichever of kept and
 * repeated is innermost in y, so their reads coalesce; the repeats are cut
 * into chunks (each thread summing >= 8 terms) until ~1024 blocks run. */
static void reduce_into(ast_ctx *c, const bcast_plan *p, const binary_args *g, int which, float *grad, int fresh)
{
    reduce_geom r = plan_reduce(p, g, which);
    int kept_inner = r.nk > 0 && r.kept[0].y == 1;
    int jt = kept_inner ? pow2_at_least(r.kept[0].n, 32) : AST_CUDA_THREADS / pow2_at_least(r.rep[0].n, AST_CUDA_THREADS);
    jt = jt < pow2_at_least(r.kept_n, AST_CUDA_THREADS) ? jt : pow2_at_least(r.kept_n, AST_CUDA_THREADS);
    int rt = AST_CUDA_THREADS / jt;
    int64_t blocks = (r.kept_n + jt - 1) / jt, per_block = (int64_t)rt * 8;
    int64_t chunks = (r.rep_n + per_block - 1) / per_block, wanted = (1024 + blocks - 1) / blocks;
    chunks = chunks < wanted ? chunks : wanted;
    chunks = chunks < 1 ? 1 : chunks > 65535 ? 65535 : chunks;
    int64_t chunk_len = (r.rep_n + chunks - 1) / chunks;
    chunks = (r.rep_n + chunk_len - 1) / chunk_len;
    float *dst = chunks == 1 ? grad : (float *)ast_data_alloc_uninit(c, (size_t)(chunks * r.kept_n) * sizeof(float));
    dim3 grid((unsigned)blocks, (unsigned)chunks);
    reduce_partial_kernel<<<grid, AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(r, jt, chunk_len, dst, chunks == 1 ? fresh : 1);
    AST_CUDA_LAUNCHED();
    if (chunks == 1) return;
    reduce_final_kernel<<<ast_cuda_blocks(r.kept_n), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(dst, chunks, r.kept_n,
                                                                                            grad, fresh);
    AST_CUDA_LAUNCHED();
}

/* An operand as big as the output gets its gradient elementwise (both in
 * one launch); a broadcast one by reduce_into. */
static void binary_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *grads, int op)
{
    bcast_plan plan = plan_of(n, op), *p = &plan;
    ast_tensor *a = n->in[0], *b = n->in[1], *y = n->out;
    binary_args g = {p->op, a->data, b->data, y->data, y->grad};
    int fa = grads->assign[0], fb = grads->assign[1];
    float *ga = grads->g[0], *gb = grads->g[1];
    if (!y->size) {
        zero_if_fresh(ga, fa, a->size);
        zero_if_fresh(gb, fb, b->size);
        return;
    }
    int full_a = a->size == y->size, full_b = b->size == y->size;
    if ((ga && full_a) || (gb && full_b)) {
        binary_grad_kernel<<<ast_cuda_blocks(y->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
            *p, g, full_a ? ga : NULL, full_b ? gb : NULL, fa, fb, y->size);
        AST_CUDA_LAUNCHED();
    }
    if (ga && !full_a) reduce_into(c, p, &g, 0, ga, fa);
    if (gb && !full_b) reduce_into(c, p, &g, 1, gb, fb);
}

static void binary_forward(ast_node *n, int op)
{
    ast_tensor *y = n->out;
    if (!y->size) return;
    binary_kernel<<<ast_cuda_blocks(y->size), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(plan_of(n, op), n->in[0]->data,
                                                                                     n->in[1]->data, y->data, y->size);
    AST_CUDA_LAUNCHED();
}

#define BINARY_KERNELS(name, OP)                                                                                    \
    static void name##_forward(ast_ctx *c, ast_node *n) { binary_forward(n, OP); }                                  \
    static void name##_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g) { binary_backward(c, n, g, OP); }
BINARY_KERNELS(add, OP_ADD)
BINARY_KERNELS(sub, OP_SUB)
BINARY_KERNELS(mul, OP_MUL)
BINARY_KERNELS(div, OP_DIV)
#undef BINARY_KERNELS

/* ---- unary ops: a functor per forward and backward ------------------------------ */

/* The CPU's exp range (alphast/fastmath.h): +inf above 88.72283, 0 below
 * -87.33654 where expf would be subnormal; CUDA's expf (2 ulp) between. */
__device__ static inline float ranged_expf(float x)
{
    float y = x > 88.72283f ? INFINITY : expf(x);
    return x < -87.33654f ? 0.0f : y;
}

/* exp of a non-positive argument only, so neither tail overflows. */
__device__ static inline float stable_sigmoid(float x)
{
    float e = ranged_expf(-fabsf(x));
    return __fdiv_rn(x >= 0.0f ? 1.0f : e, 1.0f + e);
}

/* A unary op's kernels: y[i] = f(i) forward, gx[i] (+)= grad(i) backward,
 * each functor built from the node. */
#define UNARY_KERNELS(name, FWD, GRAD)                                                                          \
    static void name##_forward(ast_ctx *c, ast_node *n) { map_launch(FWD, n->out->data, n->out->size); }       \
    static void name##_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g) { grad_launch(n, g, GRAD); }

/* gy * k: the backward of affine (k = scale) and key_mask_bias (k = masked_logit). */
struct scaled_grad {
    const float *gy;
    float k;
    __device__ float operator()(int64_t i) const { return __fmul_rn(gy[i], k); }
};


/* x * scale + shift, rounded twice as the CPU does (no FMA). */
struct affine_fwd {
    const float *x;
    float scale, shift;
    __device__ float operator()(int64_t i) const { return __fadd_rn(__fmul_rn(x[i], scale), shift); }
};

/* farg: scale, shift. */
UNARY_KERNELS(affine, (affine_fwd{n->in[0]->data, n->farg[0], n->farg[1]}), (scaled_grad{n->out->grad, n->farg[0]}))

/* NaN passes through, as in torch; the gradient at 0 is 0. */
struct relu_fwd {
    const float *x;
    __device__ float operator()(int64_t i) const { return x[i] <= 0.0f ? 0.0f : x[i]; }
};
struct relu_grad {
    const float *x, *gy;
    __device__ float operator()(int64_t i) const { return x[i] > 0.0f ? gy[i] : 0.0f; }
};

UNARY_KERNELS(relu, relu_fwd{n->in[0]->data}, (relu_grad{n->in[0]->data, n->out->grad}))

/* gelu(x) = x Phi(x), gelu'(x) = Phi(x) + x phi(x). Unlike the CPU kernel,
 * the backward recomputes Phi rather than the forward saving it: an erff is
 * cheap beside a memory-bound pass, and a saved Phi is one more activation
 * of the feed-forward width per layer (1.6 GB of a 64k-cell step). */
__device__ static inline float gelu_cdf(float x) { return 0.5f * (1.0f + erff(x * 0.70710678118654752f)); }

struct gelu_fwd {
    const float *x;
    __device__ float operator()(int64_t i) const { return x[i] * gelu_cdf(x[i]); }
};
struct gelu_grad {
    const float *x, *gy;
    __device__ float operator()(int64_t i) const
    {
        return gy[i] * (gelu_cdf(x[i]) + x[i] * 0.3989422804014327f * ranged_expf(-0.5f * x[i] * x[i]));
    }
};

UNARY_KERNELS(gelu, gelu_fwd{n->in[0]->data}, (gelu_grad{n->in[0]->data, n->out->grad}))

struct sigmoid_fwd {
    const float *x;
    __device__ float operator()(int64_t i) const { return stable_sigmoid(x[i]); }
};
/* From the output: y (1 - y). */
struct sigmoid_grad {
    const float *y, *gy;
    __device__ float operator()(int64_t i) const { return __fmul_rn(__fmul_rn(gy[i], y[i]), 1.0f - y[i]); }
};

UNARY_KERNELS(sigmoid, sigmoid_fwd{n->in[0]->data}, (sigmoid_grad{n->out->data, n->out->grad}))

/* torch's defaults (beta 1, threshold 20): identity above the threshold. */
#define SOFTPLUS_THRESHOLD 20.0f

struct softplus_fwd {
    const float *x;
    __device__ float operator()(int64_t i) const
    {
        return x[i] > SOFTPLUS_THRESHOLD ? x[i] : log1pf(ranged_expf(x[i]));
    }
};
struct softplus_grad {
    const float *x, *gy;
    __device__ float operator()(int64_t i) const
    {
        return x[i] > SOFTPLUS_THRESHOLD ? gy[i] : __fmul_rn(gy[i], stable_sigmoid(x[i]));
    }
};

UNARY_KERNELS(softplus, softplus_fwd{n->in[0]->data}, (softplus_grad{n->in[0]->data, n->out->grad}))

/* The CPU's mask (ops_elementwise.c's dropout_keeps): element i is kept
 * when the top 24 bits of ast_mix64(key + i * golden) reach drop_below, so
 * one key gives the same mask on the CPU and on any GPU. The backward hashes
 * again rather than keeping the mask. */
struct dropout_map {
    const float *x;       /* forward: the input; backward: the output's gradient */
    const uint64_t *key;  /* in device memory (ast_ctx_key): a graph's replay brings a new one */
    uint32_t drop_below;
    float scale;
    __device__ float operator()(int64_t i) const
    {
        uint64_t z = ast_mix64(*key + (uint64_t)i * 0x9e3779b97f4a7c15ull);
        return (uint32_t)(z >> 40) >= drop_below ? __fmul_rn(x[i], scale) : 0.0f;
    }
};

/* saved: the key's slot; iarg[1]: drop_below; farg[0]: the scale. */
UNARY_KERNELS(dropout,
              (dropout_map{n->in[0]->data, (const uint64_t *)n->saved, (uint32_t)n->iarg[1], n->farg[0]}),
              (dropout_map{n->out->grad, (const uint64_t *)n->saved, (uint32_t)n->iarg[1], n->farg[0]}))

/* x * sigmoid(x) with the sigmoid op's own function and one rounded
 * product: the bits of mul(x, sigmoid(x)) on this backend. */
struct silu_fwd {
    const float *x;
    __device__ float operator()(int64_t i) const { return __fmul_rn(x[i], stable_sigmoid(x[i])); }
};

/* silu'(x) = s (1 + x t), s = sigmoid(x), t = sigmoid(-x), both from
 * e = exp(-|x|): t is not the cancelling 1 - s, and nothing overflows. */
struct silu_grad {
    const float *x, *gy;
    __device__ float operator()(int64_t i) const
    {
        float v = x[i], e = ranged_expf(-fabsf(v)), inv = 1.0f / (1.0f + e);
        float s = (v >= 0.0f ? 1.0f : e) * inv, t = (v >= 0.0f ? e : 1.0f) * inv;
        return gy[i] * s * (1.0f + v * t);
    }
};

UNARY_KERNELS(silu, silu_fwd{n->in[0]->data}, (silu_grad{n->in[0]->data, n->out->grad}))

struct exp_fwd {
    const float *x;
    __device__ float operator()(int64_t i) const { return ranged_expf(x[i]); }
};

/* d e^x / dx = e^x: the output itself. */
struct exp_grad {
    const float *y, *gy;
    __device__ float operator()(int64_t i) const { return __fmul_rn(gy[i], y[i]); }
};

UNARY_KERNELS(exp, exp_fwd{n->in[0]->data}, (exp_grad{n->out->data, n->out->grad}))

/* mask [B, N] -> [B, 1, 1, N] = m * L - L, rounded as affine(reshape(mask),
 * L, -L) rounds it (adding -L is subtracting L): 1 -> +0, 0 -> -L.
 * farg[0]: L. */
UNARY_KERNELS(key_mask_bias, (affine_fwd{n->in[0]->data, n->farg[0], -n->farg[0]}),
              (scaled_grad{n->out->grad, n->farg[0]}))
#undef UNARY_KERNELS

/* Every gradient comes fresh: the binary ops' broadcast ones are reduced
 * into (reduce_into), the unary ops' written whole. */
extern "C" void ast_cuda_elementwise_kernels(ast_op_kernel *t)
{
#define KERNELS(op, fresh) t[AST_OP_##op] = ast_op_kernel{op##_forward, op##_backward, fresh, 0}
    KERNELS(add, 3);
    KERNELS(sub, 3);
    KERNELS(mul, 3);
    KERNELS(div, 3);
    KERNELS(affine, 1);
    KERNELS(relu, 1);
    KERNELS(gelu, 1);
    KERNELS(sigmoid, 1);
    KERNELS(softplus, 1);
    KERNELS(dropout, 1);
    KERNELS(silu, 1);
    KERNELS(exp, 1);
    KERNELS(key_mask_bias, 1);
#undef KERNELS
}
