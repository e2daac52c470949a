/* alphast/sink.h: where monitors' metrics and warnings go (a run's
 * metrics.jsonl and the terminal). */
#ifndef ALPHAST_SINK_H
#define ALPHAST_SINK_H

#include <stdio.h>

#include "alphast/plugin.h"

/* Writes one value of monitor `tag` to out, in the format of the file out
 * is: the trainer's ast_metrics_write_monitor, a line of metrics.jsonl
 * that cJSON writes (the engine links no cJSON, so the file's owner does). */
typedef void (*ast_sink_write_fn)(FILE *out, const char *tag, long long step, int epoch, const char *metric, int layer,
                                  double value);

/* Values go to `out` through `write` (out may be NULL: warnings only);
 * `tag` names each record's source (the monitor's name). */
ast_sink *ast_sink_new(FILE *out, ast_sink_write_fn write, const char *tag);
void ast_sink_free(ast_sink *s);
void ast_sink_set_step(ast_sink *s, long long step, int epoch);
void ast_sink_emit(ast_sink *s, const char *name, int layer, double value);
void ast_sink_warn_once(ast_sink *s, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* How many distinct warnings fired. */
int ast_sink_n_warnings(const ast_sink *s);

#endif
