/* Every metric eval.json reports, once: its key, where its value is kept,
 * which way is better and its name for people. evaluate_report.c prints
 * and writes these rows; eval.json carries `better` and `label` so the
 * report (core/report/) reads them instead of guessing from the name.
 *
 * To add a metric: a double in ast_pos_metrics or ast_expr_metrics
 * (metrics.h), the code that fills it in ast_pos_metrics_compute or
 * ast_expr_metrics_compute, and one row here. */
#include <stddef.h>

#include "eval/metrics.h"

#define POS(field) AST_METRIC_POSITIONS, offsetof(ast_pos_metrics, field)
#define EXPR(field) AST_METRIC_EXPRESSION, offsetof(ast_expr_metrics, field)

const ast_metric_def ast_metric_defs[] = {
    {"knn_k5", POS(knn[0]), AST_BETTER_HIGHER, NULL},
    {"knn_k10", POS(knn[1]), AST_BETTER_HIGHER, NULL},
    {"knn_k20", POS(knn[2]), AST_BETTER_HIGHER, NULL},
    {"dist_row_spearman", POS(dist_row_spearman), AST_BETTER_HIGHER, NULL},
    {"rmsd", POS(rmsd), AST_BETTER_LOWER, NULL},
    {"graph_precision", POS(graph_precision), AST_BETTER_HIGHER, NULL},
    {"graph_recall", POS(graph_recall), AST_BETTER_HIGHER, NULL},
    {"graph_f1", POS(graph_f1), AST_BETTER_HIGHER, NULL},
    {"dist_pearson", POS(dist_pearson), AST_BETTER_HIGHER, "distance correlation (Pearson)"},
    {"dist_spearman", POS(dist_spearman), AST_BETTER_HIGHER, "distance correlation (Spearman)"},
    {"procrustes", POS(procrustes), AST_BETTER_LOWER, "Procrustes disparity"},
    {"dist_mse", POS(dist_mse), AST_BETTER_LOWER, NULL},
    {"energy_score", POS(energy_score), AST_BETTER_LOWER, "energy score (one placement)"},
    {"mse", EXPR(mse), AST_BETTER_LOWER, NULL},
    {"mae", EXPR(mae), AST_BETTER_LOWER, NULL},
    {"pcc_gene", EXPR(pcc_gene), AST_BETTER_HIGHER, NULL},
    {"pcc_cell", EXPR(pcc_cell), AST_BETTER_HIGHER, NULL},
    {"cosine", EXPR(cosine), AST_BETTER_HIGHER, NULL},
    {"spearman", EXPR(spearman), AST_BETTER_HIGHER, NULL},
};

const int ast_n_metric_defs = (int)(sizeof ast_metric_defs / sizeof ast_metric_defs[0]);

double ast_metric_value(const ast_metric_def *m, const void *metrics)
{
    return *(const double *)((const char *)metrics + m->offset);
}

const char *ast_better_name(ast_better b)
{
    return b == AST_BETTER_HIGHER ? "higher" : b == AST_BETTER_LOWER ? "lower" : "closer_to_truth";
}
