/* engine/gemm_internal.h: what the float32 GEMM (gemm.c) and the bf16 one
 * (gemm_bf16.c) share: a GEMM's arguments and how it is cut into parts,
 * one per thread of the pool, each run by one single-threaded call. */
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
/* g's GEMM with its float32 operands rounded to bf16 and float32
 * accumulation (oneDNN's matmul); g->alpha must be 1. m, n, k > 0. */
void ast_gemm_bf16(const ast_gemm_args *g);
#endif

#endif
