/* alphast/sample.h: the reverse diffusion process (docs/model.md §6) — generating
 * positions from expression, expression from positions, or both. */
#ifndef ALPHAST_SAMPLE_H
#define ALPHAST_SAMPLE_H

#include "model/diffusion.h"
#include "model/model.h"

/* What the sampler returns for a generated modality: the model's last x0
 * prediction (default; fixes docs/model.md §11 item 14), or the reference's final
 * state z0, which still carries posterior noise of std ~ sigma_bar[0]. */
typedef enum ast_sample_return { AST_RETURN_X0, AST_RETURN_Z0 } ast_sample_return;

const char *ast_sample_return_name(ast_sample_return r);
int ast_sample_return_parse(const char *s, ast_sample_return *out); /* 0, or -1 if unknown */

typedef struct ast_sampler_config {
    ast_train_mode mode; /* which modalities to generate */
    int num_steps;       /* network evaluations asked for; <= 0: one per diffusion step */
    ast_sample_return ret;
    uint64_t seed;       /* the limit sample and the posterior noise */
    ast_pos_param pos_param; /* what the network's position output means */
    int align;           /* rotate each x0 prediction of positions onto the state before stepping (for a
                            rotation-invariant position loss, whose predictions have no preferred frame) */
    ast_precision precision; /* of the network's GEMMs: the run's training.precision */
    int op_by_op;        /* on a device: never capture the reverse step as a graph (tests compare the two) */
} ast_sampler_config;

/* The reference's step grid: delta = max(1, floor(T / num_steps)) and the
 * times s in {0, delta, 2 delta, ...} below T, descending; the first jump
 * is from T. Writes them to s_out (room for T entries, or NULL) and
 * returns their number, i.e. the network evaluations. */
int ast_sample_grid(int T, int num_steps, int *s_out);

/* Generates sc->mode's modalities for B sets of N cells with the model in
 * eval mode. expr [B,N,G] and pos [B,N,3] give the conditioning modality
 * (the generated one is ignored and may be NULL); mask [B,N] marks valid
 * cells (NULL = all). out_expr / out_pos receive the result: generated
 * modalities per sc->ret, conditioning ones as given. out_expr may be NULL
 * when expression is given rather than generated: the [B, N, G] copy of it
 * is then spared. Deterministic for a given seed.
 *
 * On a device the state stays in device memory: each step is the eval
 * forward and the reverse update as engine ops, with the host staging the
 * step's times, coefficients and noise (drawn as on the CPU), and from the
 * third step on one replay of the step captured as a graph when nothing in
 * it makes the host wait (docs/gpu.md). Returns the network evaluations
 * replayed from that graph (0 on the CPU, and op by op). */
int ast_sample(ast_model *m, const ast_schedule *s, const ast_sampler_config *sc, int B, int N, const float *expr,
                const float *pos, const float *mask, float *out_expr, float *out_pos);

/* For 2-D data: rotates one set's generated positions [N,3] about their
 * centre (over the cells with mask 1; mask NULL = all) onto their
 * principal axes, the widest first, so that z is the direction the set
 * spreads least in and dropping it loses the least. Distances are
 * unchanged (a rotation or reflection; the positions had no fixed frame). */
void ast_positions_to_principal_axes(int N, float *pos, const float *mask);
/* Generated positions of 2-D data as they are written and scored: each of
 * B sets of N cells (mask [B, N], NULL = all) turned onto its principal
 * axes, then z (the direction it spreads least in) set to 0. */
void ast_positions_flatten(int B, int N, float *pos, const float *mask);

#endif
