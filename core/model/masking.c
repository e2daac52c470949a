/* Drawing the masks of masked diffusion (docs/model.md §5): how many genes, which
 * ones per strategy, which position axes, and the progressive ratio. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/masking.h"

/* Genes the reference always leaves visible (its min_visible_genes). */
#define MIN_VISIBLE_GENES 10
/* Share of position-masked cells that lose two axes instead of one. */
#define TWO_AXES_SHARE 0.3f

float ast_masking_ratio(const ast_masking_config *mc, float target, int64_t step)
{
    if (!mc->progressive) return target;
    double done = (double)step / (double)mc->progressive_steps;
    return (float)(target * (done < 1.0 ? done : 1.0));
}

int ast_mask_gene_count(int G, float ratio)
{
    if (!(ratio > 0.0f) || G < 1) return 0;
    int visible = G > MIN_VISIBLE_GENES ? MIN_VISIBLE_GENES : G - 1;
    int m = (int)floor((double)G * ratio);
    if (m < 1) m = 1;
    return m < G - visible ? m : G - visible;
}

static int is_valid(const float *node_mask, int64_t cell) { return !node_mask || node_mask[cell] > 0.5f; }

static int rng_below(ast_rng *rng, int n) { return (int)(ast_rng_next(rng) % (uint64_t)n); }

/* m of the G genes, uniformly: the first m steps of a Fisher-Yates shuffle. */
static void mask_random(ast_rng *rng, int G, int m, int *order, float *out)
{
    for (int g = 0; g < G; g++) order[g] = g;
    for (int k = 0; k < m; k++) {
        int j = k + rng_below(rng, G - k), tmp = order[k];
        order[k] = order[j], order[j] = tmp;
        out[order[k]] = 1.0f;
    }
}

typedef struct gene_size {
    float size;
    int gene;
} gene_size;

static int larger_first(const void *pa, const void *pb)
{
    const gene_size *a = pa, *b = pb;
    if (a->size != b->size) return a->size > b->size ? -1 : 1;
    return a->gene - b->gene;
}

static void mask_largest(const float *input, int G, int m, gene_size *by_size, float *out)
{
    for (int g = 0; g < G; g++) by_size[g] = (gene_size){fabsf(input[g]), g};
    qsort(by_size, (size_t)G, sizeof *by_size, larger_first);
    for (int k = 0; k < m; k++) out[by_size[k].gene] = 1.0f;
}

void ast_mask_expression(ast_mask_strategy strategy, ast_rng *rng, int B, int N, int G, int m_cnt,
                         const float *input, const float *node_mask, float *out)
{
    AST_ASSERT(m_cnt >= 0 && m_cnt <= G, "mask: %d of %d genes", m_cnt, G);
    memset(out, 0, (size_t)B * N * G * sizeof *out);
    int *order = ast_xmalloc((size_t)G * sizeof *order);
    gene_size *by_size = ast_xmalloc((size_t)G * sizeof *by_size);
    for (int b = 0; b < B; b++) {
        int start = strategy == AST_MASK_BLOCK ? rng_below(rng, G - m_cnt + 1) : 0;
        for (int n = 0; n < N; n++) {
            int64_t cell = (int64_t)b * N + n;
            float *row = out + cell * G;
            if (!is_valid(node_mask, cell)) continue;
            switch (strategy) {
            case AST_MASK_RANDOM: mask_random(rng, G, m_cnt, order, row); break;
            case AST_MASK_BLOCK: for (int g = start; g < start + m_cnt; g++) row[g] = 1.0f; break;
            case AST_MASK_STRUCTURED: mask_largest(input + cell * G, G, m_cnt, by_size, row); break;
            }
        }
    }
    free(order);
    free(by_size);
}

void ast_mask_positions(ast_rng *rng, int B, int N, float ratio, const float *node_mask, float *out)
{
    memset(out, 0, (size_t)B * N * 3 * sizeof *out);
    for (int64_t cell = 0; cell < (int64_t)B * N; cell++) {
        if (!is_valid(node_mask, cell)) continue;
        float r = ast_rng_uniform01(rng), *axes = out + cell * 3;
        if (r < TWO_AXES_SHARE * ratio) { /* two distinct axes: all but one left visible */
            int visible = rng_below(rng, 3);
            for (int d = 0; d < 3; d++) axes[d] = d != visible;
        } else if (r < ratio) {
            axes[rng_below(rng, 3)] = 1.0f;
        }
    }
}
