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

/* ast_sample on a device backend for B sets of N cells (the arguments as
 * there; z holds the limit sample, drawn from rng on the host, and its
 * times). Returns the network evaluations replayed from a graph. */
int ast_sample_on_device(ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, ast_rng *rng, int B, int N,
                         const float *mask, ast_noised *z, float *out_expr, float *out_pos);

#endif
