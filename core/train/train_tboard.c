/* logging.logger: tensorboard: every value of the run's metrics.jsonl, also
 * as a TensorBoard scalar of the run directory's events file. The lines are
 * read back from metrics.jsonl as they are flushed, so whatever writes there
 * (the loop, masking, monitor plugins) is charted without knowing of
 * TensorBoard, under the step and wall time of its line. Tags: KIND/FIELD
 * for the loop's lines (train/loss, epoch/val_loss, ...), and
 * monitor/MONITOR/METRIC, with /layerL for a layer's value, for monitors'. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/tfevents.h"
#include "train_internal.h"

struct train_tboard {
    ast_tfevents *events;
    FILE *in; /* metrics.jsonl, at the end of the last line charted */
    char *line;
    size_t cap;
};

int train_tboard_open(ast_trainer *t, ast_error *e)
{
    if (!t->tc.tensorboard || t->ranks.rank != 0) return 0;
    char path[4096];
    FILE *in = fopen(ast_trainer_file(t, "metrics.jsonl", path, sizeof path), "r");
    if (!in) {
        ast_error_set(e, "%s: cannot open for reading: %s", path, strerror(errno));
        return -1;
    }
    /* A resumed run's earlier lines are in an earlier attempt's events file;
     * the lines it logs start at the step after its checkpoint's. */
    fseek(in, 0, SEEK_END);
    ast_tfevents *events = ast_tfevents_open(t->dir, ast_wall_clock(), t->step + 1, e);
    if (!events) {
        fclose(in);
        return -1;
    }
    t->tboard = ast_xcalloc(1, sizeof *t->tboard);
    *t->tboard = (train_tboard){.events = events, .in = in};
    return 0;
}

void train_tboard_close(ast_trainer *t)
{
    if (!t->tboard) return;
    ast_tfevents_close(t->tboard->events);
    fclose(t->tboard->in);
    free(t->tboard->line);
    free(t->tboard);
    t->tboard = NULL;
}

static const char *text_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void chart_monitor(ast_tfevents *ev, const cJSON *o, double time, int64_t step)
{
    const char *monitor = text_of(o, "monitor"), *metric = text_of(o, "metric");
    const cJSON *layer = cJSON_GetObjectItemCaseSensitive(o, "layer");
    const cJSON *value = cJSON_GetObjectItemCaseSensitive(o, "value");
    if (!monitor || !metric || !cJSON_IsNumber(value)) return; /* null: not finite */
    char tag[512];
    int n = snprintf(tag, sizeof tag, "monitor/%s/%s", monitor, metric);
    if (cJSON_IsNumber(layer) && layer->valuedouble >= 0 && n > 0 && (size_t)n < sizeof tag)
        snprintf(tag + n, sizeof tag - (size_t)n, "/layer%d", layer->valueint);
    ast_tfevents_scalar(ev, time, step, tag, (float)value->valuedouble);
}

static void chart_fields(ast_tfevents *ev, const cJSON *o, const char *kind, double time, int64_t step)
{
    char tag[512];
    for (const cJSON *f = o->child; f; f = f->next) {
        if (!cJSON_IsNumber(f) || !strcmp(f->string, "time") || !strcmp(f->string, "step") ||
            !strcmp(f->string, "epoch"))
            continue;
        snprintf(tag, sizeof tag, "%s/%s", kind, f->string);
        ast_tfevents_scalar(ev, time, step, tag, (float)f->valuedouble);
    }
}

static void chart_line(ast_tfevents *ev, const char *line)
{
    cJSON *o = cJSON_Parse(line);
    const char *kind = text_of(o, "kind");
    const cJSON *time = cJSON_GetObjectItemCaseSensitive(o, "time");
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(o, "step");
    if (kind && cJSON_IsNumber(time) && cJSON_IsNumber(step)) {
        if (!strcmp(kind, "monitor")) chart_monitor(ev, o, time->valuedouble, (int64_t)step->valuedouble);
        else chart_fields(ev, o, kind, time->valuedouble, (int64_t)step->valuedouble);
    }
    cJSON_Delete(o);
}

void train_tboard_sync(ast_trainer *t)
{
    train_tboard *tb = t->tboard;
    if (!tb) return;
    fflush(t->metrics);
    clearerr(tb->in); /* the end it met last time has moved on */
    ssize_t n;
    while ((n = getline(&tb->line, &tb->cap, tb->in)) > 0) {
        if (tb->line[n - 1] != '\n') { /* not all there yet: read it next time */
            fseek(tb->in, -(long)n, SEEK_CUR);
            break;
        }
        chart_line(tb->events, tb->line);
    }
    ast_error e = {{0}};
    if (ast_tfevents_flush(tb->events, &e) < 0) {
        /* Training goes on: losing the charts is no reason to lose the run. */
        ast_log(AST_LOG_WARN, "%s; TensorBoard's events stop there, metrics.jsonl has every value", e.msg);
        train_tboard_close(t);
    }
}
