/* The evaluation report as a table for people and as JSON for tools. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic_file.h"
#include "eval/evaluate.h"
#include "train/train.h"

/* A group's metrics in a score: its ast_pos_metrics or ast_expr_metrics. */
static const void *group_of(const ast_eval_scores *s, ast_metric_group g)
{
    return g == AST_METRIC_POSITIONS ? (const void *)&s->pos : (const void *)&s->expr;
}

static double mean_of(const double *v, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    return n ? s / n : 0.0;
}

/* The table rows of one group's metrics: the model, then every baseline. */
static void print_rows(FILE *out, const ast_eval_task *task, ast_metric_group g)
{
    for (int i = 0; i < ast_n_metric_defs; i++) {
        const ast_metric_def *m = &ast_metric_defs[i];
        if (m->group != g) continue;
        fprintf(out, "  %-22s %9.4f", m->name, ast_metric_value(m, group_of(&task->model, g)));
        for (int b = 0; b < task->n_baselines; b++)
            fprintf(out, " %9.4f", ast_metric_value(m, group_of(&task->baselines[b].scores, g)));
        fputc('\n', out);
    }
}

static void print_morans(FILE *out, const ast_eval_report *r, const ast_eval_task *task)
{
    char label[64];
    snprintf(label, sizeof label, "morans_i (%d genes)", r->n_genes);
    fprintf(out, "  %-22s %9.4f", label, mean_of(task->model.morans, r->n_genes));
    for (int b = 0; b < task->n_baselines; b++) fprintf(out, " %9.4f", mean_of(task->baselines[b].scores.morans, r->n_genes));
    fprintf(out, "   (true coordinates %.4f)\n", mean_of(r->morans_true, r->n_genes));
}

/* What the samples of different noise seeds say about the error, with
 * what the numbers mean. */
static void print_uncertainty(FILE *out, const ast_uncertainty *u)
{
    if (u->samples < 2) {
        fprintf(out, "  uncertainty: not measured (evaluation.noise_seeds = 1); placement error (skill) %.4g\n", u->skill);
        return;
    }
    fprintf(out, "  uncertainty (%d samples per set): %s, spread/skill %.3g (1 ideal), spread "
                 "%.4g, skill %.4g, energy score %.4g, coverage %.3f (calibrated: %.3f)\n",
            u->samples, ast_uncertainty_judgement(u), u->spread_skill, u->spread, u->skill, u->energy,
            u->coverage, u->coverage_nominal);
}

/* Where the model stands: best baseline, uncertainty, the score by steps. */
static void print_verdict(FILE *out, const ast_eval_task *task)
{
    const ast_eval_baseline *best = &task->baselines[task->best];
    double model = ast_eval_primary(task->mode, &task->model), base = ast_eval_primary(task->mode, &best->scores);
    fprintf(out, "  best baseline on %s: %s %.4f; the model %.4f (%+.4f: %s)\n", ast_eval_primary_name(task->mode),
            best->name, base, model, model - base, model > base ? "better" : "NOT better");
    if (!ast_mode_noises(task->mode, AST_MOD_POS)) return;
    print_uncertainty(out, &task->uncertainty);
    fprintf(out, "  knn_k10 by sampler steps:");
    for (int i = 0; i < task->n_step_counts; i++) fprintf(out, "  %d: %.4f", task->step_counts[i], task->by_steps[i].knn[1]);
    fputc('\n', out);
}

static void print_task(FILE *out, const ast_eval_report *r, const ast_eval_task *task)
{
    fprintf(out, "%-24s %9s", ast_mode_name(task->mode), "model");
    for (int b = 0; b < task->n_baselines; b++) fprintf(out, " %9s", task->baselines[b].short_name);
    fputc('\n', out);
    if (ast_mode_noises(task->mode, AST_MOD_POS)) {
        print_rows(out, task, AST_METRIC_POSITIONS);
        print_morans(out, r, task);
    }
    if (ast_mode_noises(task->mode, AST_MOD_EXPR))
        print_rows(out, task, AST_METRIC_EXPRESSION);
    print_verdict(out, task);
}

void ast_eval_report_print(const ast_eval_report *r, FILE *out)
{
    char held_out[256];
    ast_split_protocol_text(r->split_kind, &r->split_opts, held_out, sizeof held_out);
    fprintf(out, "held-out evaluation (%s): %s split, %d set%s of up to %d cells (%d cells), held out by %s; eval "
                 "seed %llu, %d network evaluations, returning %s, k = %d, %.1f s\n",
            ast_eval_protocol_name(r->protocol), r->split, r->sets, r->sets == 1 ? "" : "s", r->set_size, r->cells, held_out,
            (unsigned long long)r->seed, r->evaluations, ast_sample_return_name(r->ret), r->k, r->seconds);
    for (int t = 0; t < r->n_tasks; t++) print_task(out, r, &r->tasks[t]);
}

/* cJSON writes NaN as null, which is what an undefined metric is. */
static cJSON *rows_json(ast_metric_group g, const void *metrics)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < ast_n_metric_defs; i++)
        if (ast_metric_defs[i].group == g)
            cJSON_AddNumberToObject(o, ast_metric_defs[i].name, ast_metric_value(&ast_metric_defs[i], metrics));
    return o;
}

/* "metrics": {key: {"better": .., "label": ..}}: what the report ranks by. */
static cJSON *metric_defs_json(void)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < ast_n_metric_defs; i++) {
        cJSON *m = cJSON_AddObjectToObject(o, ast_metric_defs[i].name);
        cJSON_AddStringToObject(m, "better", ast_better_name(ast_metric_defs[i].better));
        if (ast_metric_defs[i].label) cJSON_AddStringToObject(m, "label", ast_metric_defs[i].label);
    }
    return o;
}

static cJSON *per_gene_json(const ast_eval_report *r, const double *v)
{
    cJSON *o = cJSON_CreateObject();
    for (int j = 0; j < r->n_genes; j++) cJSON_AddNumberToObject(o, r->gene_names[r->genes[j]], v[j]);
    return o;
}

static cJSON *scores_json(const ast_eval_report *r, ast_train_mode mode, const ast_eval_scores *s)
{
    cJSON *o = cJSON_CreateObject();
    if (ast_mode_noises(mode, AST_MOD_POS)) {
        cJSON_AddItemToObject(o, "positions", rows_json(AST_METRIC_POSITIONS, &s->pos));
        cJSON_AddItemToObject(o, "morans_i", per_gene_json(r, s->morans));
    }
    if (ast_mode_noises(mode, AST_MOD_EXPR)) cJSON_AddItemToObject(o, "expression", rows_json(AST_METRIC_EXPRESSION, &s->expr));
    return o;
}

static cJSON *best_json(const ast_eval_task *task)
{
    const ast_eval_baseline *best = &task->baselines[task->best];
    double model = ast_eval_primary(task->mode, &task->model), base = ast_eval_primary(task->mode, &best->scores);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", best->name);
    cJSON_AddStringToObject(o, "metric", ast_eval_primary_name(task->mode));
    cJSON_AddNumberToObject(o, "value", base);
    cJSON_AddNumberToObject(o, "model_minus_best", model - base);
    return o;
}

static const char *const definitions[][2] = {
    {"samples", "placements per set, from evaluation.noise_seeds noise seeds"},
    {"spread", "RMS distance of a sample's cell from the samples' mean (each sample aligned onto the mean, "
               "rotation or reflection, no scale; divisor S - 1), in the length unit"},
    {"skill", "RMS distance of the mean's cell from its true position (the mean aligned onto the truth), in the "
              "length unit"},
    {"spread_skill", "sqrt((S + 1) / S) * spread / skill: ~1 calibrated, << 1 overconfident, >> 1 underconfident"},
    {"energy_score", "E||D_s - D|| - E||D_s - D_s'|| / 2 over the samples' pairwise-distance vectors D_s and the "
                     "true D, || || the RMS over pairs, mean over sets; proper, lower is better, length unit"},
    {"coverage", "fraction of cells whose true position is no farther from the centre of it and the samples than "
                 "the farthest sample"},
    {"coverage_nominal", "S / (S + 1): the coverage when the truth is one more draw of the sampler"},
    {"judgement", "overconfident (spread_skill < 0.5 or coverage < coverage_nominal / 2), underconfident "
                  "(spread_skill > 2), else calibrated; also as the booleans overconfident, underconfident"},
};

static cJSON *uncertainty_json(const ast_uncertainty *u)
{
    cJSON *o = cJSON_CreateObject(), *defs;
    double values[] = {u->samples, u->spread, u->skill, u->spread_skill, u->energy, u->coverage, u->coverage_nominal};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) cJSON_AddNumberToObject(o, definitions[i][0], values[i]);
    const char *judgement = ast_uncertainty_judgement(u);
    if (judgement) cJSON_AddStringToObject(o, "judgement", judgement);
    else cJSON_AddNullToObject(o, "judgement");
    /* as numbers too (false 0, true 1), which a sweep's report averages over runs */
    cJSON_AddBoolToObject(o, "overconfident", judgement && !strcmp(judgement, "overconfident"));
    cJSON_AddBoolToObject(o, "underconfident", judgement && !strcmp(judgement, "underconfident"));
    defs = cJSON_AddObjectToObject(o, "definitions");
    for (size_t i = 0; i < sizeof definitions / sizeof definitions[0]; i++)
        cJSON_AddStringToObject(defs, definitions[i][0], definitions[i][1]);
    return o;
}

static void add_sampler_json(cJSON *to, const ast_eval_task *task)
{
    cJSON *steps;
    cJSON_AddItemToObject(to, "uncertainty", uncertainty_json(&task->uncertainty));
    steps = cJSON_AddObjectToObject(to, "by_steps");
    for (int i = 0; i < task->n_step_counts; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", task->step_counts[i]);
        cJSON_AddItemToObject(steps, key, rows_json(AST_METRIC_POSITIONS, &task->by_steps[i]));
    }
}

static cJSON *task_json(const ast_eval_report *r, const ast_eval_task *task)
{
    cJSON *to = cJSON_CreateObject(), *bases = cJSON_CreateObject();
    cJSON_AddItemToObject(to, "model", scores_json(r, task->mode, &task->model));
    for (int b = 0; b < task->n_baselines; b++)
        cJSON_AddItemToObject(bases, task->baselines[b].name, scores_json(r, task->mode, &task->baselines[b].scores));
    cJSON_AddItemToObject(to, "baselines", bases);
    cJSON_AddItemToObject(to, "best_baseline", best_json(task));
    if (ast_mode_noises(task->mode, AST_MOD_POS)) add_sampler_json(to, task);
    return to;
}

static cJSON *report_json(const ast_eval_report *r)
{
    cJSON *o = cJSON_CreateObject(), *tasks = cJSON_CreateObject();
    cJSON *protocol = ast_split_protocol_json(r->split_kind, &r->split_opts);
    cJSON_AddStringToObject(protocol, "sets", ast_eval_protocol_name(r->protocol)); /* evaluation.protocol */
    cJSON_AddItemToObject(o, "protocol", protocol);
    cJSON_AddStringToObject(o, "split", r->split);
    cJSON_AddNumberToObject(o, "eval_seed", (double)r->seed);
    cJSON_AddNumberToObject(o, "sets", r->sets);
    cJSON_AddNumberToObject(o, "set_size", r->set_size);
    cJSON_AddNumberToObject(o, "cells", r->cells);
    cJSON_AddNumberToObject(o, "k_neighbors", r->k);
    cJSON_AddNumberToObject(o, "num_steps", r->num_steps);
    cJSON_AddNumberToObject(o, "network_evaluations", r->evaluations);
    cJSON_AddStringToObject(o, "return", ast_sample_return_name(r->ret));
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddItemToObject(o, "morans_i_true", per_gene_json(r, r->morans_true));
    for (int t = 0; t < r->n_tasks; t++) cJSON_AddItemToObject(tasks, ast_mode_name(r->tasks[t].mode), task_json(r, &r->tasks[t]));
    cJSON_AddItemToObject(o, "tasks", tasks);
    cJSON_AddItemToObject(o, "metrics", metric_defs_json());
    return o;
}

int ast_eval_report_write_json(const ast_eval_report *r, const char *path, ast_error *e)
{
    cJSON *o = report_json(r);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    size_t n = strlen(text);
    text[n] = '\n'; /* the terminating NUL becomes the final newline */
    int rc = ast_atomic_write_bytes(path, text, n + 1, e);
    cJSON_free(text);
    return rc;
}
