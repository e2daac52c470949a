/* Monitor output: each metric value to the writer of the file it goes to
 * (a run's metrics.jsonl), and each warning printed once per run when it
 * first fires. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/sink.h"

struct ast_sink {
    FILE *out;
    ast_sink_write_fn write;
    char *tag;
    long long step;
    int epoch;
    char **warned;
    int n_warned;
};

ast_sink *ast_sink_new(FILE *out, ast_sink_write_fn write, const char *tag)
{
    ast_sink *s = ast_xcalloc(1, sizeof *s);
    s->out = out;
    s->write = write;
    s->tag = ast_xstrdup(tag ? tag : "");
    return s;
}

void ast_sink_free(ast_sink *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_warned; i++) free(s->warned[i]);
    free(s->warned);
    free(s->tag);
    free(s);
}

void ast_sink_set_step(ast_sink *s, long long step, int epoch)
{
    s->step = step;
    s->epoch = epoch;
}

void ast_sink_emit(ast_sink *s, const char *name, int layer, double value)
{
    if (s->out) s->write(s->out, s->tag, s->step, s->epoch, name, layer, value);
}

void ast_sink_warn_once(ast_sink *s, const char *key, const char *fmt, ...)
{
    for (int i = 0; i < s->n_warned; i++)
        if (!strcmp(s->warned[i], key)) return;
    s->warned = ast_xrealloc(s->warned, (size_t)(s->n_warned + 1) * sizeof *s->warned);
    s->warned[s->n_warned++] = ast_xstrdup(key);

    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ast_log(AST_LOG_WARN, "[%s] step %lld: %s", s->tag, s->step, msg);
}

int ast_sink_n_warnings(const ast_sink *s) { return s->n_warned; }
