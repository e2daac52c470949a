/* The held-out protocol as every result names it (summary.json, eval.json,
 * the printed tables, the report): which cells were held out decides
 * which method wins, so a number without it cannot be compared. */
#include <cjson/cJSON.h>
#include <stdio.h>

#include "train/train.h"

/* The settings a protocol depends on: the ratios of all but key, the seed
 * of the seeded deals, the column of key, K of z-sections. */
static int uses_ratio(ast_split_kind k) { return k != AST_SPLIT_KEY; }
static int uses_seed(ast_split_kind k) { return k == AST_SPLIT_BLOCKS || k == AST_SPLIT_RANDOM; }

cJSON *ast_split_protocol_json(ast_split_kind kind, const ast_split_opts *o)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddStringToObject(p, "split", ast_split_kind_name(kind));
    if (o->kind == AST_SPLIT_AUTO) cJSON_AddStringToObject(p, "chosen_by", "auto");
    if (uses_seed(kind)) cJSON_AddNumberToObject(p, "split_seed", (double)o->seed);
    if (uses_ratio(kind)) {
        cJSON *r = cJSON_AddObjectToObject(p, "split_ratio");
        cJSON_AddNumberToObject(r, "train", 1.0 - o->val - o->test);
        cJSON_AddNumberToObject(r, "val", o->val);
        cJSON_AddNumberToObject(r, "test", o->test);
    }
    if (kind == AST_SPLIT_KEY) cJSON_AddStringToObject(p, "split_key", o->key ? o->key : "");
    if (kind == AST_SPLIT_SECTIONS && o->sections_from_z > 0) cJSON_AddNumberToObject(p, "sections_from_z", o->sections_from_z);
    return p;
}

void ast_split_protocol_text(ast_split_kind kind, const ast_split_opts *o, char *buf, size_t n)
{
    int used = snprintf(buf, n, "%s%s", ast_split_kind_name(kind), o->kind == AST_SPLIT_AUTO ? " (auto)" : "");
    if (used < 0 || (size_t)used >= n) return;
    if (kind == AST_SPLIT_KEY) snprintf(buf + used, n - (size_t)used, ", column %s", o->key ? o->key : "");
    else if (uses_seed(kind)) snprintf(buf + used, n - (size_t)used, ", val %g test %g, split seed %llu", o->val, o->test,
                                       (unsigned long long)o->seed);
    else if (kind == AST_SPLIT_SECTIONS && o->sections_from_z > 0)
        snprintf(buf + used, n - (size_t)used, ", %d z-sections, val %g test %g", o->sections_from_z, o->val, o->test);
    else snprintf(buf + used, n - (size_t)used, ", val %g test %g", o->val, o->test);
}
