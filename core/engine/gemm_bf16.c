/* The GEMMs of linear, matmul and bmm in bf16 (training.precision:
 * bf16-mixed): both operands rounded to bfloat16, products accumulated in
 * float32 into a float32 C, as PyTorch's CPU autocast runs them (its
 * output is then rounded to bf16 as well; ours stays float32). oneDNN's
 * matmul does the arithmetic with AVX512-BF16 or AMX instructions
 * (gemm_onednn.c, split over the pool as the float32 GEMMs are); a CPU
 * with neither is refused rather than emulated (ast_bf16_supported). */
#include <stdio.h>

#include "engine/gemm_internal.h"

#if AST_HAVE_ONEDNN
#include <string.h>

/* Per thread that calls ast_gemm_bf16: the bf16 copies of the operands,
 * kept for the thread's life (the sizes stop growing after a step). */
static _Thread_local struct {
    void *operands;
    size_t operands_cap;
} tls;

int ast_bf16_supported(char *info, size_t n)
{
    const ast_onednn_info *in = ast_onednn();
    if (in->ok && !in->bf16)
        snprintf(info, n, "this CPU has neither AVX512-BF16 nor AMX (%s's best instruction set here is %s; "
                 "ONEDNN_MAX_CPU_ISA can lower it), and bf16 would only be emulated", in->version, in->isa);
    else
        snprintf(info, n, "%s", in->text);
    return in->ok && in->bf16;
}

/* ---- float32 operands to bf16 --------------------------------------------- */

/* Rounds to nearest, ties to even, as vcvtneps2bf16 and PyTorch do; a NaN
 * stays a quiet NaN instead of rounding into infinity. */
static inline uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40u);
    return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

/* A and B as stored (rows of cols with leading dimension ld) into dense
 * bf16 copies; the rows of both are one range of items for the pool. */
typedef struct convert_args {
    const float *src[2];
    uint16_t *dst[2];
    int64_t rows[2], cols[2], ld[2];
} convert_args;

static void convert_rows(void *arg, int64_t lo, int64_t hi)
{
    const convert_args *a = arg;
    for (int64_t r = lo; r < hi; r++) {
        int i = r >= a->rows[0];
        int64_t row = r - i * a->rows[0], cols = a->cols[i];
        const float *s = a->src[i] + row * a->ld[i];
        uint16_t *d = a->dst[i] + row * cols;
        for (int64_t j = 0; j < cols; j++) d[j] = to_bf16(s[j]);
    }
}

void ast_gemm_bf16(const ast_gemm_args *g)
{
    char why[256];
    AST_ASSERT(ast_bf16_supported(why, sizeof why), "bf16 GEMM: %s", why);
    /* A is stored [m, k] ([k, m] transposed), B [k, n] ([n, k]). */
    int64_t ra = g->ta ? g->k : g->m, ca = g->ta ? g->m : g->k, rb = g->tb ? g->n : g->k, cb = g->tb ? g->k : g->n;
    int64_t a_elems = (ra * ca + AST_GEMM_ALIGN - 1) / AST_GEMM_ALIGN * AST_GEMM_ALIGN; /* B's copy starts aligned too */
    uint16_t *a16 = ast_grow_aligned(&tls.operands, &tls.operands_cap, (size_t)(a_elems + rb * cb) * sizeof(uint16_t));
    convert_args cv = {{g->a, g->b}, {a16, a16 + a_elems}, {ra, rb}, {ca, cb}, {g->lda, g->ldb}};
    ast_parallel_for(ra + rb, ast_row_grain((ra * ca + rb * cb) / (ra + rb)), convert_rows, &cv);
    ast_gemm_args h = *g;
    h.a = cv.dst[0], h.b = cv.dst[1], h.lda = (int)ca, h.ldb = (int)cb;
    ast_gemm_onednn(&h, 1);
}

#else

int ast_bf16_supported(char *info, size_t n)
{
    snprintf(info, n, "this alphast was built without oneDNN (install it with apt-get install libdnnl-dev, then run "
                      "configure and make again)");
    return 0;
}

#endif
