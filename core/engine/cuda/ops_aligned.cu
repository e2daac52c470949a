/* The CUDA kernels of aligned_mse (ops/dispatch_loss.c), the position loss
 * up to a rigid motion, as ops/ops_aligned.c but all on the device (so a
 * step that uses it can be captured as a graph): a block per set centres
 * it, sums its cross-covariance H and its residuals in double in a fixed
 * tree, and one thread of it finds R from H (a one-sided Jacobi SVD in
 * double, below); one thread then adds the sets' shares in set order, as
 * the CPU does; the backward recomputes each cell's residual from the
 * saved R and means, a thread per cell. kabsch_align (the sampler's) finds
 * R the same way about the origin and turns pred by it. */
#include <float.h>

#include "engine/cuda/row_reduce.cuh"

/* Doubles saved per set: R (row-major, q from p), the weighted means of p
 * and q, the total weight W, the sum of weighted squared residuals, 1 when
 * every weighted coordinate is finite (else 0), and the set's scale
 * 1 / (3 W sets) (0 for a set of W < 2, which is not counted). */
enum { AL_R = 0, AL_MP = 9, AL_MQ = 12, AL_W = 15, AL_SQ = 16, AL_FINITE = 17, AL_SCALE = 18, AL_STRIDE = 19 };

/* Jacobi sweeps at most: each sweep squares the off-diagonal's relative
 * size once it is small (quadratic convergence), so 3x3 matrices settle in
 * 4-6; the cap only bounds a pathological input. */
#define AL_SWEEPS 30

/* Column k of a row-major 3x3. */
__device__ static double col_dot(const double *a, int j, int k)
{
    return a[j] * a[k] + a[3 + j] * a[3 + k] + a[6 + j] * a[6 + k];
}

/* Turns columns j and k of a (and of v) by the angle that makes a's two
 * orthogonal (Hestenes): returns 0 when they already are, to rounding.
 * The relative test |g| <= 1e-15 sqrt(|a_j|^2 |a_k|^2) stops at what
 * double can resolve (eps = 2.2e-16), and is false for a zero column (no
 * rotation needed). t is the smaller root of t^2 + 2 zeta t - 1 = 0,
 * |t| <= 1, and hypot keeps zeta^2 from overflowing. */
__device__ static int orthogonalise(double *a, double *v, int j, int k)
{
    double al = col_dot(a, j, j), be = col_dot(a, k, k), g = col_dot(a, j, k);
    if (!(fabs(g) > 1e-15 * sqrt(al * be))) return 0;
    double zeta = (be - al) / (2.0 * g), t = copysign(1.0, zeta) / (fabs(zeta) + hypot(1.0, zeta));
    double cs = 1.0 / hypot(1.0, t), sn = cs * t;
    for (int r = 0; r < 3; r++) {
        double aj = a[r * 3 + j], ak = a[r * 3 + k], vj = v[r * 3 + j], vk = v[r * 3 + k];
        a[r * 3 + j] = cs * aj - sn * ak, a[r * 3 + k] = sn * aj + cs * ak;
        v[r * 3 + j] = cs * vj - sn * vk, v[r * 3 + k] = sn * vj + cs * vk;
    }
    return 1;
}

__device__ static void normalise(double *u)
{
    double s = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
    for (int i = 0; i < 3; i++) u[i] /= s;
}

/* u2 = u0 x u1. */
__device__ static void cross(const double *u0, const double *u1, double *u2)
{
    u2[0] = u0[1] * u1[2] - u0[2] * u1[1];
    u2[1] = u0[2] * u1[0] - u0[0] * u1[2];
    u2[2] = u0[0] * u1[1] - u0[1] * u1[0];
}

/* The left singular vectors u[3][3] (u[k] the k-th, by falling singular
 * value) from the columns of a = H V = U S, their order o and the
 * largest singular value s0, made exactly orthonormal: u0 = a_o0 / s0;
 * u1 = a_o1 with u0 projected out, normalised; u2 = u0 x u1, signed as
 * a_o2. A singular value below 1e-13 s0 is zero to the rounding of a
 * (a's columns are orthogonal to ~eps s0 after the sweeps), and its
 * vector is any unit vector orthogonal to the others: for a collinear set
 * u1 is made from the coordinate axis least along u0 (Gram-Schmidt).
 * Whichever is picked,
 * it meets a zero singular value, so R H and the loss do not depend on it
 * (with reflections allowed, the sign of u2 neither). All of H zero (a
 * set at one point) gives U = V = I and R = I, as LAPACK does. */
__device__ static void left_vectors(const double *a, const int o[3], double s0, double u[3][3])
{
    double tiny = 1e-13 * s0;
    for (int i = 0; i < 3; i++) u[0][i] = s0 > 0.0 ? a[i * 3 + o[0]] / s0 : (double)(i == 0);
    double along = u[0][0] * a[o[1]] + u[0][1] * a[3 + o[1]] + u[0][2] * a[6 + o[1]];
    for (int i = 0; i < 3; i++) u[1][i] = a[i * 3 + o[1]] - along * u[0][i];
    if (!(sqrt(u[1][0] * u[1][0] + u[1][1] * u[1][1] + u[1][2] * u[1][2]) > tiny)) {
        int axis = 0; /* e_axis - (u0 . e_axis) u0: |u0 . e_axis| <= 1/sqrt(3), so its norm is >= sqrt(2/3) */
        for (int i = 1; i < 3; i++)
            if (fabs(u[0][i]) < fabs(u[0][axis])) axis = i;
        for (int i = 0; i < 3; i++) u[1][i] = (double)(i == axis) - u[0][axis] * u[0][i];
    }
    normalise(u[1]);
    cross(u[0], u[1], u[2]);
    if (u[2][0] * a[o[2]] + u[2][1] * a[3 + o[2]] + u[2][2] * a[6 + o[2]] < 0.0)
        for (int i = 0; i < 3; i++) u[2][i] = -u[2][i];
}

/* The orthogonal R (row-major) that maximises tr(R H) for H = sum w p q^T
 * (H[i * 3 + j] = sum w p_i q_j), reflections allowed: R = V U^T from
 * H = U S V^T, as ast_kabsch(..., allow_reflection 1). The SVD is one-sided
 * Jacobi on H's columns (A = H V -> U S), in double: it works on H itself,
 * not on H^T H, so a small singular value keeps its relative accuracy
 * instead of squaring H's condition number; V is a product of rotations,
 * orthogonal to rounding; U is rebuilt orthonormal by left_vectors. */
__device__ static void best_rotation(const double *h, double *r)
{
    double a[9], v[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1}, s[3], u[3][3];
    for (int i = 0; i < 9; i++) a[i] = h[i];
    for (int sweep = 0; sweep < AL_SWEEPS; sweep++) {
        int turned = orthogonalise(a, v, 0, 1);
        turned |= orthogonalise(a, v, 0, 2);
        turned |= orthogonalise(a, v, 1, 2);
        if (!turned) break;
    }
    int o[3] = {0, 1, 2};
    for (int k = 0; k < 3; k++) s[k] = sqrt(col_dot(a, k, k));
    for (int i = 0; i < 2; i++) /* o: the columns by falling singular value */
        for (int j = 0; j < 2 - i; j++)
            if (s[o[j]] < s[o[j + 1]]) {
                int t = o[j];
                o[j] = o[j + 1], o[j + 1] = t;
            }
    left_vectors(a, o, s[o[0]], u);
    for (int i = 0; i < 3; i++) /* R[i][j] = sum_k V[i][o_k] u_k[j] */
        for (int j = 0; j < 3; j++)
            r[i * 3 + j] = v[i * 3 + o[0]] * u[0][j] + v[i * 3 + o[1]] * u[1][j] + v[i * 3 + o[2]] * u[2][j];
}

__device__ static double weight_of(const float *mask, int64_t cell) { return mask ? (double)mask[cell] : 1.0; }

/* Each of n values summed over the block (every thread calls it). */
__device__ static void block_sums(double *v, int n)
{
    for (int k = 0; k < n; k++) v[k] = group_sum<AST_ROW_BLOCK>(v[k]);
}

/* Pass 1 of set b, into the thread's st (every thread gets the same
 * sums): W, the weighted means of p and q, and whether every
 * weighted coordinate is finite. As on the CPU, a cell of weight 0 is
 * never read: padding may hold anything. */
__device__ static void set_moments(const float *pred, const float *target, const float *mask, int64_t b, int64_t np,
                                   double *st)
{
    double m[8] = {0.0}; /* sum w p, sum w q, W, non-finite coordinates */
    for (int64_t i = threadIdx.x; i < np; i += blockDim.x) {
        double w = weight_of(mask, b * np + i);
        m[6] += w;
        if (w == 0.0) continue;
        for (int d = 0; d < 3; d++) {
            double p = pred[(b * np + i) * 3 + d], q = target[(b * np + i) * 3 + d];
            m[d] += w * p, m[3 + d] += w * q;
            m[7] += !isfinite(p) || !isfinite(q);
        }
    }
    block_sums(m, 8);
    for (int d = 0; d < 3; d++) st[AL_MP + d] = m[d] / m[6], st[AL_MQ + d] = m[3 + d] / m[6];
    st[AL_W] = m[6];
    st[AL_FINITE] = m[7] == 0.0;
}

/* Cell i of set b centred: p~ and q~ (0 - mean for a cell of weight 0, as
 * the CPU loads it; its weight keeps it out of every sum). */
__device__ static void centred(const float *pred, const float *target, const double *st, int64_t cell, double w,
                               double *p, double *q)
{
    for (int d = 0; d < 3; d++) {
        p[d] = (w != 0.0 ? (double)pred[cell * 3 + d] : 0.0) - st[AL_MP + d];
        q[d] = (w != 0.0 ? (double)target[cell * 3 + d] : 0.0) - st[AL_MQ + d];
    }
}

/* H = sum w p~ q~^T of set b about the means in st (zeros: about the
 * origin, as p - 0.0 is p), summed over the block (every thread gets it;
 * the sums' barriers also end the block's reads of the last set's R). */
__device__ static void cross_covariance(const float *pred, const float *target, const float *mask, const double *st,
                                        int64_t b, int64_t np, double *h)
{
    double p[3], q[3];
    for (int k = 0; k < 9; k++) h[k] = 0.0;
    for (int64_t i = threadIdx.x; i < np; i += blockDim.x) {
        double w = weight_of(mask, b * np + i);
        if (w == 0.0) continue;
        centred(pred, target, st, b * np + i, w, p, q);
        for (int k = 0; k < 9; k++) h[k] += w * p[k / 3] * q[k % 3];
    }
    block_sums(h, 9);
}

/* e = R p~ - q~. */
__device__ static void residual(const double *r, const double *p, const double *q, double *e)
{
    for (int a = 0; a < 3; a++) e[a] = r[a * 3] * p[0] + r[a * 3 + 1] * p[1] + r[a * 3 + 2] * p[2] - q[a];
}

/* A block per set (grid-stride over sets): moments, then H = sum w p~ q~^T
 * and R, then sum w |R p~ - q~|^2, each a fixed-order block sum, so the
 * loss repeats bit for bit. A set of W < 2 or with a non-finite cell
 * stops after the moments. Each thread works from its own copy of the
 * moments (the same bits in every thread), the block shares R. */
__global__ void aligned_sets_kernel(const float *pred, const float *target, const float *mask, int64_t nb, int64_t np,
                                    double *stats)
{
    __shared__ double r[9];
    for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {
        double st[AL_STRIDE], h[9], p[3], q[3], e[3];
        set_moments(pred, target, mask, b, np, st);
        if (threadIdx.x >= AL_MP && threadIdx.x <= AL_W) stats[b * AL_STRIDE + threadIdx.x] = st[threadIdx.x];
        if (threadIdx.x == 0) stats[b * AL_STRIDE + AL_FINITE] = st[AL_FINITE];
        if (st[AL_W] < 2.0 || st[AL_FINITE] == 0.0) continue;
        cross_covariance(pred, target, mask, st, b, np, h);
        if (threadIdx.x == 0) best_rotation(h, r);
        __syncthreads();
        double sq = 0.0;
        for (int64_t i = threadIdx.x; i < np; i += blockDim.x) {
            double w = weight_of(mask, b * np + i);
            if (w == 0.0) continue;
            centred(pred, target, st, b * np + i, w, p, q);
            residual(r, p, q, e);
            sq += w * (e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
        }
        sq = group_sum<AST_ROW_BLOCK>(sq);
        if (threadIdx.x < 9) stats[b * AL_STRIDE + AL_R + threadIdx.x] = r[threadIdx.x];
        if (threadIdx.x == 0) stats[b * AL_STRIDE + AL_SQ] = sq;
    }
}

/* One thread, as the CPU's loop: the sets of W >= 2, each one's scale,
 * and the loss sum_b scale_b sq_b in set order (NaN once a counted set is
 * not finite). */
__global__ void aligned_total_kernel(double *stats, int64_t nb, float *y)
{
    int64_t sets = 0;
    for (int64_t b = 0; b < nb; b++) sets += stats[b * AL_STRIDE + AL_W] >= 2.0;
    double total = 0.0;
    for (int64_t b = 0; b < nb; b++) {
        double *st = stats + b * AL_STRIDE;
        st[AL_SCALE] = st[AL_W] >= 2.0 ? 1.0 / (3.0 * st[AL_W] * (double)sets) : 0.0;
        if (st[AL_W] < 2.0) continue;
        total = st[AL_FINITE] != 0.0 ? total + st[AL_SCALE] * st[AL_SQ] : NAN;
    }
    y[0] = (float)total;
}

/* A thread per cell: dL/dp = dy 2 scale w R^T e and dL/dq = -dy 2 scale w e
 * (R and the means optimal: their change drops out), each rounded to float
 * before dy multiplies it, as the CPU saves it; 0 for a cell of weight 0
 * or in a set not counted (whose R was never written), NaN throughout a
 * counted set with a non-finite cell. assign: = (else +=). */
__global__ void aligned_backward_kernel(const float *pred, const float *target, const float *mask,
                                        const double *stats, const float *dy, int64_t nb, int64_t np, float *gp,
                                        int assign_p, float *gq, int assign_q)
{
    float g = dy[0];
    for (int64_t cell = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; cell < nb * np;
         cell += (int64_t)gridDim.x * blockDim.x) {
        const double *st = stats + cell / np * AL_STRIDE, *r = st + AL_R;
        double w = weight_of(mask, cell), k = 2.0 * st[AL_SCALE] * w, p[3], q[3], e[3];
        float up[3] = {0.0f, 0.0f, 0.0f}, uq[3] = {0.0f, 0.0f, 0.0f};
        if (st[AL_SCALE] != 0.0 && st[AL_FINITE] == 0.0)
            for (int d = 0; d < 3; d++) up[d] = uq[d] = NAN;
        else if (k != 0.0) {
            centred(pred, target, st, cell, w, p, q);
            residual(r, p, q, e);
            for (int d = 0; d < 3; d++) {
                up[d] = (float)(k * (r[d] * e[0] + r[3 + d] * e[1] + r[6 + d] * e[2]));
                uq[d] = (float)(-k * e[d]);
            }
        }
        for (int d = 0; d < 3; d++) {
            if (gp) gp[cell * 3 + d] = assign_p ? g * up[d] : gp[cell * 3 + d] + g * up[d];
            if (gq) gq[cell * 3 + d] = assign_q ? g * uq[d] : gq[cell * 3 + d] + g * uq[d];
        }
    }
}

/* saved: the sets' stats (device doubles, AL_STRIDE each). */
static void aligned_backward(ast_ctx *c, const ast_node *n, const ast_op_grads *g)
{
    ast_tensor *pred = n->in[0], *target = n->in[1], *mask = n->in[2];
    int64_t cells = pred->shape[0] * pred->shape[1];
    if ((!g->g[0] && !g->g[1]) || !cells) return;
    aligned_backward_kernel<<<ast_cuda_blocks(cells), AST_CUDA_THREADS, 0, AST_CUDA_STREAM>>>(
        pred->data, target->data, mask ? mask->data : NULL, (const double *)n->saved, n->out->grad, pred->shape[0],
        pred->shape[1], g->g[0], g->assign[0], g->g[1], g->assign[1]);
    AST_CUDA_LAUNCHED();
}

static void aligned_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *pred = n->in[0], *mask = n->in[2];
    int64_t nb = pred->shape[0], np = pred->shape[1];
    double *stats = (double *)ast_data_alloc_uninit(c, (size_t)(nb > 0 ? nb : 1) * AL_STRIDE * sizeof *stats);
    if (nb) {
        aligned_sets_kernel<<<(unsigned)(nb < 65535 ? nb : 65535), AST_ROW_BLOCK, 0, AST_CUDA_STREAM>>>(
            pred->data, n->in[1]->data, mask ? mask->data : NULL, nb, np, stats);
        AST_CUDA_LAUNCHED();
    }
    aligned_total_kernel<<<1, 1, 0, AST_CUDA_STREAM>>>(stats, nb, n->out->data);
    AST_CUDA_LAUNCHED();
    n->saved = stats;
}

/* kabsch_align, a block per set (grid-stride over sets): whether every
 * weighted coordinate is finite (set_moments; its means are not used),
 * H about the origin, R by one thread, then each cell of pred, padding
 * included, turned by R in double and rounded once, as on the CPU; a set
 * with a non-finite weighted coordinate comes out NaN. */
__global__ void align_sets_kernel(const float *pred, const float *target, const float *mask, int64_t nb, int64_t np,
                                  float *out)
{
    __shared__ double r[9];
    for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {
        double st[AL_STRIDE], h[9];
        set_moments(pred, target, mask, b, np, st);
        int finite = st[AL_FINITE] != 0.0; /* the same in every thread: the branches below are the block's */
        for (int d = 0; d < 3; d++) st[AL_MP + d] = st[AL_MQ + d] = 0.0;
        if (finite) cross_covariance(pred, target, mask, st, b, np, h);
        if (finite && threadIdx.x == 0) best_rotation(h, r); /* set_moments' barriers ended the last set's reads */
        __syncthreads();
        for (int64_t i = threadIdx.x; i < np; i += blockDim.x) {
            const float *p = pred + (b * np + i) * 3;
            double x = p[0], y = p[1], z = p[2];
            float *o = out + (b * np + i) * 3;
            for (int a = 0; a < 3; a++)
                o[a] = finite ? (float)(r[a * 3] * x + r[a * 3 + 1] * y + r[a * 3 + 2] * z) : NAN;
        }
    }
}

static void align_forward(ast_ctx *c, ast_node *n)
{
    ast_tensor *pred = n->in[0], *mask = n->in[2];
    int64_t nb = pred->shape[0];
    if (!nb || !pred->shape[1]) return;
    align_sets_kernel<<<(unsigned)(nb < 65535 ? nb : 65535), AST_ROW_BLOCK, 0, AST_CUDA_STREAM>>>(
        pred->data, n->in[1]->data, mask ? mask->data : NULL, nb, pred->shape[1], n->out->data);
    AST_CUDA_LAUNCHED();
}

extern "C" void ast_cuda_aligned_kernels(ast_op_kernel *t)
{
    t[AST_OP_aligned_mse] = ast_op_kernel{aligned_forward, aligned_backward, 3u, 0};
    t[AST_OP_kabsch_align] = ast_op_kernel{align_forward, NULL, 0, 0}; /* no backward: inference only */
}
