/* eval/sample_device.h: the reverse diffusion with its state in a device's
 * memory (eval-internal; sample.c chooses it). Each step is the network's
 * eval forward, the x0 prediction of positions (turned onto the state
 * with sampler_config.align: the op kabsch_align) and the posterior update
 * z_s = cz z_t + cx x0 + std eps (positions re-centred), all queued as
 * engine ops; the host only stages the step's times, coefficients and
 * noise in pinned memory (drawn from the sampler's RNG in the order the
 * CPU draws them, so the noise is the CPU's, bit for bit), the next
 * step's while the device runs this one, and waits for the step to end. The first two steps run op by op; when the second made
 * the host wait for nothing, the step is captured as a graph
 * (engine/graph.h) and every later step is one replay. */
#ifndef ALPHAST_SAMPLE_DEVICE_H
#define ALPHAST_SAMPLE_DEVICE_H

#include "model/diffusion.h"
#include "eval/sample.h"

/* The network's per-set constants (ast_model_prior_in) of B sets of N
 * cells, on the host: computed once before the reverse diffusion from the
 * given expression, which the sampler never steps, rather than at every
 * network evaluation. Both NULL when the model needs neither or the
 * sampler generates the expression (each evaluation then computes them
 * from its state, as the model does without them). */
typedef struct ast_sample_prior {
    float *prior, *geo; /* [B, N, 3], [B, N, N] */
} ast_sample_prior;
ast_sample_prior ast_sample_prior_new(ast_model *m, const ast_sampler_config *sc, int B, int N);
/* Computes sets lo .. hi of expr [B, N, G] (mask [B, N], NULL = all valid). */
void ast_sample_prior_fill(ast_model *m, const ast_sample_prior *sp, int lo, int hi, int N, const float *expr,
                           const float *mask);
void ast_sample_prior_free(ast_sample_prior *sp);

/* ast_sample on a device backend for B sets of N cells (the arguments as
 * there; z holds the limit sample, drawn from rng on the host, and its
 * times; sp the sets' constants, as ast_sample_prior_fill made them).
 * Returns the network evaluations replayed from a graph. */
int ast_sample_on_device(ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, ast_rng *rng, int B, int N,
                         const float *mask, const ast_sample_prior *sp, ast_noised *z, float *out_expr, float *out_pos);

#endif
