/* alphast/sink.h: where monitors' metrics and warnings go (a run's
 * metrics.jsonl and the terminal). */
#ifndef ALPHAST_SINK_H
#define ALPHAST_SINK_H

#include <stdio.h>

#include "alphast/plugin.h"

/* Lines are appended to `out` (may be NULL: warnings only); `tag` prefixes
 * each record (e.g. the monitor's name). */
ast_sink *ast_sink_new(FILE *out, const char *tag);
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
