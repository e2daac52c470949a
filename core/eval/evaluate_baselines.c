/* The baselines of a held-out evaluation, run per set on the same cells as
 * the model and scored by the same code (eval_score):
 * - positions: random N(0, 1) coordinates; classical MDS and Isomap of the
 *   set's expression (training-free, in the data's dimension, given the
 *   training cells' nearest-neighbour spacing as length unit); and, where
 *   held-out and training cells share a coordinate frame (the held-out
 *   cells' slice has training cells: slabs, blocks, random cells, z-sections
 *   of one 3-D slice, a key that mixes them; not whole held-out slices),
 *   kNN regression from the training cells' positions and an MLP regressor
 *   fitted on them;
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
    ast_mlp_regressor *mlp; /* fitted when first asked for */
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
    for (int v = 0; v < run->sets->d->n_slices; v++) {
        free(refs[v].ids), free(refs[v].pos), free(refs[v].profile);
        ast_mlp_regressor_free(refs[v].mlp);
    }
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

/* The slice's MLP regressor, fitted on its training cells once, seeded by
 * evaluation.seed so every run of an evaluation draws the same one. */
static ast_mlp_regressor *mlp_of(const eval_run *run, reference *ref)
{
    if (!ref->mlp) {
        ast_mlp_regressor_config cfg = ast_mlp_regressor_defaults(run->ec->mlp_epochs, run->ec->seed);
        ref->mlp = ast_mlp_regressor_fit(&ref->cells, run->sets->d->coord_dims, &cfg);
    }
    return ref->mlp;
}

/* Held-out and training cells share a frame when every set's slice has
 * more than k training cells: any protocol but whole held-out slices. */
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

/* Where one baseline places set b's n cells: pos rows of 3, or expr rows
 * of G (expr NULL where the task generates no expression). */
typedef struct place_ctx {
    const eval_run *run;
    double spacing;  /* the training cells' nearest-neighbour spacing (expr_to_pos) */
    reference *refs; /* per slice */
    ast_rng *rng;
} place_ctx;

typedef void (*place_fn)(const place_ctx *c, int b, int n, float *pos, float *expr);

static const float *set_expr(const place_ctx *c, int b) { return c->run->truth->expr + (int64_t)b * c->run->truth->N * c->run->truth->G; }
static int set_dims(const place_ctx *c) { return c->run->sets->d->coord_dims; }
static reference *set_ref(const place_ctx *c, int b) { return &c->refs[c->run->truth->slice[b]]; }

static void place_random(const place_ctx *c, int b, int n, float *pos, float *expr)
{
    int G = c->run->truth->G, dims = set_dims(c);
    (void)b;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++) pos[i * 3 + k] = k < dims ? ast_rng_gauss(c->rng) : 0.0f;
        for (int g = 0; g < G; g++) { /* drawn unscored too: the positions' stream is every task's */
            float v = ast_rng_gauss(c->rng);
            if (expr) expr[(int64_t)i * G + g] = v;
        }
    }
}

static void place_mds(const place_ctx *c, int b, int n, float *pos, float *expr)
{
    (void)expr;
    ast_baseline_mds(set_expr(c, b), n, c->run->truth->G, set_dims(c), pos);
    ast_rescale_to_spacing(pos, n, c->spacing);
}

static void place_isomap(const place_ctx *c, int b, int n, float *pos, float *expr)
{
    (void)expr;
    ast_baseline_isomap(set_expr(c, b), n, c->run->truth->G, set_dims(c), c->run->ec->k, pos);
    ast_rescale_to_spacing(pos, n, c->spacing);
}

static void place_knn_regression(const place_ctx *c, int b, int n, float *pos, float *expr)
{
    (void)expr;
    ast_baseline_knn_positions(&set_ref(c, b)->cells, set_expr(c, b), n, c->run->ec->k, pos);
}

static void place_mlp_regression(const place_ctx *c, int b, int n, float *pos, float *expr)
{
    (void)expr;
    ast_mlp_regressor_predict(mlp_of(c->run, set_ref(c, b)), set_expr(c, b), n, pos);
}

static int mlp_wanted(const eval_run *run) { return run->ec->mlp_epochs > 0; }

static void place_mean_profile(const place_ctx *c, int b, int n, float *pos, float *expr)
{
    int G = c->run->truth->G;
    (void)pos;
    for (int i = 0; i < n; i++) /* the same row for every cell */
        memcpy(expr + (int64_t)i * G, mean_profile(set_ref(c, b)), (size_t)G * sizeof *expr);
}

static void place_spatial_knn(const place_ctx *c, int b, int n, float *pos, float *expr)
{
    const ast_eval_sets *t = c->run->truth;
    float *abs_pos = ast_xmalloc((size_t)n * 3 * sizeof *abs_pos); /* the query positions in the training cells' frame */
    (void)pos;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            abs_pos[i * 3 + k] = c->run->sets->d->pos[t->cells[(int64_t)b * t->N + i] * 3 + k] / c->run->sets->pos_scale;
    ast_baseline_spatial_knn_expr(&set_ref(c, b)->cells, abs_pos, n, c->run->ec->k, expr);
    free(abs_pos);
}

/* The tasks a baseline is scored on (bits of ast_train_mode). */
#define FOR(mode) (1u << (mode))

/* Every baseline, in the order eval.json and the table list them. To add
 * one: its place_* function above and a row here (the modes it answers;
 * shared_frame when it looks up training cells by position, which needs
 * held-out and training cells in one frame; wanted, when a key can turn it
 * off, else NULL). */
static const struct baseline_def {
    const char *name, *short_name; /* eval.json's key; the printed table's column head (9 characters) */
    unsigned tasks;
    int shared_frame;
    place_fn place;
    int (*wanted)(const eval_run *run);
} baseline_defs[] = {
    {"random", "random", FOR(AST_MODE_EXPR_TO_POS) | FOR(AST_MODE_POS_TO_EXPR) | FOR(AST_MODE_JOINT), 0, place_random, NULL},
    {"expression_mds", "expr_mds", FOR(AST_MODE_EXPR_TO_POS), 0, place_mds, NULL},
    {"expression_isomap", "isomap", FOR(AST_MODE_EXPR_TO_POS), 0, place_isomap, NULL},
    {"knn_regression", "knn_reg", FOR(AST_MODE_EXPR_TO_POS), 1, place_knn_regression, NULL},
    {"mlp_regression", "mlp_reg", FOR(AST_MODE_EXPR_TO_POS), 1, place_mlp_regression, mlp_wanted},
    {"mean_profile", "mean_prof", FOR(AST_MODE_POS_TO_EXPR) | FOR(AST_MODE_JOINT), 0, place_mean_profile, NULL},
    {"spatial_knn", "spat_knn", FOR(AST_MODE_POS_TO_EXPR), 1, place_spatial_knn, NULL},
};

#define N_BASELINES ((int)(sizeof baseline_defs / sizeof baseline_defs[0]))
_Static_assert(N_BASELINES <= (int)AST_EVAL_MAX_BASELINES, "ast_eval_task holds every baseline: raise AST_EVAL_MAX_BASELINES");

static void run_baseline(const eval_run *run, ast_train_mode mode, const struct baseline_def *def, double spacing,
                         reference *refs, ast_eval_baseline *out)
{
    const ast_eval_sets *t = run->truth;
    float *pos = ast_xcalloc((size_t)t->B * t->N * 3, sizeof *pos);
    /* Expression is scored only where the task generates it. */
    float *expr = ast_mode_noises(mode, AST_MOD_EXPR) ? ast_xcalloc((size_t)t->B * t->N * t->G, sizeof *expr) : NULL;
    ast_rng rng;
    ast_rng_seed(&rng, run->ec->seed ^ RANDOM_SEED);
    place_ctx c = {run, spacing, refs, &rng};
    for (int b = 0; b < t->B; b++)
        def->place(&c, b, eval_set_cells(t, b), pos + (int64_t)b * t->N * 3, expr ? expr + (int64_t)b * t->N * t->G : NULL);
    ast_center_sets(pos, t->mask, t->B, t->N, 3);
    out->name = def->name;
    out->short_name = def->short_name;
    eval_score(run, mode, pos, expr, &out->scores);
    free(pos), free(expr);
}

void eval_baselines(const eval_run *run, ast_eval_task *task)
{
    const struct baseline_def *list[N_BASELINES];
    int n = 0, frame = shared_frame(run);
    for (int i = 0; i < N_BASELINES; i++)
        if ((baseline_defs[i].tasks & FOR(task->mode)) && (frame || !baseline_defs[i].shared_frame) &&
            (!baseline_defs[i].wanted || baseline_defs[i].wanted(run)))
            list[n++] = &baseline_defs[i];
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
