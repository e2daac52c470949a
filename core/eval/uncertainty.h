/* alphast/uncertainty.h: whether the spread of a model's samples says how
 * wrong its placement is. S placements of the same sets from different
 * noise seeds are compared with the truth by three measures
 * (docs/evaluation.md, "Uncertainty"):
 * - spread/skill: the samples' spread about their mean over the error of
 *   the mean, after rigid alignment (rotation or reflection and
 *   translation, no scale); ~1 calibrated, << 1 overconfident;
 * - the energy score of the samples' pairwise-distance vectors against the
 *   true one (a proper scoring rule, lower is better);
 * - per-cell coverage: how often the true position lies within the
 *   samples' reach, beside the level a calibrated sampler gets. */
#ifndef ALPHAST_UNCERTAINTY_H
#define ALPHAST_UNCERTAINTY_H

typedef struct ast_uncertainty {
    int samples;           /* S */
    double spread;         /* RMS distance of a sample's cell from the sample mean (divisor S - 1), length unit */
    double skill;          /* RMS distance of the aligned sample mean's cell from the truth, length unit */
    double spread_skill;   /* sqrt((S + 1) / S) * spread / skill: 1 for a calibrated sampler */
    double energy;         /* energy score on pairwise-distance vectors, RMS over pairs, length unit */
    double coverage;       /* fraction of cells whose truth is covered (see ast_uncertainty_compute) */
    double coverage_nominal; /* S / (S + 1): the coverage of a calibrated sampler */
} ast_uncertainty;

/* samples [S, B, N, 3] placements of the B sets of truth [B, N, 3], whose
 * valid cells (mask [B, N] 1, NULL: all) come first. Per set the samples
 * are aligned onto their mean (generalised Procrustes), the mean onto the
 * truth, and the samples with it. Spread and skill pool the cells of all
 * sets; the energy score is the mean over sets. A cell is covered when its
 * true position is no farther from the centre of the S + 1 points (truth
 * and samples) than the farthest sample: were the truth one more draw of
 * the sampler, that happens with probability S / (S + 1). With S < 2 only
 * skill and the energy score are defined (the rest NaN). */
void ast_uncertainty_compute(int S, int B, int N, const float *samples, const float *truth, const float *mask,
                             ast_uncertainty *out);

/* What the measures say: "overconfident" when spread/skill is below 0.5
 * (the samples spread less than half as far as they err) or the coverage
 * below half the calibrated level (the spread misses the cells that are
 * farthest off), "underconfident" when spread/skill is above 2, else
 * "calibrated"; NULL when they are not defined (S < 2). A factor of two:
 * with hundreds of cells the ratio's and the coverage's sampling errors are
 * a few per cent, so what lies outside is miscalibration, not noise. */
const char *ast_uncertainty_judgement(const ast_uncertainty *u);

#endif
