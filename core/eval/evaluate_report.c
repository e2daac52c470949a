/* The evaluation report as a table for people and as JSON for tools. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic_file.h"
#include "eval/evaluate.h"

typedef struct metric_row {
    const char *name;
    size_t offset;
} metric_row;

static const metric_row pos_rows[] = {
    {"knn_k5", offsetof(ast_pos_metrics, knn[0])},
    {"knn_k10", offsetof(ast_pos_metrics, knn[1])},
    {"knn_k20", offsetof(ast_pos_metrics, knn[2])},
    {"dist_row_spearman", offsetof(ast_pos_metrics, dist_row_spearman)},
    {"rmsd", offsetof(ast_pos_metrics, rmsd)},
    {"graph_precision", offsetof(ast_pos_metrics, graph_precision)},
    {"graph_recall", offsetof(ast_pos_metrics, graph_recall)},
    {"graph_f1", offsetof(ast_pos_metrics, graph_f1)},
    {"dist_pearson", offsetof(ast_pos_metrics, dist_pearson)},
    {"dist_spearman", offsetof(ast_pos_metrics, dist_spearman)},
    {"procrustes", offsetof(ast_pos_metrics, procrustes)},
    {"dist_mse", offsetof(ast_pos_metrics, dist_mse)},
};

static const metric_row expr_rows[] = {
    {"mse", offsetof(ast_expr_metrics, mse)},           {"mae", offsetof(ast_expr_metrics, mae)},
    {"pcc_gene", offsetof(ast_expr_metrics, pcc_gene)}, {"pcc_cell", offsetof(ast_expr_metrics, pcc_cell)},
    {"cosine", offsetof(ast_expr_metrics, cosine)},     {"spearman", offsetof(ast_expr_metrics, spearman)},
};

#define N_POS_ROWS ((int)(sizeof pos_rows / sizeof pos_rows[0]))
#define N_EXPR_ROWS ((int)(sizeof expr_rows / sizeof expr_rows[0]))

static double at(const void *metrics, const metric_row *row) { return *(const double *)((const char *)metrics + row->offset); }

static double mean_of(const double *v, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++) s += v[i];
    return n ? s / n : 0.0;
}

/* Short column heads for the baselines. */
static const char *short_name(const char *name)
{
    static const char *const map[][2] = {{"expression_mds", "expr_mds"}, {"expression_isomap", "isomap"},
                                         {"knn_regression", "knn_reg"}, {"mean_profile", "mean_prof"},
                                         {"spatial_knn", "spat_knn"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(name, map[i][0])) return map[i][1];
    return name;
}

/* One table row: the model, then every baseline. */
static void print_row(FILE *out, const char *label, const ast_eval_task *task, const metric_row *row, size_t part)
{
    fprintf(out, "  %-22s %9.4f", label, at((const char *)&task->model + part, row));
    for (int b = 0; b < task->n_baselines; b++) fprintf(out, " %9.4f", at((const char *)&task->baselines[b].scores + part, row));
    fputc('\n', out);
}

static void print_morans(FILE *out, const ast_eval_report *r, const ast_eval_task *task)
{
    char label[64];
    snprintf(label, sizeof label, "morans_i (%d genes)", r->n_genes);
    fprintf(out, "  %-22s %9.4f", label, mean_of(task->model.morans, r->n_genes));
    for (int b = 0; b < task->n_baselines; b++) fprintf(out, " %9.4f", mean_of(task->baselines[b].scores.morans, r->n_genes));
    fprintf(out, "   (true coordinates %.4f)\n", mean_of(r->morans_true, r->n_genes));
}

/* Where the model stands: best baseline, diversity, the score by steps. */
static void print_verdict(FILE *out, const ast_eval_task *task)
{
    const ast_eval_baseline *best = &task->baselines[task->best];
    double model = ast_eval_primary(task->mode, &task->model), base = ast_eval_primary(task->mode, &best->scores);
    fprintf(out, "  best baseline on %s: %s %.4f; the model %.4f (%+.4f: %s)\n", ast_eval_primary_name(task->mode),
            best->name, base, model, model - base, model > base ? "better" : "NOT better");
    if (!ast_mode_noises(task->mode, AST_MOD_POS)) return;
    fprintf(out, "  sample diversity: mean Procrustes disparity between noise seeds %.3g\n", task->diversity);
    if (task->diversity < AST_EVAL_DEGENERATE_DIVERSITY)
        fprintf(out, "  warning: different noise seeds give the same placement (disparity below %g): the sampler "
                     "does no generative work\n", AST_EVAL_DEGENERATE_DIVERSITY);
    fprintf(out, "  knn_k10 by sampler steps:");
    for (int i = 0; i < task->n_step_counts; i++) fprintf(out, "  %d: %.4f", task->step_counts[i], task->by_steps[i].knn[1]);
    fputc('\n', out);
}

static void print_task(FILE *out, const ast_eval_report *r, const ast_eval_task *task)
{
    fprintf(out, "%-24s %9s", ast_mode_name(task->mode), "model");
    for (int b = 0; b < task->n_baselines; b++) fprintf(out, " %9s", short_name(task->baselines[b].name));
    fputc('\n', out);
    if (ast_mode_noises(task->mode, AST_MOD_POS)) {
        for (int i = 0; i < N_POS_ROWS; i++) print_row(out, pos_rows[i].name, task, &pos_rows[i], offsetof(ast_eval_scores, pos));
        print_morans(out, r, task);
    }
    if (ast_mode_noises(task->mode, AST_MOD_EXPR))
        for (int i = 0; i < N_EXPR_ROWS; i++) print_row(out, expr_rows[i].name, task, &expr_rows[i], offsetof(ast_eval_scores, expr));
    print_verdict(out, task);
}

void ast_eval_report_print(const ast_eval_report *r, FILE *out)
{
    fprintf(out, "held-out evaluation (%s): %s split, %d set%s of up to %d cells (%d cells), eval seed %llu, %d network "
                 "evaluations, returning %s, k = %d, %.1f s\n",
            ast_eval_protocol_name(r->protocol), r->split, r->sets, r->sets == 1 ? "" : "s", r->set_size, r->cells,
            (unsigned long long)r->seed, r->evaluations, ast_sample_return_name(r->ret), r->k, r->seconds);
    for (int t = 0; t < r->n_tasks; t++) print_task(out, r, &r->tasks[t]);
}

/* cJSON writes NaN as null, which is what an undefined metric is. */
static cJSON *rows_json(const metric_row *rows, int n, const void *metrics)
{
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < n; i++) cJSON_AddNumberToObject(o, rows[i].name, at(metrics, &rows[i]));
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
        cJSON_AddItemToObject(o, "positions", rows_json(pos_rows, N_POS_ROWS, &s->pos));
        cJSON_AddItemToObject(o, "morans_i", per_gene_json(r, s->morans));
    }
    if (ast_mode_noises(mode, AST_MOD_EXPR)) cJSON_AddItemToObject(o, "expression", rows_json(expr_rows, N_EXPR_ROWS, &s->expr));
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

static void add_sampler_json(cJSON *to, const ast_eval_report *r, const ast_eval_task *task)
{
    cJSON *div = cJSON_AddObjectToObject(to, "diversity"), *steps = cJSON_AddObjectToObject(to, "by_steps");
    cJSON_AddNumberToObject(div, "noise_seeds", r->noise_seeds);
    cJSON_AddNumberToObject(div, "procrustes_between_samples", task->diversity);
    cJSON_AddBoolToObject(div, "degenerate", task->diversity < AST_EVAL_DEGENERATE_DIVERSITY);
    for (int i = 0; i < task->n_step_counts; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", task->step_counts[i]);
        cJSON_AddItemToObject(steps, key, rows_json(pos_rows, N_POS_ROWS, &task->by_steps[i]));
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
    if (ast_mode_noises(task->mode, AST_MOD_POS)) add_sampler_json(to, r, task);
    return to;
}

static cJSON *report_json(const ast_eval_report *r)
{
    cJSON *o = cJSON_CreateObject(), *tasks = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "protocol", ast_eval_protocol_name(r->protocol));
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
