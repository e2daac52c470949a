/* eval.json in the report's form. `alphast-run train` and `eval` write
 * {"tasks": {task: {"model": {"positions": {..}, "morans_i": {gene: I}},
 * "baselines": {name: {..}}, "best_baseline", "uncertainty", "by_steps"}}};
 * before the baselines came, a task held "model" and "random" only. The
 * report flattens the modality groups (metric names are unique across
 * them), sums the per-gene Moran's I up into one number and files "random"
 * as a baseline, so everything downstream reads one layout. */
#include <math.h>
#include <string.h>

#include "report_internal.h"

/* Moves the members of obj's object `group` up into obj ("positions":
 * {"knn_k10": ..} -> "knn_k10": ..). */
static void hoist(cJSON *obj, const char *group)
{
    cJSON *g = cJSON_DetachItemFromObjectCaseSensitive(obj, group);
    if (!cJSON_IsObject(g)) {
        if (g) cJSON_AddItemToObject(obj, group, g);
        return;
    }
    while (g->child) {
        cJSON *item = cJSON_DetachItemViaPointer(g, g->child);
        cJSON_AddItemToObject(obj, item->string, item);
    }
    cJSON_Delete(g);
}

/* The mean over genes of |Moran's I on these coordinates - on the true
 * ones|: how far a placement moves the genes' spatial autocorrelation (0
 * is perfect). One number instead of a row per gene, which would swamp
 * the tables and the family of tests. */
static void morans_error(cJSON *side, const cJSON *truth)
{
    cJSON *per_gene = cJSON_DetachItemFromObjectCaseSensitive(side, "morans_i");
    const cJSON *g;
    double sum = 0.0;
    int n = 0;
    cJSON_ArrayForEach(g, per_gene)
    {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(truth, g->string); /* gene names may hold dots */
        if (cJSON_IsNumber(g) && cJSON_IsNumber(t)) sum += fabs(g->valuedouble - t->valuedouble), n++;
    }
    if (n) cJSON_AddNumberToObject(side, "morans_i_abs_error", sum / n);
    cJSON_Delete(per_gene);
}

static void flatten(cJSON *side, const cJSON *truth)
{
    if (!cJSON_IsObject(side)) return;
    hoist(side, "positions");
    hoist(side, "expression");
    morans_error(side, truth);
}

static void normalise_task(cJSON *task, const cJSON *truth)
{
    cJSON *random = cJSON_DetachItemFromObjectCaseSensitive(task, "random");
    if (random) {
        cJSON *bases = cJSON_GetObjectItemCaseSensitive(task, "baselines");
        if (!cJSON_IsObject(bases)) bases = cJSON_AddObjectToObject(task, "baselines");
        cJSON_AddItemToObject(bases, "random", random);
    }
    flatten(cJSON_GetObjectItemCaseSensitive(task, "model"), truth);
    cJSON *b;
    cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(task, "baselines")) flatten(b, truth);
}

cJSON *rp_eval_tasks(cJSON *eval, cJSON **metric_defs)
{
    cJSON *defs = cJSON_DetachItemFromObjectCaseSensitive(eval, "metrics");
    *metric_defs = cJSON_IsObject(defs) ? defs : NULL;
    if (!*metric_defs) cJSON_Delete(defs);
    cJSON *tasks = cJSON_DetachItemFromObjectCaseSensitive(eval, "tasks"), *t;
    const cJSON *truth = cJSON_GetObjectItemCaseSensitive(eval, "morans_i_true");
    cJSON_ArrayForEach(t, tasks) normalise_task(t, truth);
    cJSON_Delete(eval);
    if (cJSON_IsObject(tasks) && tasks->child) return tasks;
    cJSON_Delete(tasks);
    return NULL;
}

char *rp_protocol_text(const cJSON *p)
{
    const cJSON *split = cJSON_GetObjectItemCaseSensitive(p, "split");
    if (!cJSON_IsString(split)) return NULL;
    char text[512];
    int n = snprintf(text, sizeof text, "%s", split->valuestring);
    const cJSON *key = cJSON_GetObjectItemCaseSensitive(p, "split_key");
    double z = rp_json_number(p, "sections_from_z"), seed = rp_json_number(p, "split_seed");
    double val = rp_json_number(p, "split_ratio.val"), test = rp_json_number(p, "split_ratio.test");
    if (cJSON_IsString(key)) n += snprintf(text + n, sizeof text - (size_t)n, ", column %.200s", key->valuestring);
    if (!isnan(z)) n += snprintf(text + n, sizeof text - (size_t)n, ", %g z-sections", z);
    if (!isnan(seed)) n += snprintf(text + n, sizeof text - (size_t)n, ", split seed %g", seed);
    if (!isnan(val)) snprintf(text + n, sizeof text - (size_t)n, ", val %g test %g", val, test);
    return ast_xstrdup(text);
}
