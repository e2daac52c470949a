/* One run's directory: summary.json, eval.json, metrics.jsonl (loss
 * curves, monitor lines and routing) and config.yaml. Missing pieces are
 * noted, never fatal: the report shows what exists. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "report_internal.h"

void rp_series_push(rp_series *s, double x, double y)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->x = ast_xrealloc(s->x, (size_t)s->cap * sizeof *s->x);
        s->y = ast_xrealloc(s->y, (size_t)s->cap * sizeof *s->y);
    }
    s->x[s->n] = x, s->y[s->n] = y;
    s->n++;
}

void rp_series_free(rp_series *s)
{
    free(s->x), free(s->y);
    memset(s, 0, sizeof *s);
}

cJSON *rp_json_read_file(const char *path)
{
    FILE *f = ast_fopen_regular(path, NULL);
    if (!f) return NULL;
    size_t cap = 4096, len = 0, got;
    char *text = ast_xmalloc(cap);
    while ((got = fread(text + len, 1, cap - len - 1, f)) > 0)
        if ((len += got) == cap - 1) text = ast_xrealloc(text, cap *= 2);
    fclose(f);
    text[len] = '\0';
    cJSON *o = cJSON_Parse(text);
    free(text);
    if (cJSON_IsObject(o)) return o;
    cJSON_Delete(o);
    return NULL;
}

double rp_json_number(const cJSON *obj, const char *path)
{
    char key[512];
    while (obj && *path) {
        size_t n = strcspn(path, ".");
        snprintf(key, sizeof key, "%.*s", (int)n, path);
        obj = cJSON_GetObjectItemCaseSensitive(obj, key);
        path += n + (path[n] == '.');
    }
    if (cJSON_IsBool(obj)) return cJSON_IsTrue(obj);
    return cJSON_IsNumber(obj) ? obj->valuedouble : NAN;
}

static rp_monitor *monitor_of(rp_run *r, const char *name)
{
    for (int i = 0; i < r->n_mon; i++)
        if (!strcmp(r->mon[i].name, name)) return &r->mon[i];
    r->mon = ast_xrealloc(r->mon, (size_t)(r->n_mon + 1) * sizeof *r->mon);
    r->mon[r->n_mon] = (rp_monitor){.name = ast_xstrdup(name)};
    return &r->mon[r->n_mon++];
}

static void monitor_value(rp_run *r, const char *name, double step, int layer, double v)
{
    if (!isfinite(v)) return;
    rp_monitor *m = monitor_of(r, name);
    rp_series_push(layer < 0 ? &m->overall : &m->curve, step, v);
}

/* Values of one step arrive as consecutive lines: fold them into their mean. */
static void average_equal_steps(rp_series *s)
{
    int out = 0;
    for (int i = 0; i < s->n;) {
        int j = i;
        double sum = 0.0;
        for (; j < s->n && s->x[j] == s->x[i]; j++) sum += s->y[j];
        s->x[out] = s->x[i], s->y[out] = sum / (j - i);
        out++, i = j;
    }
    s->n = out;
}

static void metrics_line(rp_run *r, const cJSON *o)
{
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
    const cJSON *metric = cJSON_GetObjectItemCaseSensitive(o, "metric");
    const cJSON *monitor = cJSON_GetObjectItemCaseSensitive(o, "monitor");
    double step = rp_json_number(o, "step");
    if (!isfinite(step)) return;
    if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "train")) {
        double loss = rp_json_number(o, "loss");
        if (isfinite(loss)) rp_series_push(&r->train_loss, step, loss);
        double lr = rp_json_number(o, "lr");
        if (isfinite(lr)) rp_series_push(&r->lr, step, lr);
        monitor_value(r, "train/grad_norm", step, -1, rp_json_number(o, "grad_norm"));
    } else if (cJSON_IsString(kind) && !strcmp(kind->valuestring, "epoch")) {
        double val = rp_json_number(o, "val_loss");
        if (isfinite(val)) rp_series_push(&r->val_loss, step, val);
        /* The sampled validation score (val_knn_k10, val_pcc_gene) is charted as monitors are. */
        char name[512];
        for (const cJSON *f = o->child; f; f = f->next)
            if (f->string && !strncmp(f->string, "val_", 4) && strcmp(f->string, "val_loss") && cJSON_IsNumber(f)) {
                snprintf(name, sizeof name, "validation/%s", f->string + 4);
                monitor_value(r, name, step, -1, f->valuedouble);
            }
    } else if (cJSON_IsString(metric)) {
        char name[512];
        if (cJSON_IsString(monitor) && monitor->valuestring[0])
            snprintf(name, sizeof name, "%s/%s", monitor->valuestring, metric->valuestring);
        else
            snprintf(name, sizeof name, "%s", metric->valuestring);
        double layer = rp_json_number(o, "layer"), value = rp_json_number(o, "value");
        int at = isfinite(layer) ? (int)layer : -1;
        if (!rp_routing_line(&r->routes, metric->valuestring, at, step, value)) monitor_value(r, name, step, at, value);
    }
}

static int read_metrics(rp_run *r, const char *path)
{
    FILE *f = ast_fopen_regular(path, NULL);
    if (!f) return -1;
    char *line = NULL;
    size_t cap = 0;
    int bad = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *o = cJSON_Parse(line);
        if (cJSON_IsObject(o)) metrics_line(r, o);
        else bad++;
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    for (int i = 0; i < r->n_mon; i++) {
        rp_monitor *m = &r->mon[i];
        if (m->overall.n) { /* the monitor's own value over layers is the one to show */
            rp_series_free(&m->curve);
            m->curve = m->overall;
            m->overall = (rp_series){0};
        }
        average_equal_steps(&m->curve);
    }
    return bad;
}

static void note(rp_run *r, const char *text)
{
    size_t used = strlen(r->note);
    snprintf(r->note + used, sizeof r->note - used, "%s%s", used ? "; " : "", text);
}

void rp_run_file(const rp_run *r, const char *sweep_dir, const char *file, char *buf, size_t n)
{
    struct stat st;
    snprintf(buf, n, "%s/%s", sweep_dir, r->dir);
    if (r->dir[0] == '/' || stat(buf, &st) != 0) snprintf(buf, n, "%s", r->dir);
    size_t used = strlen(buf);
    snprintf(buf + used, n - used, "/%s", file);
}

void rp_run_read(rp_run *r, const char *sweep_dir)
{
    char path[4096];
    if (strcmp(r->state, "done")) {
        note(r, r->error ? r->error : !strcmp(r->state, "pending") ? "not started" : "did not finish");
        return;
    }
    if (!r->dir) {
        note(r, "the ledger gives no run directory");
        return;
    }
    rp_run_file(r, sweep_dir, "summary.json", path, sizeof path);
    r->summary = rp_json_read_file(path);
    r->usable = r->summary != NULL;
    r->protocol = rp_protocol_text(cJSON_GetObjectItemCaseSensitive(r->summary, "protocol"));
    if (!r->usable) note(r, "summary.json missing or unreadable");
    rp_run_file(r, sweep_dir, "eval.json", path, sizeof path);
    r->eval = rp_eval_tasks(rp_json_read_file(path), &r->metric_defs);
    if (!r->eval) note(r, "no eval.json, or no task in it");
    rp_run_file(r, sweep_dir, "config.yaml", path, sizeof path);
    rp_read_settings(path, &r->settings);
    rp_run_file(r, sweep_dir, "metrics.jsonl", path, sizeof path);
    int bad = read_metrics(r, path);
    if (bad < 0) note(r, "no metrics.jsonl");
    if (bad > 0) note(r, "unreadable lines in metrics.jsonl skipped");
}

void rp_run_free(rp_run *r)
{
    free(r->id), free(r->config), free(r->state), free(r->dir), free(r->error), free(r->protocol);
    cJSON_Delete(r->summary);
    cJSON_Delete(r->eval);
    cJSON_Delete(r->metric_defs);
    rp_series_free(&r->train_loss);
    rp_series_free(&r->val_loss);
    rp_series_free(&r->lr);
    for (int i = 0; i < r->n_mon; i++)
        free(r->mon[i].name), rp_series_free(&r->mon[i].curve), rp_series_free(&r->mon[i].overall);
    free(r->mon);
    free(r->routes.v);
    ast_strlist_free(&r->settings);
}
