/* The baselines of a held-out evaluation, run per set on the same cells as
 * the model and scored by the same code (eval_score):
 * - positions: random N(0, 1) coordinates; classical MDS and Isomap of the
 *   set's expression (training-free, in the data's dimension, given the
 *   training cells' nearest-neighbour spacing as length unit); and, where
 *   held-out and training cells share a coordinate frame (a slab of a slice
 *   whose other part was trained on), kNN regression from the training
 *   cells' positions;
 * - expression: random N(0, 1) values; the mean training profile; and, in a
 *   shared frame, the mean of the k spatially nearest training cells. */
#include <stdlib.h>
#include <string.h>

#include "eval/baselines.h"
#include "evaluate_internal.h"

#define RANDOM_SEED 0x4a2d0b5eull
#define SPACING_SEED 0x5bac1e55ull

int eval_set_cells(const ast_eval_sets *t, int b)
{
    int n = 0;
    while (n < t->N && t->mask[(int64_t)b * t->N + n] > 0.5f) n++;
    return n;
}

/* The training cells of one slice, positions in the sets' units; their
 * expression is read from the dataset row by row, and their mean profile
 * once, when first asked for. */
typedef struct reference {
    ast_reference_cells cells;
    const ast_dataset *d;
    int64_t *ids;
    float *pos, *profile;
} reference;

static void reference_row(const void *ctx, int64_t i, float *out)
{
    const reference *ref = ctx;
    ast_data_row(ref->d, ref->ids[i], out);
}

static void reference_of_slice(const eval_run *run, int slice, reference *ref)
{
    const ast_dataset *d = run->sets->d;
    int64_t n = 0;
    for (int64_t i = 0; i < run->train->n; i++) n += d->slice[run->train->cells[i]] == slice;
    ref->d = d;
    ref->ids = ast_xmalloc((size_t)(n ? n : 1) * sizeof *ref->ids);
    ref->pos = ast_xmalloc((size_t)(n ? n : 1) * 3 * sizeof(float));
    int64_t m = 0;
    for (int64_t i = 0; i < run->train->n; i++) {
        int64_t c = run->train->cells[i];
        if (d->slice[c] != slice) continue;
        ref->ids[m] = c;
        for (int k = 0; k < 3; k++) ref->pos[m * 3 + k] = d->pos[c * 3 + k] / run->sets->pos_scale;
        m++;
    }
    ref->cells = (ast_reference_cells){n, d->n_genes, ref->pos, reference_row, ref};
}

/* refs [n_slices]: built for the slices of the sets, once per task rather
 * than per set and baseline. */
static reference *references(const eval_run *run)
{
    const ast_dataset *d = run->sets->d;
    reference *refs = ast_xcalloc((size_t)d->n_slices, sizeof *refs);
    for (int b = 0; b < run->truth->B; b++) {
        int v = run->truth->slice[b];
        if (!refs[v].ids) reference_of_slice(run, v, &refs[v]);
    }
    return refs;
}

static void references_free(const eval_run *run, reference *refs)
{
    for (int v = 0; v < run->sets->d->n_slices; v++) free(refs[v].ids), free(refs[v].pos), free(refs[v].profile);
    free(refs);
}

static const float *mean_profile(reference *ref)
{
    if (!ref->profile) {
        ref->profile = ast_xmalloc((size_t)ref->cells.G * sizeof *ref->profile);
        ast_baseline_mean_profile(&ref->cells, 1, ref->profile);
    }
    return ref->profile;
}

/* Held-out and training cells share a frame when every set's slice has
 * more than k training cells (slabs of one slice; not whole held-out slices). */
static int shared_frame(const eval_run *run)
{
    const ast_dataset *d = run->sets->d;
    int64_t *count = ast_xcalloc((size_t)d->n_slices, sizeof *count);
    for (int64_t i = 0; i < run->train->n; i++) count[d->slice[run->train->cells[i]]]++;
    int ok = 1;
    for (int b = 0; b < run->truth->B; b++) ok &= count[run->truth->slice[b]] > run->ec->k;
    free(count);
    return ok;
}

/* The training cells' mean nearest-neighbour distance, measured within
 * neighbourhood sets so that it reflects their density. */
static double training_spacing(const eval_run *run)
{
    ast_set_sampler probe = *run->sets;
    probe.split = run->train;
    probe.set_size = 256;
    ast_eval_sets sets;
    ast_eval_sets_oracle(&probe, 8, SPACING_SEED, &sets);
    double sum = 0.0;
    for (int b = 0; b < sets.B; b++) sum += ast_mean_nn_distance(sets.pos + (int64_t)b * sets.N * 3, eval_set_cells(&sets, b));
    ast_eval_sets_free(&sets);
    return sum / 8.0;
}

typedef enum kind { RANDOM, MDS, ISOMAP, KNN_REGRESSION, MEAN_PROFILE, SPATIAL_KNN } kind;

static const char *kind_names[] = {"random", "expression_mds", "expression_isomap", "knn_regression", "mean_profile",
                                   "spatial_knn"};

/* One baseline's placement of set b's n cells: pos rows of 3 or expr rows
 * of G (expr NULL where the task generates no expression). */
static void place_set(const eval_run *run, kind k, int b, int n, double spacing, reference *refs, ast_rng *rng,
                      float *pos, float *expr)
{
    const ast_eval_sets *t = run->truth;
    const float *x = t->expr + (int64_t)b * t->N * t->G;
    int dims = run->sets->d->coord_dims;
    reference *ref = &refs[t->slice[b]];
    switch (k) {
    case RANDOM:
        for (int i = 0; i < n; i++) {
            for (int c = 0; c < 3; c++) pos[i * 3 + c] = c < dims ? ast_rng_gauss(rng) : 0.0f;
            for (int g = 0; g < t->G; g++) { /* drawn unscored too: the positions' stream is every task's */
                float v = ast_rng_gauss(rng);
                if (expr) expr[(int64_t)i * t->G + g] = v;
            }
        }
        break;
    case MDS: ast_baseline_mds(x, n, t->G, dims, pos), ast_rescale_to_spacing(pos, n, spacing); break;
    case ISOMAP: ast_baseline_isomap(x, n, t->G, dims, run->ec->k, pos), ast_rescale_to_spacing(pos, n, spacing); break;
    case KNN_REGRESSION: ast_baseline_knn_positions(&ref->cells, x, n, run->ec->k, pos); break;
    case MEAN_PROFILE: /* the same row for every cell */
        for (int i = 0; i < n; i++) memcpy(expr + (int64_t)i * t->G, mean_profile(ref), (size_t)t->G * sizeof *expr);
        break;
    case SPATIAL_KNN: { /* the query positions in the training cells' frame */
        float *abs_pos = ast_xmalloc((size_t)n * 3 * sizeof *abs_pos);
        for (int i = 0; i < n; i++)
            for (int c = 0; c < 3; c++)
                abs_pos[i * 3 + c] = run->sets->d->pos[t->cells[(int64_t)b * t->N + i] * 3 + c] / run->sets->pos_scale;
        ast_baseline_spatial_knn_expr(&ref->cells, abs_pos, n, run->ec->k, expr);
        free(abs_pos);
        break;
    }
    }
}

static void run_baseline(const eval_run *run, ast_train_mode mode, kind k, double spacing, reference *refs,
                         ast_eval_baseline *out)
{
    const ast_eval_sets *t = run->truth;
    float *pos = ast_xcalloc((size_t)t->B * t->N * 3, sizeof *pos);
    /* Expression is scored only where the task generates it. */
    float *expr = ast_mode_noises(mode, AST_MOD_EXPR) ? ast_xcalloc((size_t)t->B * t->N * t->G, sizeof *expr) : NULL;
    ast_rng rng;
    ast_rng_seed(&rng, run->ec->seed ^ RANDOM_SEED);
    for (int b = 0; b < t->B; b++)
        place_set(run, k, b, eval_set_cells(t, b), spacing, refs, &rng, pos + (int64_t)b * t->N * 3,
                  expr ? expr + (int64_t)b * t->N * t->G : NULL);
    ast_center_sets(pos, t->mask, t->B, t->N, 3);
    out->name = kind_names[k];
    eval_score(run, mode, pos, expr, &out->scores);
    free(pos), free(expr);
}

void eval_baselines(const eval_run *run, ast_eval_task *task)
{
    kind list[AST_EVAL_MAX_BASELINES];
    int n = 0, frame = shared_frame(run);
    list[n++] = RANDOM;
    if (task->mode == AST_MODE_EXPR_TO_POS) {
        list[n++] = MDS, list[n++] = ISOMAP;
        if (frame) list[n++] = KNN_REGRESSION;
    } else if (ast_mode_noises(task->mode, AST_MOD_EXPR)) {
        list[n++] = MEAN_PROFILE;
        if (task->mode == AST_MODE_POS_TO_EXPR && frame) list[n++] = SPATIAL_KNN;
    }
    double spacing = task->mode == AST_MODE_EXPR_TO_POS ? training_spacing(run) : 0.0;
    reference *refs = references(run);
    task->n_baselines = n;
    task->best = 0;
    for (int i = 0; i < n; i++) {
        run_baseline(run, task->mode, list[i], spacing, refs, &task->baselines[i]);
        if (ast_eval_primary(task->mode, &task->baselines[i].scores) >
            ast_eval_primary(task->mode, &task->baselines[task->best].scores))
            task->best = i;
    }
    references_free(run, refs);
}
