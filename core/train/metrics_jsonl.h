/* train/metrics_jsonl.h: the lines of a run's metrics.jsonl, JSON objects
 * that cJSON writes: any name in them (a scheduled value's, a monitor's
 * metric) is escaped, so the file stays readable whatever it is. */
#ifndef ALPHAST_METRICS_JSONL_H
#define ALPHAST_METRICS_JSONL_H

#include <cjson/cJSON.h>
#include <stdio.h>

/* {"kind":KIND,"time":now,"step":STEP,"epoch":EPOCH}, for more members. */
cJSON *ast_metrics_line(const char *kind, long long step, int epoch);
/* Adds KEY: VALUE printed with fmt (the figure's precision, "%.9g"), or
 * null when VALUE is not finite. */
void ast_metrics_add(cJSON *line, const char *key, const char *fmt, double value);
/* Writes the line and a newline to f, and frees it. */
void ast_metrics_write(FILE *f, cJSON *line);
/* One monitor value as a line: the writer of the monitors' sinks
 * (engine/sink.h). */
void ast_metrics_write_monitor(FILE *f, const char *monitor, long long step, int epoch, const char *metric, int layer,
                               double value);

#endif
