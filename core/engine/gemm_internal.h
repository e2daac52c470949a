/* engine/gemm_internal.h: what the GEMMs share (gemm.c on OpenBLAS,
 * gemm_onednn.c on oneDNN, gemm_bf16.c): a GEMM's arguments and how it is
 * cut into parts, one per thread of the pool, each run by one
 * single-threaded call. */
#ifndef ALPHAST_GEMM_INTERNAL_H
#define ALPHAST_GEMM_INTERNAL_H

#include "engine/engine.h"

/* C = alpha op(A) op(B) + beta C, row-major; op = transpose when ta / tb. */
typedef struct ast_gemm_args {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    const void *a, *b; /* float, or bf16 (uint16_t) in gemm_bf16.c */
    float *c;
    const float *bias; /* [n] added to each row of C; NULL: none */
    int by_rows;       /* parts are ranges of C's rows, else of its columns */
} ast_gemm_args;

/* One part: its rows and columns of C and where its operands start, in
 * elements from a, b, c and bias. */
typedef struct ast_gemm_part {
    int m, n;
    int64_t a, b, c, bias;
} ast_gemm_part;

/* Part [lo, hi) of g's rows or columns: op(A)'s rows are A's rows, or its
 * columns when A is transposed; op(B)'s columns likewise. */
static inline ast_gemm_part ast_gemm_part_of(const ast_gemm_args *g, int64_t lo, int64_t hi)
{
    if (g->by_rows)
        return (ast_gemm_part){(int)(hi - lo), g->n, g->ta ? lo : lo * g->lda, 0, lo * g->ldc, 0};
    return (ast_gemm_part){g->m, (int)(hi - lo), 0, g->tb ? lo * g->ldb : lo, lo, lo};
}

/* Runs part(g, lo, hi) over the pool along C's longer side (each part then
 * packs the smaller share of the operands), in parts of at least ~0.5 M
 * multiply-adds. Sets g->by_rows. m, n, k > 0. */
void ast_gemm_split(ast_gemm_args *g, ast_range_fn part);

#if AST_HAVE_ONEDNN
#define AST_GEMM_ALIGN 64

/* What oneDNN offers here, found once. */
typedef struct ast_onednn_info {
    int ok;             /* its CPU engine runs */
    int avx512, bf16;   /* its instruction set has AVX-512 (avx512_core), and AVX512-BF16 or AMX */
    char version[32];   /* "oneDNN 2.6.3" */
    char isa[64];       /* its best instruction set here, "avx2" */
    char text[160];     /* "oneDNN 2.6.3, avx2", or why it cannot run */
} ast_onednn_info;
const ast_onednn_info *ast_onednn(void);

/* g's GEMM split over the pool (ast_gemm_split), each part one oneDNN
 * matmul on one thread; a and b are float32, or bf16 (uint16_t) when
 * bf16. oneDNN must be ok. m, n, k > 0. */
void ast_gemm_onednn(ast_gemm_args *g, int bf16);

/* A buffer of at least `bytes`, AST_GEMM_ALIGN-aligned, kept in *p / *cap. */
void *ast_grow_aligned(void **p, size_t *cap, size_t bytes);

/* g's GEMM with its float32 operands rounded to bf16 and float32
 * accumulation (oneDNN's matmul); g->alpha must be 1. m, n, k > 0. */
void ast_gemm_bf16(const ast_gemm_args *g);
#endif

#endif
