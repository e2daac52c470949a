/* The lines of metrics.jsonl (train/metrics_jsonl.h). Numbers go in as
 * raw text in the precision each figure had in the file, so cJSON
 * escapes the names and nothing else changes. */
#include <math.h>
#include <stdlib.h>

#include "base/base.h"
#include "train/metrics_jsonl.h"

cJSON *ast_metrics_line(const char *kind, long long step, int epoch)
{
    cJSON *line = cJSON_CreateObject();
    AST_ASSERT(line, "out of memory making a line of metrics.jsonl");
    cJSON_AddStringToObject(line, "kind", kind);
    ast_metrics_add(line, "time", "%.3f", ast_wall_clock());
    ast_metrics_add(line, "step", "%.0f", (double)step);
    ast_metrics_add(line, "epoch", "%.0f", epoch);
    return line;
}

void ast_metrics_add(cJSON *line, const char *key, const char *fmt, double value)
{
    char text[64];
    if (isfinite(value)) snprintf(text, sizeof text, fmt, value);
    cJSON_AddRawToObject(line, key, isfinite(value) ? text : "null");
}

void ast_metrics_write(FILE *f, cJSON *line)
{
    char *text = cJSON_PrintUnformatted(line);
    cJSON_Delete(line);
    AST_ASSERT(text, "out of memory printing a line of metrics.jsonl");
    fprintf(f, "%s\n", text);
    cJSON_free(text);
}

void ast_metrics_write_monitor(FILE *f, const char *monitor, long long step, int epoch, const char *metric, int layer,
                               double value)
{
    /* kind and time as on the training loop's lines: one table in pandas */
    cJSON *line = ast_metrics_line("monitor", step, epoch);
    cJSON_AddStringToObject(line, "monitor", monitor);
    cJSON_AddStringToObject(line, "metric", metric);
    ast_metrics_add(line, "layer", "%.0f", layer);
    ast_metrics_add(line, "value", "%.9g", value);
    ast_metrics_write(f, line);
}
