/* Held-out evaluation: the cells of a split placed by the sampler and by
 * the baselines, scored alike (see alphast/evaluate.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/progress.h"
#include "train/train.h"
#include "evaluate_internal.h"

/* Seeds of the evaluation's own streams, derived from evaluation.seed. */
#define SETS_SEED 0xe7a1ce17ull
#define NOISE_SEED 0x9e3779b9ull

static int gene_index(const ast_dataset *d, const ast_cfg_node *n, ast_error *e)
{
    if (n->kind == AST_CFG_SCALAR)
        for (int g = 0; g < d->n_genes; g++)
            if (!strcmp(d->genes[g], n->value)) return g;
    if (n->kind != AST_CFG_SCALAR) {
        ast_error_set(e, "%s: %s: expected a gene name", n->where, n->path);
        return -1;
    }
    const char *near = ast_did_you_mean(n->value, (const char *const *)d->genes, d->n_genes);
    ast_error_set(e, "%s: %s: no gene '%s' in %s%s%s%s", n->where, n->path, n->value, d->source,
                  near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "");
    return -1;
}

/* evaluation.morans_genes: null, one name, or a list of names. */
static int read_genes(const ast_cfg *cfg, const ast_dataset *d, ast_eval_config *ec, ast_error *e)
{
    const ast_cfg_node *n = ast_cfg_get(cfg, "evaluation.morans_genes");
    if (!n || n->kind == AST_CFG_NULL) return 0;
    if (n->kind == AST_CFG_MAP) {
        ast_error_set(e, "%s: evaluation.morans_genes: expected a list of gene names or null", n->where);
        return -1;
    }
    int count = n->kind == AST_CFG_SEQ ? n->n_items : 1;
    ec->genes = ast_xmalloc((size_t)(count ? count : 1) * sizeof *ec->genes);
    for (int i = 0; i < count; i++) {
        int g = gene_index(d, n->kind == AST_CFG_SEQ ? n->items[i] : n, e);
        if (g < 0) return -1;
        ec->genes[ec->n_genes++] = g;
    }
    return 0;
}

int ast_eval_config_from_cfg(const ast_cfg *cfg, const ast_dataset *d, ast_eval_config *ec, ast_error *e)
{
    memset(ec, 0, sizeof *ec);
    ast_mode_parse(ast_cfg_str(cfg, "training_mode"), &ec->mode);    /* the schema's enum */
    ast_sample_return_parse(ast_cfg_str(cfg, "sampling.return"), &ec->ret); /* likewise */
    ast_eval_protocol_parse(ast_cfg_str(cfg, "evaluation.protocol"), &ec->protocol); /* likewise */
    ec->sets = (int)ast_cfg_int(cfg, "evaluation.sets");
    ec->max_set_size = (int)ast_cfg_int(cfg, "evaluation.max_set_size");
    ec->k = (int)ast_cfg_int(cfg, "evaluation.k_neighbors");
    ec->num_steps = (int)ast_cfg_int(cfg, "sampling.num_steps");
    ec->seed = (uint64_t)ast_cfg_int(cfg, "evaluation.seed");
    ec->noise_seeds = (int)ast_cfg_int(cfg, "evaluation.noise_seeds");
    ec->mlp_epochs = ast_cfg_bool(cfg, "evaluation.mlp_regression") ? (int)ast_cfg_int(cfg, "evaluation.mlp_epochs") : 0;
    if (ast_cfg_bool(cfg, "reference_parity")) ec->protocol = AST_EVAL_ORACLE;
    int set_size = ec->protocol == AST_EVAL_ORACLE ? (int)ast_cfg_int(cfg, "data.set_size") : ec->max_set_size;
    if (set_size > 0 && ec->k >= set_size) { /* whole-slice sets (0) are sized by the data */
        ast_error_set(e, "evaluation.k_neighbors (%d) must be below the evaluation's set size (%d, %s): the graph "
                      "metrics compare each cell's k nearest others in its set", ec->k, set_size,
                      ec->protocol == AST_EVAL_ORACLE ? "data.set_size" : "evaluation.max_set_size");
        return -1;
    }
    ast_train_config tc; /* how the model's position output is read */
    if (ast_train_config_from_cfg(cfg, &tc, e) < 0) return -1;
    ec->pos_param = tc.pos_param;
    ec->align = tc.loss.position_loss == AST_POS_LOSS_ALIGNED;
    ec->precision = tc.precision;
    ec->split = tc.split;
    ec->split_kind = ast_split_resolve(d, &tc.split);
    if (read_genes(cfg, d, ec, e) < 0) {
        ast_eval_config_free(ec);
        return -1;
    }
    return 0;
}

void ast_eval_config_free(ast_eval_config *ec)
{
    free(ec->genes);
    ec->genes = NULL;
    ec->n_genes = 0;
}

uint64_t ast_eval_noise_seed(uint64_t eval_seed, uint64_t noise) { return eval_seed ^ NOISE_SEED ^ noise; }

void ast_eval_make_sets(const ast_set_sampler *sets, const ast_eval_config *ec, ast_eval_sets *out)
{
    if (ec->protocol == AST_EVAL_REGION)
        ast_eval_sets_region(sets, ec->max_set_size, ec->seed ^ SETS_SEED, out);
    else
        ast_eval_sets_oracle(sets, ec->sets, ec->seed ^ SETS_SEED, out);
}

const char *ast_eval_primary_name(ast_train_mode mode) { return mode == AST_MODE_POS_TO_EXPR ? "pcc_gene" : "knn_k10"; }

double ast_eval_primary(ast_train_mode mode, const ast_eval_scores *s)
{
    return mode == AST_MODE_POS_TO_EXPR ? s->expr.pcc_gene : s->pos.knn[1];
}

void eval_score(const eval_run *run, ast_train_mode mode, const float *pos, const float *expr, ast_eval_scores *out)
{
    const ast_eval_sets *t = run->truth;
    const ast_eval_report *r = run->r;
    out->morans = ast_xcalloc((size_t)(r->n_genes ? r->n_genes : 1), sizeof(double));
    if (ast_mode_noises(mode, AST_MOD_POS)) {
        ast_pos_metrics_compute(t->B, t->N, pos, t->pos, t->mask, r->k, &out->pos);
        ast_uncertainty point;
        ast_uncertainty_compute(1, t->B, t->N, pos, t->pos, t->mask, &point);
        out->pos.energy_score = point.energy;
        for (int j = 0; j < r->n_genes; j++)
            out->morans[j] = ast_morans_i(t->B, t->N, pos, t->expr + r->genes[j], t->G, t->mask);
    }
    if (ast_mode_noises(mode, AST_MOD_EXPR)) ast_expr_metrics_compute(t->B, t->N, t->G, expr, t->expr, t->mask, &out->expr);
}

typedef struct generated {
    float *expr, *pos;
} generated;

static void generate(ast_model *m, const ast_schedule *s, const eval_run *run, ast_train_mode mode, int steps,
                     uint64_t noise, generated *g)
{
    const ast_eval_sets *t = run->truth;
    const ast_eval_config *ec = run->ec;
    ast_sampler_config sc = {mode, steps, ec->ret, ast_eval_noise_seed(ec->seed, noise), ec->pos_param, ec->align,
                             ec->precision, 0};
    /* Expression given, not generated: nothing to score, so no [B, N, G] copy of it. */
    g->expr = ast_mode_noises(mode, AST_MOD_EXPR) ? ast_xcalloc((size_t)t->B * t->N * t->G, sizeof(float)) : NULL;
    g->pos = ast_xcalloc((size_t)t->B * t->N * 3, sizeof(float));
    ast_sample(m, s, &sc, t->B, t->N, t->expr, t->pos, t->mask, g->expr, g->pos);
    /* 2-D data: the placement in the plane, as sample writes it and as the baselines place cells */
    if (run->sets->d->coord_dims == 2 && ast_mode_noises(mode, AST_MOD_POS)) ast_positions_flatten(t->B, t->N, g->pos, t->mask);
}

static void generated_free(generated *g) { free(g->expr), free(g->pos); }

/* The uncertainty measures of noise_seeds placements of each set: the
 * first (noise seed 0, the one scored) and noise seeds 1.. */
static void uncertainty(ast_model *m, const ast_schedule *s, const eval_run *run, ast_eval_task *task, const generated *first)
{
    const ast_eval_sets *t = run->truth;
    int S = run->ec->noise_seeds;
    size_t one = (size_t)t->B * t->N * 3;
    float *samples = ast_xmalloc((size_t)S * one * sizeof *samples);
    memcpy(samples, first->pos, one * sizeof *samples);
    for (int k = 1; k < S; k++) {
        generated other;
        generate(m, s, run, task->mode, run->ec->num_steps, (uint64_t)k, &other);
        memcpy(samples + k * one, other.pos, one * sizeof *samples);
        generated_free(&other);
    }
    ast_uncertainty_compute(S, t->B, t->N, samples, t->pos, t->mask, &task->uncertainty);
    free(samples);
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The position score at 1 and 10 sampler steps beside the configured count,
 * ascending, each count once. */
static void score_by_steps(ast_model *m, const ast_schedule *s, const eval_run *run, ast_eval_task *task)
{
    int wanted[AST_EVAL_MAX_STEP_COUNTS] = {1, 10, run->ec->num_steps};
    qsort(wanted, AST_EVAL_MAX_STEP_COUNTS, sizeof *wanted, cmp_int);
    for (int i = 0; i < AST_EVAL_MAX_STEP_COUNTS; i++) {
        if (i && wanted[i] == wanted[i - 1]) continue;
        int j = task->n_step_counts++;
        task->step_counts[j] = wanted[i];
        if (wanted[i] == run->ec->num_steps) {
            task->by_steps[j] = task->model.pos;
            continue;
        }
        generated g;
        ast_eval_scores sc = {0};
        generate(m, s, run, task->mode, wanted[i], 0, &g);
        eval_score(run, task->mode, g.pos, g.expr, &sc);
        task->by_steps[j] = sc.pos;
        free(sc.morans);
        generated_free(&g);
    }
}

static void run_task(ast_model *m, const ast_schedule *s, const eval_run *run, ast_eval_task *task)
{
    generated g;
    generate(m, s, run, task->mode, run->ec->num_steps, 0, &g);
    eval_score(run, task->mode, g.pos, g.expr, &task->model);
    if (task->mode == AST_MODE_EXPR_TO_POS) eval_keep_placement(run, g.pos);
    eval_baselines(run, task);
    if (ast_mode_noises(task->mode, AST_MOD_POS)) {
        uncertainty(m, s, run, task, &g);
        score_by_steps(m, s, run, task);
    }
    generated_free(&g);
}

static void choose_genes(const ast_eval_config *ec, const ast_eval_sets *t, ast_eval_report *r)
{
    r->n_genes = ec->n_genes ? ec->n_genes : (t->G < AST_EVAL_DEFAULT_GENES ? t->G : AST_EVAL_DEFAULT_GENES);
    r->genes = ast_xmalloc((size_t)r->n_genes * sizeof *r->genes);
    if (ec->n_genes)
        memcpy(r->genes, ec->genes, (size_t)r->n_genes * sizeof *r->genes);
    else
        ast_most_spatial_genes(t->B, t->N, t->G, t->pos, t->expr, t->mask, r->n_genes, r->genes);
    r->morans_true = ast_xmalloc((size_t)r->n_genes * sizeof *r->morans_true);
    for (int j = 0; j < r->n_genes; j++) r->morans_true[j] = ast_morans_i(t->B, t->N, t->pos, t->expr + r->genes[j], t->G, t->mask);
}

int ast_evaluate(ast_model *m, const ast_schedule *s, const ast_set_sampler *sets, const ast_split *train,
                 const ast_eval_config *ec, const char *split_name, ast_eval_report *r, ast_error *e)
{
    memset(r, 0, sizeof *r);
    const ast_dataset *d = sets->d;
    if (sets->split->n < 1) {
        ast_error_set(e, "%s: the %s split is empty; nothing to evaluate (raise data.split_ratio.%s)", d->source,
                      split_name, split_name);
        return -1;
    }
    double start = ast_now();
    ast_eval_sets truth;
    ast_eval_make_sets(sets, ec, &truth);
    *r = (ast_eval_report){.split = split_name, .split_opts = ec->split, .split_kind = ec->split_kind, .protocol = ec->protocol, .seed = ec->seed, .sets = truth.B,
                           .set_size = truth.N, .k = ec->k, .num_steps = ec->num_steps, .ret = ec->ret,
                           .evaluations = ast_sample_grid(s->steps, ec->num_steps, NULL),
                           .gene_names = (const char *const *)d->genes};
    for (int64_t i = 0; i < (int64_t)truth.B * truth.N; i++) r->cells += truth.mask[i] > 0.5f;
    choose_genes(ec, &truth, r);
    eval_run run = {sets, train, ec, &truth, r};
    r->tasks[0].mode = ec->mode;
    r->tasks[1].mode = AST_MODE_EXPR_TO_POS; /* a joint model can also place given cells */
    for (int i = 0; i < (ec->mode == AST_MODE_JOINT ? 2 : 1); i++) run_task(m, s, &run, &r->tasks[r->n_tasks++]);
    ast_eval_sets_free(&truth);
    r->seconds = ast_now() - start;
    return 0;
}

static void scores_free(ast_eval_scores *s) { free(s->morans); }

void ast_eval_report_free(ast_eval_report *r)
{
    for (int i = 0; i < r->n_tasks; i++) {
        scores_free(&r->tasks[i].model);
        for (int j = 0; j < r->tasks[i].n_baselines; j++) scores_free(&r->tasks[i].baselines[j].scores);
    }
    free(r->genes), free(r->morans_true);
    eval_placement_free(&r->placement);
    memset(r, 0, sizeof *r);
}
