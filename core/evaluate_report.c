/* The evaluation report as a table for people and as JSON for tools. */
#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "alphast/atomic_file.h"
#include "alphast/evaluate.h"

typedef struct metric_row {
    const char *name;
    size_t offset;
} metric_row;

static const metric_row pos_rows[] = {
    {"knn_preservation", offsetof(ast_pos_metrics, knn)},
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

static void print_rows(FILE *out, const metric_row *rows, int n, const void *model, const void *random)
{
    for (int i = 0; i < n; i++) fprintf(out, "  %-26s %9.4f %9.4f\n", rows[i].name, at(model, &rows[i]), at(random, &rows[i]));
}

void ast_eval_report_print(const ast_eval_report *r, FILE *out)
{
    fprintf(out, "held-out evaluation: %s split, %d sets of up to %d cells (%d cells), %d network evaluations, "
                 "returning %s, k = %d, %.1f s\n",
            r->split, r->sets, r->set_size, r->cells, r->evaluations, ast_sample_return_name(r->ret), r->k, r->seconds);
    for (int t = 0; t < r->n_tasks; t++) {
        const ast_eval_task *task = &r->tasks[t];
        fprintf(out, "%-28s %9s %9s\n", ast_mode_name(task->mode), "model", "random");
        if (ast_mode_noises(task->mode, AST_MOD_POS)) {
            print_rows(out, pos_rows, N_POS_ROWS, &task->model.pos, &task->random.pos);
            char label[64];
            snprintf(label, sizeof label, "morans_i (%d genes)", r->n_genes);
            fprintf(out, "  %-26s %9.4f %9.4f   true coordinates %.4f\n", label, mean_of(task->model.morans, r->n_genes),
                    mean_of(task->random.morans, r->n_genes), mean_of(r->morans_true, r->n_genes));
        }
        if (ast_mode_noises(task->mode, AST_MOD_EXPR))
            print_rows(out, expr_rows, N_EXPR_ROWS, &task->model.expr, &task->random.expr);
    }
}

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

static cJSON *report_json(const ast_eval_report *r)
{
    cJSON *o = cJSON_CreateObject(), *tasks = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "split", r->split);
    cJSON_AddNumberToObject(o, "sets", r->sets);
    cJSON_AddNumberToObject(o, "set_size", r->set_size);
    cJSON_AddNumberToObject(o, "cells", r->cells);
    cJSON_AddNumberToObject(o, "k_neighbors", r->k);
    cJSON_AddNumberToObject(o, "num_steps", r->num_steps);
    cJSON_AddNumberToObject(o, "network_evaluations", r->evaluations);
    cJSON_AddStringToObject(o, "return", ast_sample_return_name(r->ret));
    cJSON_AddNumberToObject(o, "seconds", r->seconds);
    cJSON_AddItemToObject(o, "morans_i_true", per_gene_json(r, r->morans_true));
    for (int t = 0; t < r->n_tasks; t++) {
        const ast_eval_task *task = &r->tasks[t];
        cJSON *to = cJSON_CreateObject();
        cJSON_AddItemToObject(to, "model", scores_json(r, task->mode, &task->model));
        cJSON_AddItemToObject(to, "random", scores_json(r, task->mode, &task->random));
        cJSON_AddItemToObject(tasks, ast_mode_name(task->mode), to);
    }
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
