/* Held-out evaluation end to end: the library on the bundled data (with
 * the chance level of k-NN preservation checked against theory), config
 * errors, the .h5ad writer against our reader, and alphast-run train /
 * eval / sample on a tiny model trained for a few seconds. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/csv.h"
#include "eval/evaluate.h"
#include "io/h5ad_write.h"
#include "train/train.h"
#include "train_fixture.h"

#define STARMAP ALPHAST_SOURCE_DIR "/data/starmap3d/starmap3d.h5ad"

static const char *tiny_yaml =
    "training_mode: expr_to_pos\n"
    "data: {path: " STARMAP ", set_size: 24, preprocessing: {position_key: spatial, cell_type_key: null},\n"
    "       loading: {rotation: true, expression_dropout: 0.0}}\n"
    "diffusion: {diffusion_steps: 50}\n"
    "training: {learning_rate: 1e-3, batch_size: 2, epochs: 2, steps_per_epoch: 3, val_sets: 2, val_t_points: 1,\n"
    "           early_stopping: false}\n"
    "sampling: {num_steps: 3}\n"
    "evaluation: {k_neighbors: 5, sets: 64, morans_genes: [Gja1, Vip]}\n"
    TINY_MODEL_YAML;

typedef struct fixture {
    ast_cfg *cfg;
    ast_dataset d;
    ast_split sp[3];
    ast_model *m;
    ast_schedule s;
    ast_set_sampler sets;
} fixture;

/* Cuts the data read into `slices` slices by z (before preprocessing:
 * each then has a frame of its own), as sections of separate frames are. */
static void slice_by_z(ast_dataset *d, int slices)
{
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t c = 0; c < d->n_cells; c++) lo = fminf(lo, d->pos[c * 3 + 2]), hi = fmaxf(hi, d->pos[c * 3 + 2]);
    for (int64_t c = 0; c < d->n_cells; c++)
        d->slice[c] = (int)fminf((float)(slices - 1), (d->pos[c * 3 + 2] - lo) / (hi - lo) * (float)slices);
    d->n_slices = slices;
}

/* The tiny model on STARmap, split as the config (with override) says;
 * slices > 0: cut into that many slices of their own first. */
static void fixture_open_sliced(fixture *f, const char *override, int slices)
{
    ast_error e = {""};
    memset(f, 0, sizeof *f);
    f->cfg = ast_cfg_load_string(tiny_yaml, "tiny.yaml", &e);
    cr_assert(f->cfg, "%s", e.msg);
    if (override) cr_assert(ast_cfg_override(f->cfg, override, &e) == 0, "%s", e.msg);
    ast_data_opts o;
    ast_data_opts_from_cfg(f->cfg, &o);
    cr_assert(ast_data_read(STARMAP, &o, &f->d, &e) == 0, "%s", e.msg);
    if (slices) slice_by_z(&f->d, slices);
    cr_assert(ast_data_preprocess(&f->d, &o, &e) == 0, "%s", e.msg);
    ast_split_opts so;
    cr_assert(ast_split_opts_from_cfg(f->cfg, &so, &e) == 0 && ast_data_split_by(&f->d, &so, f->sp, &e) == 0, "%s", e.msg);
    ast_model_config mc;
    cr_assert(ast_cfg_model(f->cfg, f->d.n_genes, &mc, &e) == 0, "%s", e.msg);
    f->m = ast_model_new(&mc, 1, &e);
    cr_assert(f->m, "%s", e.msg);
    cr_assert(ast_schedule_init(&f->s, 50, 1.0, 1.0, &e) == 0, "%s", e.msg);
    f->sets = (ast_set_sampler){&f->d, &f->sp[AST_SPLIT_TEST], 24, 1.0f, 0, 0.0f};
}

static void fixture_open(fixture *f, const char *override) { fixture_open_sliced(f, override, 0); }

static void fixture_close(fixture *f)
{
    ast_schedule_free(&f->s);
    ast_model_free(f->m);
    ast_split_free(f->sp);
    ast_dataset_free(&f->d);
    ast_cfg_free(f->cfg);
}

static void assert_pos_in_range(const ast_pos_metrics *p)
{
    cr_assert(p->knn[0] >= 0 && p->knn[0] <= 1, "knn %g", p->knn[0]);
    cr_assert(p->procrustes >= 0 && p->procrustes <= 1 + 1e-9, "procrustes %g", p->procrustes);
    cr_assert(fabs(p->dist_pearson) <= 1 && fabs(p->dist_spearman) <= 1, "correlations");
    cr_assert(p->dist_mse >= 0 && isfinite(p->dist_mse), "dist_mse %g", p->dist_mse);
}

Test(evaluate, scores_model_and_chance_on_held_out_sets, .timeout = 60)
{
    fixture f;
    fixture_open(&f, "evaluation.protocol=oracle_neighbourhoods");
    ast_error e = {""};
    ast_eval_config ec;
    cr_assert(ast_eval_config_from_cfg(f.cfg, &f.d, &ec, &e) == 0, "%s", e.msg);
    cr_assert_eq(ec.n_genes, 2);
    cr_assert_str_eq(f.d.genes[ec.genes[1]], "Vip");
    ast_eval_report r;
    cr_assert(ast_evaluate(f.m, &f.s, &f.sets, &f.sp[AST_SPLIT_TRAIN], &ec, "test", &r, &e) == 0, "%s", e.msg);
    cr_assert_eq(r.n_tasks, 1);
    cr_assert_eq(r.tasks[0].mode, AST_MODE_EXPR_TO_POS);
    cr_assert_eq(r.cells, 64 * 24);
    cr_assert_eq(r.evaluations, 4); /* 3 steps of T = 50: delta 16, s = 48 32 16 0 */
    assert_pos_in_range(&r.tasks[0].model.pos);
    const ast_eval_scores *chance = &r.tasks[0].baselines[0].scores;
    cr_assert_str_eq(r.tasks[0].baselines[0].name, "random");
    assert_pos_in_range(&chance->pos);
    /* Random positions are independent of the truth, so each cell's
     * predicted 5-NN are 5 of its 23 others uniformly: mean 5/23. The
     * per-cell variance of the overlap fraction, 5(5/23)(18/23)(18/22)/25
     * = 0.0278, bounds that of a set's mean; over 64 independent draws the
     * std is at most 0.021, and 4 std = 0.083. */
    cr_assert_float_eq(chance->pos.knn[0], 5.0 / 23.0, 0.083, "random knn %g", chance->pos.knn[0]);
    for (int j = 0; j < 2; j++) {
        cr_assert(isfinite(r.tasks[0].model.morans[j]) && fabs(r.tasks[0].model.morans[j]) < 10, "Moran's I");
        cr_assert(isfinite(r.morans_true[j]), "Moran's I on the truth");
    }
    char path[] = "/tmp/alphast-eval-XXXXXX";
    close(mkstemp(path));
    cr_assert(ast_eval_report_write_json(&r, path, &e) == 0, "%s", e.msg);
    FILE *fp = fopen(path, "r");
    static char text[65536];
    text[fread(text, 1, sizeof text - 1, fp)] = 0;
    fclose(fp);
    remove(path);
    cJSON *j = cJSON_Parse(text);
    cr_assert(j, "eval.json is JSON");
    cJSON *knn = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j,
                 "tasks"), "expr_to_pos"), "baselines"), "random"), "knn_k5");
    cr_assert(knn == NULL, "baselines nest their metrics under positions");
    knn = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(
          cJSON_GetObjectItem(j, "tasks"), "expr_to_pos"), "baselines"), "random"), "positions"), "knn_k5");
    cr_assert(cJSON_IsNumber(knn) && knn->valuedouble == chance->pos.knn[0], "the report's numbers");
    cJSON *protocol = cJSON_GetObjectItem(j, "protocol");
    cr_assert_str_eq(cJSON_GetObjectItem(protocol, "sets")->valuestring, "oracle_neighbourhoods");
    cr_assert_str_eq(cJSON_GetObjectItem(protocol, "split")->valuestring, "slab", "one slice: auto holds out slabs");
    cr_assert_str_eq(cJSON_GetObjectItem(protocol, "chosen_by")->valuestring, "auto");
    cr_assert(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "morans_i_true"), "Gja1"), "Moran's I per gene name");
    cJSON_Delete(j);
    ast_eval_report_free(&r);
    ast_eval_config_free(&ec);
    fixture_close(&f);
}

Test(evaluate, joint_models_are_also_asked_to_place_cells, .timeout = 60)
{
    fixture f;
    fixture_open(&f, "training_mode=joint");
    cr_assert(ast_cfg_override(f.cfg, "evaluation.protocol=oracle_neighbourhoods", &(ast_error){""}) == 0);
    ast_error e = {""};
    ast_eval_config ec;
    cr_assert(ast_eval_config_from_cfg(f.cfg, &f.d, &ec, &e) == 0, "%s", e.msg);
    ec.sets = 4;
    ast_eval_report r;
    cr_assert(ast_evaluate(f.m, &f.s, &f.sets, &f.sp[AST_SPLIT_TRAIN], &ec, "test", &r, &e) == 0, "%s", e.msg);
    cr_assert_eq(r.n_tasks, 2);
    cr_assert_eq(r.tasks[0].mode, AST_MODE_JOINT);
    cr_assert_eq(r.tasks[1].mode, AST_MODE_EXPR_TO_POS);
    const ast_expr_metrics *x = &r.tasks[0].model.expr;
    cr_assert(x->mse > 0 && x->mae > 0 && fabs(x->pcc_gene) <= 1 && fabs(x->cosine) <= 1, "expression metrics");
    assert_pos_in_range(&r.tasks[0].model.pos);
    ast_eval_report_free(&r);
    ast_eval_config_free(&ec);
    fixture_close(&f);
}

/* placement.csv: a row per placed cell, named as in the data (a name with
 * a comma and a quote survives), the placed cells aligned onto the true
 * ones as the RMSD metric aligns them, so the file's RMSD is the metric's. */
static void check_placement_csv(const ast_eval_report *r, ast_dataset *d)
{
    ast_error e = {""};
    char path[] = "/tmp/alphast-placement-XXXXXX", line[1024], *field[10];
    close(mkstemp(path));
    int64_t first = r->placement.cells[0];
    cr_assert(d->cell_names, "the bundled data has obs_names");
    free(d->cell_names[first]);
    d->cell_names[first] = ast_xstrdup("odd, \"name\"");
    cr_assert(ast_eval_placement_write_csv(r, d, path, &e) == 0, "%s", e.msg);
    FILE *fp = fopen(path, "r");
    cr_assert(fgets(line, sizeof line, fp));
    cr_assert_str_eq(line, "set,cell,label,true_x,true_y,true_z,placed_x,placed_y,placed_z\n");
    double se[64] = {0}, rmsd = 0.0;
    int rows = 0, cells[64] = {0};
    while (fgets(line, sizeof line, fp)) {
        cr_assert_eq(ast_csv_split(line, field, 10), 9, "9 fields in %s", line);
        if (!rows++) cr_assert_str_eq(field[1], "odd, \"name\"");
        int b = atoi(field[0]);
        cr_assert(b >= 0 && b < r->sets && b < 64);
        for (int k = 0; k < 3; k++) se[b] += pow(atof(field[6 + k]) - atof(field[3 + k]), 2);
        cells[b]++;
    }
    fclose(fp);
    remove(path);
    cr_assert_eq(rows, r->cells, "every placed cell once");
    for (int b = 0; b < r->sets; b++) rmsd += sqrt(se[b] / cells[b]) / r->sets;
    cr_assert_float_eq(rmsd, r->tasks[0].model.pos.rmsd, 1e-3 * (1 + rmsd), "rmsd %g vs %g", rmsd,
                       r->tasks[0].model.pos.rmsd);
}

/* The default protocol places every held-out cell once, in sets that
 * depend on expression alone, and scores the baselines on the same cells. */
Test(evaluate, region_protocol_places_every_held_out_cell_with_baselines, .timeout = 120)
{
    fixture f;
    fixture_open(&f, "evaluation.max_set_size=150");
    ast_error e = {""};
    ast_eval_config ec;
    cr_assert(ast_eval_config_from_cfg(f.cfg, &f.d, &ec, &e) == 0, "%s", e.msg);
    cr_assert_eq(ec.protocol, AST_EVAL_REGION);
    ast_eval_report r;
    cr_assert(ast_evaluate(f.m, &f.s, &f.sets, &f.sp[AST_SPLIT_TRAIN], &ec, "test", &r, &e) == 0, "%s", e.msg);
    cr_assert_eq(r.cells, f.sp[AST_SPLIT_TEST].n, "every held-out cell is placed");
    cr_assert_eq(r.sets, 3, "400 cells in sets of at most 150");
    cr_assert_eq(r.set_size, 134, "balanced: ceil(400 / 3)");
    const ast_eval_task *t = &r.tasks[0];
    const char *names[] = {"random", "expression_mds", "expression_isomap", "knn_regression", "mlp_regression"};
    cr_assert_eq(t->n_baselines, 5, "the test slab shares the training cells' frame");
    for (int b = 0; b < 5; b++) {
        cr_assert_str_eq(t->baselines[b].name, names[b]);
        assert_pos_in_range(&t->baselines[b].scores.pos);
        cr_assert(ast_eval_primary(t->mode, &t->baselines[b].scores) <= ast_eval_primary(t->mode, &t->baselines[t->best].scores),
                  "best is the highest knn_k10");
    }
    const ast_uncertainty *u = &t->uncertainty;
    cr_assert_eq(u->samples, ec.noise_seeds);
    cr_assert(u->spread >= 0 && u->skill > 0 && u->spread_skill >= 0 && isfinite(u->energy), "spread %g skill %g energy %g",
              u->spread, u->skill, u->energy);
    cr_assert(u->coverage >= 0 && u->coverage <= 1, "coverage %g", u->coverage);
    cr_assert_eq(t->n_step_counts, 3);
    int counts[] = {1, 3, 10}; /* {1, 10, sampling.num_steps = 3}, ascending */
    for (int i = 0; i < 3; i++) cr_assert_eq(t->step_counts[i], counts[i]);
    cr_assert_eq(t->by_steps[1].knn[1], t->model.pos.knn[1], "the configured count is the model's score");
    check_placement_csv(&r, &f.d);
    ast_eval_report_free(&r);
    ast_eval_config_free(&ec);
    fixture_close(&f);
}

/* Whether the expr_to_pos baselines of the fixture's test split, split as
 * `override` says, include kNN regression. */
static int has_knn_regression(const char *override, int slices)
{
    fixture f;
    fixture_open_sliced(&f, override, slices);
    ast_error e = {""};
    ast_eval_config ec;
    cr_assert(ast_eval_config_from_cfg(f.cfg, &f.d, &ec, &e) == 0, "%s", e.msg);
    ec.noise_seeds = 1; /* the baselines are the subject */
    ast_eval_report r;
    cr_assert(ast_evaluate(f.m, &f.s, &f.sets, &f.sp[AST_SPLIT_TRAIN], &ec, "test", &r, &e) == 0, "%s", e.msg);
    int found = 0;
    for (int b = 0; b < r.tasks[0].n_baselines; b++) found |= !strcmp(r.tasks[0].baselines[b].name, "knn_regression");
    ast_eval_report_free(&r);
    ast_eval_config_free(&ec);
    fixture_close(&f);
    return found;
}

/* kNN regression looks the held-out cells up among training cells of
 * their frame: there are such with random cells, blocks and z-sections of
 * the one 3-D tissue, none when whole slices of their own are held out. */
Test(evaluate, knn_regression_runs_where_held_out_cells_share_the_training_frame, .timeout = 120)
{
    cr_assert(has_knn_regression("data.split=random", 0));
    cr_assert(has_knn_regression("data.split=blocks", 0));
    cr_assert(has_knn_regression("data.sections_from_z=5", 0), "z-sections of one tissue share its frame");
    cr_assert(!has_knn_regression("data.split=sections", 5), "separate slices: no frame in common");
}

/* The baselines that look up training cells need them in the held-out
 * cells' frame: with only k training cells in the slice (as for a whole
 * held-out slice) neither kNN nor the MLP regressor runs, and
 * evaluation.mlp_regression=false leaves the MLP out where it would. */
static int baselines_of(const char *override, int64_t n_train)
{
    fixture f;
    fixture_open(&f, override);
    ast_error e = {""};
    ast_eval_config ec;
    cr_assert(ast_eval_config_from_cfg(f.cfg, &f.d, &ec, &e) == 0, "%s", e.msg);
    ast_split train = {f.sp[AST_SPLIT_TRAIN].cells, n_train < f.sp[AST_SPLIT_TRAIN].n ? n_train : f.sp[AST_SPLIT_TRAIN].n};
    ast_eval_report r;
    cr_assert(ast_evaluate(f.m, &f.s, &f.sets, &train, &ec, "test", &r, &e) == 0, "%s", e.msg);
    int n = r.tasks[0].n_baselines;
    cr_assert_str_eq(r.tasks[0].baselines[2].name, "expression_isomap");
    ast_eval_report_free(&r);
    ast_eval_config_free(&ec);
    fixture_close(&f);
    return n;
}

Test(evaluate, regression_baselines_only_in_a_shared_frame, .timeout = 120)
{
    cr_assert_eq(baselines_of("sampling.num_steps=1", 5), 3, "k = 5 training cells: no shared frame");
    cr_assert_eq(baselines_of("evaluation.mlp_regression=false", INT64_MAX), 4, "knn_regression alone");
}

/* Which cells share a set never depends on their true coordinates:
 * scrambling every position leaves the sets as they were. */
Test(evaluate, region_sets_ignore_true_positions, .timeout = 60)
{
    fixture f;
    fixture_open(&f, NULL);
    ast_eval_sets a, b;
    ast_eval_sets_region(&f.sets, 150, 7, &a);
    ast_rng rng;
    ast_rng_seed(&rng, 3);
    for (int64_t i = 0; i < f.d.n_cells * 3; i++) f.d.pos[i] = ast_rng_gauss(&rng) * 100.0f;
    ast_eval_sets_region(&f.sets, 150, 7, &b);
    cr_assert_eq(a.B, b.B);
    cr_assert_eq(a.N, b.N);
    cr_assert(!memcmp(a.cells, b.cells, (size_t)a.B * a.N * sizeof *a.cells), "the same cells in the same sets");
    ast_eval_sets_free(&a), ast_eval_sets_free(&b);
    fixture_close(&f);
}

/* pos_to_expr's sets (predict --task pos_to_expr) are patches: the test
 * cells put in two far-apart groups, split into two sets, give one set
 * per group. */
Test(evaluate, position_sets_are_patches, .timeout = 60)
{
    fixture f;
    fixture_open(&f, NULL);
    const ast_split *test = &f.sp[AST_SPLIT_TEST];
    int64_t n = test->n, half = n / 2;
    ast_rng rng;
    ast_rng_seed(&rng, 3);
    char *group = ast_xcalloc((size_t)f.d.n_cells, 1);
    for (int64_t i = 0; i < n; i++) {
        int64_t c = test->cells[i];
        group[c] = i >= half;
        for (int k = 0; k < 3; k++) f.d.pos[c * 3 + k] = ast_rng_gauss(&rng) + (k == 0 && group[c] ? 1000.0f : 0.0f);
    }
    ast_eval_sets e;
    ast_eval_sets_by_position(&f.sets, (int)(n - half), 7, &e);
    cr_assert_eq(e.B, 2, "%d sets", e.B);
    for (int b = 0; b < e.B; b++)
        for (int i = 1; i < e.N; i++) {
            int64_t c = e.cells[(int64_t)b * e.N + i];
            cr_assert(c < 0 || group[c] == group[e.cells[(int64_t)b * e.N]], "set %d mixes the groups", b);
        }
    free(group);
    ast_eval_sets_free(&e);
    fixture_close(&f);
}

/* Two tight expression groups of 6 rows (x = 0 .. 0.5) and 4 rows (x =
 * 10.6 .. 10.9), k = 2, cap ceil(10 / 2) = 5: the second group stays
 * whole and takes exactly one row of the first, one of its two ends (the
 * row farthest from the first group's centroid; which end depends on the
 * k-means++ start, as greedy balanced assignment is a local optimum). */
Test(evaluate, balanced_kmeans_groups_by_expression_within_the_cap)
{
    float x[10 * 2];
    for (int i = 0; i < 10; i++) x[i * 2] = i < 6 ? 0.1f * i : 10.0f + 0.1f * i, x[i * 2 + 1] = 0.0f;
    int label[10], size[2] = {0, 0}, moved = -1;
    ast_balanced_kmeans(x, 10, 2, 2, 1, label);
    for (int i = 0; i < 10; i++) size[label[i]]++;
    cr_assert(size[0] == 5 && size[1] == 5, "sizes %d %d", size[0], size[1]);
    for (int i = 6; i < 10; i++) cr_assert_eq(label[i], label[6], "the second group stays together");
    for (int i = 0; i < 6; i++)
        if (label[i] == label[6]) moved = i;
    cr_assert(moved == 0 || moved == 5, "an end row moves over (row %d did)", moved);
    int second[10];
    ast_balanced_kmeans(x, 10, 2, 2, 1, second);
    cr_assert(!memcmp(label, second, sizeof label), "deterministic for a seed");
}

Test(evaluate, config_errors_name_the_key)
{
    fixture f;
    fixture_open(&f, "evaluation.morans_genes=[Gja1, Vipp]");
    cr_assert(ast_cfg_override(f.cfg, "evaluation.protocol=oracle_neighbourhoods", &(ast_error){""}) == 0);
    ast_error e = {""};
    ast_eval_config ec;
    cr_assert_eq(ast_eval_config_from_cfg(f.cfg, &f.d, &ec, &e), -1);
    cr_assert(strstr(e.msg, "evaluation.morans_genes[1]") && strstr(e.msg, "did you mean 'Vip'"), "%s", e.msg);
    cr_assert(ast_cfg_override(f.cfg, "evaluation.morans_genes=null", &e) == 0, "%s", e.msg);
    cr_assert(ast_cfg_override(f.cfg, "evaluation.k_neighbors=24", &e) == 0, "%s", e.msg);
    cr_assert_eq(ast_eval_config_from_cfg(f.cfg, &f.d, &ec, &e), -1);
    cr_assert(strstr(e.msg, "evaluation.k_neighbors (24) must be below the evaluation's set size (24, data.set_size)"),
              "%s", e.msg);
    cr_assert(ast_cfg_override(f.cfg, "evaluation.protocol=region", &e) == 0, "%s", e.msg);
    cr_assert(ast_cfg_override(f.cfg, "evaluation.max_set_size=20", &e) == 0, "%s", e.msg);
    cr_assert_eq(ast_eval_config_from_cfg(f.cfg, &f.d, &ec, &e), -1);
    cr_assert(strstr(e.msg, "(20, evaluation.max_set_size)"), "%s", e.msg);
    cr_assert(ast_cfg_override(f.cfg, "sampling.return=z1", &e) == -1, "the schema knows sampling.return");
    fixture_close(&f);
}

/* A table as `sample` writes it: X, var, 2-D and 3-D obsm, a categorical
 * obs column with a missing value, numbers with a NaN, integers, and uns. */
static const float h5_X[3 * 2] = {1, 2, 3, 4, 5, 6}, h5_gen[6] = {0.5f, 1, 2, 3, 4, -5},
                   h5_true[9] = {9, 8, 7, 6, 5, 4, 3, 2, 1};

static int write_h5ad(const char *path, ast_error *e)
{
    static const int64_t set[3] = {0, 0, 1};
    static const double area[3] = {1.5, NAN, 3};
    static const int region[3] = {1, -1, 0};
    static const char *const genes[2] = {"Gja1", "Vip"}, *const cells[3] = {"a", "b", "c"},
                             *const regions[2] = {"cortex", "striatum"};
    const ast_h5ad_column obs[3] = {
        {"region", AST_H5AD_CATEGORY, .codes = region, .categories = regions, .n_categories = 2},
        {"area", AST_H5AD_NUMBER, .numbers = area},
        {"set", AST_H5AD_INT, .ints = set}};
    const char *uns[] = {"version", PACKAGE_VERSION, NULL};
    ast_h5ad_table t = {.n_cells = 3, .n_genes = 2, .X = h5_X, .genes = genes, .cells = cells, .n_obsm = 2,
                        .obsm = {{"spatial", h5_gen, 2}, {"spatial_true", h5_true, 3}}, .n_obs = 3, .obs = obs,
                        .uns_group = "alphast", .uns = uns};
    return ast_h5ad_write(path, &t, e);
}

static void write_table(char *path)
{
    close(mkstemp(path));
    ast_error e = {""};
    cr_assert(write_h5ad(path, &e) == 0, "%s", e.msg);
}

Test(evaluate, h5ad_written_reads_back)
{
    char path[] = "/tmp/alphast-h5ad-XXXXXX";
    write_table(path);
    ast_data_opts o;
    ast_data_opts_default(&o);
    o.cell_type_key = "region";
    for (int k = 0; k < 2; k++) {
        o.position_key = k ? "spatial_true" : "spatial";
        ast_dataset d;
        ast_error e = {""};
        cr_assert(ast_data_read_h5ad(path, &o, &d, &e) == 0, "%s", e.msg);
        cr_assert_eq(d.n_cells, 3);
        cr_assert_eq(d.n_genes, 2);
        cr_assert_eq(d.coord_dims, k ? 3 : 2);
        cr_assert_str_eq(d.genes[1], "Vip");
        float row[2];
        for (int i = 0; i < 3; i++) {
            ast_data_row(&d, i, row);
            cr_assert(row[0] == h5_X[i * 2] && row[1] == h5_X[i * 2 + 1], "X row %d", i);
        }
        for (int i = 0; i < 3; i++)
            for (int c = 0; c < d.coord_dims; c++)
                cr_assert_eq(d.pos[i * 3 + c], k ? h5_true[i * 3 + c] : h5_gen[i * 2 + c], "cell %d coordinate %d", i, c);
        cr_assert_str_eq(d.type_names[d.cell_type[0]], "striatum");
        cr_assert_eq(d.cell_type[1], -1, "a missing category stays missing");
        cr_assert_str_eq(d.type_names[d.cell_type[2]], "cortex");
        ast_dataset_free(&d);
    }
    remove(path);
}

/* The same file through the real anndata (Debian's python3-anndata for
 * /usr/bin/python3), whose reader is stricter than ours: the categorical's
 * `ordered` must be h5py's bool, uns strings scalar string datasets. */
Test(evaluate, h5ad_written_is_read_by_anndata)
{
    if (system("/usr/bin/python3 -c 'import anndata' >/dev/null 2>&1"))
        cr_skip_test("/usr/bin/python3 cannot import anndata (apt-get install python3-anndata)");
    char path[] = "/tmp/alphast-h5ad-XXXXXX", cmd[2048];
    write_table(path);
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c '\n"
             "import anndata, math, sys\n"
             "a = anndata.read_h5ad(sys.argv[1])\n"
             "assert list(a.obs_names) == [\"a\", \"b\", \"c\"] and list(a.var_names) == [\"Gja1\", \"Vip\"]\n"
             "assert list(a.obs.columns) == [\"region\", \"area\", \"set\"], list(a.obs.columns)\n"
             "r = a.obs[\"region\"]\n"
             "assert list(r.cat.categories) == [\"cortex\", \"striatum\"] and not r.cat.ordered\n"
             "assert r.isna().tolist() == [False, True, False] and r.iloc[0] == \"striatum\"\n"
             "assert a.obs[\"area\"].iloc[0] == 1.5 and math.isnan(a.obs[\"area\"].iloc[1])\n"
             "assert a.obs[\"set\"].tolist() == [0, 0, 1]\n"
             "assert a.obsm[\"spatial\"].shape == (3, 2) and a.obsm[\"spatial_true\"].shape == (3, 3)\n"
             "assert a.X[2, 1] == 6 and a.uns[\"alphast\"][\"version\"] == sys.argv[2]\n"
             "' %s %s 2>&1",
             path, PACKAGE_VERSION);
    int st = system(cmd);
    remove(path);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "anndata refused the file (see above)");
}

/* A full disk (here a file size limit, which fails the write as ENOSPC
 * does) is the system's reason, the file that was there is kept and no
 * temporary is left; and the process still exits normally: libhdf5's
 * exit handler crashed on the file its failed H5Fclose had left open. */
Test(evaluate, h5ad_write_on_a_full_disk_fails_cleanly)
{
    char dir[] = "/tmp/alphast-h5full-XXXXXX", path[64], cmd[128];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/x.h5ad", dir);
    FILE *f = fopen(path, "w");
    fputs("previous\n", f);
    fclose(f);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit small = {1024, 1024};
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &small);
        ast_error e = {""};
        int rc = write_h5ad(path, &e);
        fprintf(stderr, "%s\n", e.msg);
        exit(rc == -1 && strstr(e.msg, "x.h5ad: cannot write (File too large)") ? 0 : 3);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the writer %s %d",
              WIFEXITED(st) ? "exited with" : "died of signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    char kept[16] = "";
    f = fopen(path, "r");
    cr_assert(f && fgets(kept, sizeof kept, f), "%s is gone", path);
    fclose(f);
    cr_assert_str_eq(kept, "previous\n");
    snprintf(cmd, sizeof cmd, "test \"$(ls -A %s)\" = x.h5ad", dir);
    cr_assert_eq(system(cmd), 0, "a temporary file is left in %s", dir);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* A string that is not UTF-8 (a gene name here; any name, category or uns
 * string alike) is refused before anything is written: anndata, and the
 * reader, would fail on the whole file (the h5ad_write fuzz target found
 * the writer writing one). */
Test(evaluate, h5ad_write_refuses_a_string_that_is_not_utf8)
{
    char dir[] = "/tmp/alphast-h5utf-XXXXXX", path[64], cmd[128];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/x.h5ad", dir);
    static const char *const genes[2] = {"Gja1", "G\xfc"}, *const cells[1] = {"a"};
    static const float x[2] = {1, 2}, pos[2] = {0, 1};
    ast_h5ad_table t = {.n_cells = 1, .n_genes = 2, .X = x, .genes = genes, .cells = cells, .n_obsm = 1,
                        .obsm = {{"spatial", pos, 2}}};
    ast_error e = {""};
    cr_assert_eq(ast_h5ad_write(path, &t, &e), -1);
    cr_assert(strstr(e.msg, "x.h5ad: gene name 'G\\xfc' is not UTF-8 text, which anndata cannot read"), "%s", e.msg);
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s)\" && rm -r %s", dir, dir);
    cr_assert_eq(system(cmd), 0, "the refused write left a file in %s", dir);
}

/* Names HDF5 cannot hold as members of obs (or two columns of one name),
 * and categories that repeat, are refused before anything is written (the
 * h5ad_write fuzz target found them written; sample renames its obs
 * columns before they get here). */
Test(evaluate, h5ad_write_refuses_names_hdf5_cannot_hold_and_repeated_categories)
{
    char dir[] = "/tmp/alphast-h5names-XXXXXX", path[64], cmd[128];
    cr_assert(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/x.h5ad", dir);
    static const char *const genes[1] = {"Gja1"}, *const cells[1] = {"a"}, *const cats[2] = {"s0", "s0"};
    static const float x[1] = {1}, pos[2] = {0, 1};
    static const double v[1] = {1};
    static const int codes[1] = {0};
    const struct {
        ast_h5ad_column col[2];
        int n;
        const char *says;
    } cases[] = {
        {{{"a/b", AST_H5AD_NUMBER, .numbers = v}}, 1, "obs column 'a/b' cannot be an HDF5 member of obs"},
        {{{".", AST_H5AD_NUMBER, .numbers = v}}, 1, "obs column '.' cannot be"},
        {{{"", AST_H5AD_NUMBER, .numbers = v}}, 1, "obs column '' cannot be"},
        {{{"_index", AST_H5AD_NUMBER, .numbers = v}}, 1, "obs column '_index' cannot be"},
        {{{"n", AST_H5AD_NUMBER, .numbers = v}, {"n", AST_H5AD_NUMBER, .numbers = v}}, 2, "two obs columns are named 'n'"},
        {{{"slice", AST_H5AD_CATEGORY, .codes = codes, .categories = cats, .n_categories = 2}},
         1,
         "obs column 'slice': category 's0' appears twice, which pandas refuses"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ast_h5ad_table t = {.n_cells = 1, .n_genes = 1, .X = x, .genes = genes, .cells = cells, .n_obsm = 1,
                            .obsm = {{"spatial", pos, 2}}, .n_obs = cases[i].n, .obs = cases[i].col};
        ast_error e = {""};
        cr_assert_eq(ast_h5ad_write(path, &t, &e), -1, "case %zu", i);
        cr_assert(strstr(e.msg, cases[i].says) && !strstr(e.msg, "disk"), "case %zu: %s", i, e.msg);
    }
    snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s)\" && rm -r %s", dir, dir);
    cr_assert_eq(system(cmd), 0, "a refused write left a file in %s", dir);
}

/* alphast-run with args; its exit status, stdout in out. */
static int run(const char *args, char *out, size_t n)
{
    char cmd[2048], tmp[] = "/tmp/alphast-eval-out-XXXXXX";
    close(mkstemp(tmp));
    snprintf(cmd, sizeof cmd, "%s/alphast-run %s >%s 2>&1", ALPHAST_BUILD_DIR, args, tmp);
    int st = system(cmd);
    FILE *f = fopen(tmp, "r");
    out[fread(out, 1, n - 1, f)] = 0;
    fclose(f);
    remove(tmp);
    cr_assert(WIFEXITED(st), "%s", cmd);
    return WEXITSTATUS(st);
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = 0, c;
    while (f && (c = fgetc(f)) != EOF) n += c == '\n';
    if (f) fclose(f);
    return n;
}

static cJSON *read_json_path(const char *path)
{
    static char text[1 << 20];
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    text[fread(text, 1, sizeof text - 1, f)] = 0;
    fclose(f);
    cJSON *o = cJSON_Parse(text);
    cr_assert(o, "%s is JSON", path);
    return o;
}

static cJSON *read_json(const char *dir, const char *file)
{
    char path[1600]; /* dir is up to 1,400 bytes (the caller's args) */
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return read_json_path(path);
}

/* A fresh directory dir (a mkdtemp template) holding the tiny config, its path into cfg. */
static void tiny_run_dir(char *dir, char *cfg, size_t n)
{
    cr_assert(mkdtemp(dir));
    snprintf(cfg, n, "%s/tiny.yaml", dir);
    FILE *f = fopen(cfg, "w");
    cr_assert(f, "%s", cfg);
    fputs(tiny_yaml, f);
    fclose(f);
}

/* The held-out protocol is named in the printed table, eval.json and
 * summary.json; a split_key beside another protocol is refused. */
Test(evaluate, results_name_the_held_out_protocol, .timeout = 120)
{
    char dir[] = "/tmp/alphast-protocol-XXXXXX", args[1400], cfg[1100];
    static char out[65536];
    tiny_run_dir(dir, cfg, sizeof cfg);
    snprintf(args, sizeof args, "train -q --config %s --out %s/run training.epochs=1 evaluation.sets=2 "
             "evaluation.noise_seeds=1 data.split=blocks data.split_seed=3", cfg, dir);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "held out by blocks, val 0.1 test 0.1, split seed 3"), "%s", out);
    snprintf(args, sizeof args, "%s/run", dir);
    const char *files[] = {"eval.json", "summary.json"};
    for (int i = 0; i < 2; i++) {
        cJSON *j = read_json(args, files[i]), *p = cJSON_GetObjectItem(j, "protocol");
        cr_assert_str_eq(cJSON_GetObjectItem(p, "split")->valuestring, "blocks", "%s", files[i]);
        cr_assert_eq(cJSON_GetObjectItem(p, "split_seed")->valuedouble, 3.0, "%s", files[i]);
        cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "split_ratio"), "test")->valuedouble, 0.1);
        if (i == 0) cr_assert_str_eq(cJSON_GetObjectItem(p, "sets")->valuestring, "region");
        cJSON_Delete(j);
    }
    snprintf(args, sizeof args, "train -q --config %s --out %s/bad data.split=random data.split_key=fold", cfg, dir);
    cr_assert_neq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "data.split_key is set and data.split is random; set data.split: key"), "%s", out);
    snprintf(args, sizeof args, "rm -r %s", dir);
    cr_assert_eq(system(args), 0);
}

/* train: the table, eval.json (with which way each metric is better) and
 * plugins.json; without the evaluation; with the profile. */
static void train_commands(const char *dir, const char *cfg, char *out, size_t n_out)
{
    char args[2400]; /* cfg is up to 1100 bytes, dir about 30 */
    /* masking adds mask tokens to the saved weights, which sampling ignores */
    snprintf(args, sizeof args, "train -q --config %s --out %s/run evaluation.sets=4 masking.enable=true", cfg, dir);
    cr_assert_eq(run(args, out, n_out), 0, "%s", out);
    cr_assert(strstr(out, "knn_k5") && strstr(out, "random"), "train prints the table: %s", out);
    snprintf(args, sizeof args, "%s/run/eval.json", dir);
    cr_assert(count_lines(args) > 10, "train writes eval.json");
    snprintf(args, sizeof args, "/usr/bin/python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))[\"metrics\"]; "
             "assert m[\"knn_k10\"][\"better\"] == \"higher\" and m[\"rmsd\"][\"better\"] == \"lower\", m' "
             "%s/run/eval.json", dir);
    cr_assert_eq(system(args), 0, "eval.json says which way each metric is better: %s", args);
    /* the plugins it ran, the same list sample's .h5ad keeps in uns/alphast/plugins (below) */
    snprintf(args, sizeof args, "/usr/bin/python3 -c 'import json, sys; p = json.load(open(sys.argv[1])); "
             "assert [x[\"kind\"] for x in p] == [\"attention\", \"ffn\"] and len(p[0][\"sha256\"]) == 64, p' "
             "%s/run/plugins.json", dir);
    cr_assert_eq(system(args), 0, "%s", args);

    /* evaluation.after_train=false: training ends without the evaluation, and says so */
    snprintf(args, sizeof args, "train -q --config %s --out %s/noeval training.epochs=1 evaluation.after_train=false",
             cfg, dir);
    cr_assert_eq(run(args, out, n_out), 0, "%s", out);
    cr_assert(strstr(out, "evaluation.after_train is false: evaluation skipped") && !strstr(out, "knn_k5"), "%s", out);
    snprintf(args, sizeof args, "%s/noeval/eval.json", dir);
    cr_assert_neq(access(args, F_OK), 0, "no eval.json without the evaluation");

    /* ALPHAST_PROFILE=1: the command ends with the per-op table of its steps */
    setenv("ALPHAST_PROFILE", "1", 1);
    snprintf(args, sizeof args, "train -q --config %s --out %s/profiled training.epochs=1 evaluation.sets=2", cfg, dir);
    int profiled = run(args, out, n_out);
    unsetenv("ALPHAST_PROFILE");
    cr_assert_eq(profiled, 0, "%s", out);
    cr_assert(strstr(out, "alphast profile: ") && strstr(out, "\nlinear ") && strstr(out, "total on the tape"), "%s",
              out);
}

/* sample and eval to files and to stdout (--out -, --json -), with the
 * placement beside them. */
static void sample_and_eval_to_files(const char *dir, int64_t n_test, int64_t n_val, char *out, size_t n_out)
{
    char args[1024];
    snprintf(args, sizeof args, "sample %s/run --out %s/gen.csv", dir, dir);
    cr_assert_eq(run(args, out, n_out), 0, "%s", out);
    snprintf(args, sizeof args, "%s/gen.csv", dir);
    cr_assert_eq(count_lines(args), n_test + 1, "one row per test cell and a header");
    /* --out - and --json -: the data alone on stdout, the messages on stderr */
    snprintf(args, sizeof args, "%s/alphast-run sample %s/run --out - >%s/stdout.csv 2>/dev/null", ALPHAST_BUILD_DIR, dir,
             dir);
    cr_assert_eq(system(args), 0, "%s", args);
    snprintf(args, sizeof args, "cmp -s %s/stdout.csv %s/gen.csv", dir, dir);
    cr_assert_eq(system(args), 0, "sample --out - writes the CSV to stdout");
    snprintf(args, sizeof args, "%s/alphast-run eval %s/run --split val --steps 2 --json - >%s/stdout.json 2>/dev/null",
             ALPHAST_BUILD_DIR, dir, dir);
    cr_assert_eq(system(args), 0, "%s", args);
    snprintf(args, sizeof args, "%s/stdout.json", dir);
    FILE *json = fopen(args, "r");
    cr_assert(json);
    out[fread(out, 1, n_out - 1, json)] = 0;
    fclose(json);
    cJSON *report = cJSON_Parse(out);
    cr_assert(cJSON_IsObject(report), "eval --json - writes the JSON, and only it, to stdout: %s", out);
    cJSON_Delete(report);
    snprintf(args, sizeof args, "%s/run/placement_val.csv", dir);
    cr_assert_eq(count_lines(args), n_val + 1, "eval --split val --json - writes the run's placement_val.csv");
}

/* sample to .h5ad: the test cells, the genes and the plugins it ran. */
static void sample_h5ad(const char *dir, int64_t n_test, char *out, size_t n_out)
{
    char args[1024];
    snprintf(args, sizeof args, "sample %s/run --out %s/gen.h5ad --mode expr_to_pos", dir, dir);
    cr_assert_eq(run(args, out, n_out), 0, "%s", out);
    ast_data_opts o;
    ast_data_opts_default(&o);
    o.position_key = "spatial", o.cell_type_key = NULL;
    ast_dataset d;
    ast_error e = {""};
    snprintf(args, sizeof args, "%s/gen.h5ad", dir);
    cr_assert(ast_data_read_h5ad(args, &o, &d, &e) == 0, "%s", e.msg);
    cr_assert_eq(d.n_cells, n_test);
    cr_assert_eq(d.n_genes, 28);
    ast_dataset_free(&d);
    snprintf(args, sizeof args, "/usr/bin/python3 -c 'import h5py, json, sys; f = h5py.File(sys.argv[1], \"r\"); "
             "assert json.loads(f[\"uns/alphast/plugins\"][()]) == json.load(open(sys.argv[2]))' "
             "%s/gen.h5ad %s/run/plugins.json", dir, dir);
    cr_assert_eq(system(args), 0, "%s", args);
}

Test(evaluate, train_eval_and_sample_commands, .timeout = 120)
{
    char dir[] = "/tmp/alphast-run-XXXXXX", args[1024], cfg[1100];
    static char out[65536];
    tiny_run_dir(dir, cfg, sizeof cfg);
    train_commands(dir, cfg, out, sizeof out);

    snprintf(args, sizeof args, "eval %s/run --split val --steps 2 --json %s/val.json", dir, dir);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "(region): val split, 1 set of up to 400 cells") && strstr(out, "2 network evaluations") &&
              strstr(out, "best baseline on knn_k10") && strstr(out, "uncertainty (") && strstr(out, "spread/skill"), "%s", out);

    fixture fx; /* the splits the commands rebuild from the config */
    fixture_open(&fx, NULL);
    int64_t n_test = fx.sp[AST_SPLIT_TEST].n, n_val = fx.sp[AST_SPLIT_VAL].n;
    fixture_close(&fx);
    snprintf(args, sizeof args, "%s/run/placement.csv", dir);
    cr_assert_eq(count_lines(args), n_test + 1, "train writes placement.csv: a row per test cell and a header");
    snprintf(args, sizeof args, "%s/val.placement.csv", dir);
    cr_assert_eq(count_lines(args), n_val + 1, "eval --json val.json writes val.placement.csv beside it");
    sample_and_eval_to_files(dir, n_test, n_val, out, sizeof out);
    sample_h5ad(dir, n_test, out, sizeof out);

    snprintf(args, sizeof args, "sample %s/run --out %s/gen.txt", dir, dir);
    cr_assert_eq(run(args, out, sizeof out), 2, "an unknown output format is a usage error: %s", out);
    snprintf(args, sizeof args, "eval %s/nothing", dir);
    cr_assert_eq(run(args, out, sizeof out), 1, "%s", out);
    cr_assert(strstr(out, "not a run directory"), "%s", out);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    cr_assert_eq(system(args), 0);
}

/* sample's CSV (cell,set,x,y[,z],x_true,y_true[,z_true]) as the sets it
 * wrote: [B, N, 3] placed and true positions, mask [B, N]. */
typedef struct written_sets {
    int B, N;
    float *pos, *truth, *mask;
} written_sets;

static void read_sample_csv(const char *path, int dims, int64_t rows, written_sets *w)
{
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char line[4096];
    int *set = calloc((size_t)rows, sizeof *set), *count = calloc((size_t)rows, sizeof *count);
    float *xyz = calloc((size_t)rows * 6, sizeof *xyz);
    cr_assert(fgets(line, sizeof line, f), "a header");
    w->B = w->N = 0;
    for (int64_t r = 0; r < rows; r++) {
        long long cell, s;
        float *v = xyz + r * 6;
        cr_assert(fgets(line, sizeof line, f), "row %lld", (long long)r);
        int got = dims == 3 ? sscanf(line, "%lld,%lld,%f,%f,%f,%f,%f,%f", &cell, &s, v, v + 1, v + 2, v + 3, v + 4, v + 5)
                            : sscanf(line, "%lld,%lld,%f,%f,%f,%f", &cell, &s, v, v + 1, v + 3, v + 4);
        cr_assert_eq(got, dims * 2 + 2, "%s", line);
        set[r] = (int)s;
        if (++count[s] > w->N) w->N = count[s];
        if (s + 1 > w->B) w->B = (int)s + 1;
    }
    fclose(f);
    w->pos = calloc((size_t)w->B * w->N * 3, sizeof(float)), w->truth = calloc((size_t)w->B * w->N * 3, sizeof(float));
    w->mask = calloc((size_t)w->B * w->N, sizeof(float));
    memset(count, 0, (size_t)rows * sizeof *count);
    for (int64_t r = 0; r < rows; r++) {
        int64_t at = (int64_t)set[r] * w->N + count[set[r]]++;
        memcpy(w->pos + at * 3, xyz + r * 6, 3 * sizeof(float)), memcpy(w->truth + at * 3, xyz + r * 6 + 3, 3 * sizeof(float));
        w->mask[at] = 1.0f;
    }
    free(set), free(count), free(xyz);
}

static const cJSON *at_path(const cJSON *o, const char *const *keys)
{
    for (; *keys && o; keys++) o = cJSON_GetObjectItemCaseSensitive(o, *keys);
    cr_assert(o, "a key is missing");
    return o;
}

/* Trains the tiny model on `data` (overrides), then `eval` and `sample`
 * its test split: the sample's CSV, scored with the metric code, gives
 * eval.json's numbers; eval.json holds finite uncertainty measures. */
static void sample_matches_eval(const char *data, int dims)
{
    char dir[] = "/tmp/alphast-same-XXXXXX", args[2048], cfg[1100], out[8192];
    tiny_run_dir(dir, cfg, sizeof cfg);
    snprintf(args, sizeof args, "train -q --config %s --out %s/run evaluation.max_set_size=150 evaluation.noise_seeds=3 "
             "evaluation.after_train=false %s", cfg, dir, data);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    snprintf(args, sizeof args, "eval %s/run --json %s/eval.json", dir, dir);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    snprintf(args, sizeof args, "sample %s/run --out %s/gen.csv", dir, dir);
    cr_assert_eq(run(args, out, sizeof out), 0, "%s", out);
    snprintf(args, sizeof args, "%s/eval.json", dir);
    cJSON *report = read_json_path(args);
    const cJSON *task = at_path(report, (const char *const[]){"tasks", "expr_to_pos", NULL});
    const cJSON *metrics = at_path(task, (const char *const[]){"model", "positions", NULL}), *m;
    int64_t cells = (int64_t)cJSON_GetObjectItem(report, "cells")->valuedouble;
    written_sets w;
    snprintf(args, sizeof args, "%s/gen.csv", dir);
    cr_assert_eq(count_lines(args), cells + 1, "every cell eval scored, once");
    read_sample_csv(args, dims, cells, &w);
    cr_assert_eq(w.B, (int)cJSON_GetObjectItem(report, "sets")->valuedouble, "eval's sets");
    ast_pos_metrics got;
    ast_pos_metrics_compute(w.B, w.N, w.pos, w.truth, w.mask, (int)cJSON_GetObjectItem(report, "k_neighbors")->valuedouble, &got);
    const double mine[] = {got.knn[0], got.knn[1], got.knn[2], got.dist_row_spearman, got.rmsd, got.procrustes};
    const char *names[] = {"knn_k5", "knn_k10", "knn_k20", "dist_row_spearman", "rmsd", "procrustes"};
    for (int i = 0; i < 6; i++) {
        m = cJSON_GetObjectItem(metrics, names[i]);
        /* the CSV's positions read back exactly (9 digits); cJSON writes 15 to 17 digits */
        cr_assert(cJSON_IsNumber(m) && fabs(m->valuedouble - mine[i]) <= 1e-12 * (1 + fabs(mine[i])), "%s: eval %g, sample %g",
                  names[i], m->valuedouble, mine[i]);
    }
    const cJSON *u = at_path(task, (const char *const[]){"uncertainty", NULL});
    const char *keys[] = {"spread", "skill", "spread_skill", "energy_score", "coverage", "coverage_nominal"};
    for (int i = 0; i < 6; i++) {
        m = cJSON_GetObjectItem(u, keys[i]);
        cr_assert(cJSON_IsNumber(m) && isfinite(m->valuedouble), "uncertainty.%s", keys[i]);
        cr_assert(cJSON_IsString(at_path(u, (const char *const[]){"definitions", keys[i], NULL})), "%s defined", keys[i]);
    }
    cr_assert_eq(cJSON_GetObjectItem(u, "samples")->valuedouble, 3);
    cJSON_Delete(report);
    free(w.pos), free(w.truth), free(w.mask);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    cr_assert_eq(system(args), 0);
}

Test(evaluate, sample_writes_what_eval_scores_3d, .timeout = 120) { sample_matches_eval("", 3); }

/* 2-D data: the sets' placements turned onto their principal axes and z
 * dropped, in what sample writes and in what eval scores */
Test(evaluate, sample_writes_what_eval_scores_2d, .timeout = 120)
{
    sample_matches_eval("data.path=" ALPHAST_SOURCE_DIR "/data/visium_prostate/visium_prostate.h5ad "
                        "data.slice_key=sample evaluation.morans_genes=null", 2);
}
