/* The fused softmax-attention core of the gated plugin: one tape node with
 * its own backward, in two implementations on the CPU that agree to
 * rounding, and the tiled one for CUDA. */
#ifndef ALPHAST_ATTN_GATED_KERNEL_H
#define ALPHAST_ATTN_GATED_KERNEL_H

#include "alphast/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum attn_kernel {
    /* FlashAttention-2 style: key tiles with an online softmax, only the
     * per-row log-sum-exp is kept; the backward recomputes the tiles. */
    ATTN_KERNEL_TILED = 0,
    /* Materialises the B*H*N*N probabilities (reference, short sets). */
    ATTN_KERNEL_NAIVE = 1
} attn_kernel;

typedef struct attn_core_cfg {
    attn_kernel kernel;
    int tile;      /* rows and columns of a tile (tiled kernel) */
    float dropout; /* on the probabilities; pass 0 outside training */
} attn_core_cfg;

/* O = Dropout(softmax(Q K^T / sqrt(dh))) V for q, k, v [B, H, N, dh]. Keys
 * of cells with mask [B, N] == 0 get no probability; a set without any
 * valid cell attends over all its cells, as the unmasked reference does.
 * mask may be NULL (no padding). The dropout keep decision is a hash of
 * (seed drawn once per call from ast_rng_key, b, h, i, j), so both
 * kernels and both passes drop the same cells. This is the CPU kernel of
 * the plugin's fused op "gated_attention" (its descriptor's kernels table;
 * create() finds it with ast_kernel_find). */
typedef ast_tensor *(*attn_core_fn)(ast_ctx *c, ast_tensor *q, ast_tensor *k, ast_tensor *v, const ast_tensor *mask,
                                    const attn_core_cfg *cfg);
ast_tensor *attn_core(ast_ctx *c, ast_tensor *q, ast_tensor *k, ast_tensor *v, const ast_tensor *mask,
                      const attn_core_cfg *cfg);

/* The widest head (dh = d_model / heads) the CUDA kernel takes: each
 * query or key row lives in the registers of up to 8 threads. */
#define ATTN_CUDA_MAX_DH 128

#if AST_HAVE_CUDA
/* The same op on CUDA (attn_gated_cuda.cu), tiled only (cfg->tile is not
 * used: the tiles are fixed by dh), for dh <= ATTN_CUDA_MAX_DH: the
 * "cuda" kernel of "gated_attention". Same mask and dropout decisions as
 * the CPU kernels; numbers equal to float32 rounding. */
ast_tensor *attn_core_cuda(ast_ctx *c, ast_tensor *q, ast_tensor *k, ast_tensor *v, const ast_tensor *mask,
                           const attn_core_cfg *cfg);
#endif

#ifdef __cplusplus
}
#endif
#endif
