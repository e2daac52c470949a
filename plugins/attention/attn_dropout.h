/* The gated attention's dropout decisions, shared by its CPU kernel
 * (attn_gated_kernel.c) and its CUDA kernel (attn_gated_cuda.cu), so both
 * drop the same probabilities for the same seed. A decision hashes a
 * probability's (row, key) index with the call's seed, so any pass can
 * recompute it: a row key from (seed, bh * N + i), then per key a 32-bit
 * mix (Wellons' lowbias32) whose top 24 bits are the uniform, compared with
 * drop_below = p * 2^24. 32-bit lanes: twice as many per vector as 64-bit,
 * and the multiplies are cheaper. */
#ifndef ALPHAST_ATTN_DROPOUT_H
#define ALPHAST_ATTN_DROPOUT_H

#include "alphast/plugin.h"

static inline AST_HOSTDEV uint32_t attn_mix32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static inline AST_HOSTDEV uint32_t attn_row_key(uint64_t seed, int64_t row)
{
    return attn_mix32((uint32_t)seed ^ attn_mix32((uint32_t)(seed >> 32) + (uint32_t)row));
}

static inline AST_HOSTDEV uint32_t attn_cell_hash(uint32_t key, int64_t j)
{
    return attn_mix32(key + (uint32_t)j * 0x9e3779b9u) >> 8;
}

/* drop_below for dropout probability p in [0, 1): p * 2^24, 0 = no dropout. */
static inline uint32_t attn_drop_below(float p) { return p > 0.0f ? (uint32_t)((double)p * 16777216.0) : 0u; }

#endif
